// SPDX-License-Identifier: BSD-3-Clause
// terngrad(clip=2.5) — ternary gradients (Wen et al., NeurIPS 2017 "TernGrad" §3, clipping
// §3.3; GRACE's TernGradCompressor, Xu et al. 2021, clamps the same way).
//
// Over the coded values g (the tensor, or a sparsifier's kept values):
//   1. clip > 0: σ = population standard deviation of g (σ² = mean((g − μ)²), μ = mean(g));
//      g ← clamp(g, −clip·σ, clip·σ), i.e. |g_i| ≤ clip·σ around 0, not around μ. σ = 0 (all
//      values equal, e.g. one value) clips nothing. clip = 0 disables clipping.
//   2. s = max |g| (after clipping), rounded to f32; both sides use that f32 value.
//   3. b_i = 1 with probability |g_i|/s (u_i < |g_i|/s), else 0; decoded s·sign(g_i)·b_i.
// Unbiased for the clipped values (so for g itself when clip = 0). 2 bits per value + one f32.
//
// Wire, version 1:
//   value  2 bits per value, MSB-first, zero-padded to a byte: first b_i, then the sign bit
//          (1 = non-negative, 0 counts as +); a code with b_i = 0 decodes to 0 whatever its sign.
//   scale  s as one f32 (absent — 0 bytes — when there are no values).
// Randomness: one uniform of ctx.rng(Round) per value, in value order.
#pragma once
#include <gradcodec/plugin/params.hpp>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_terngrad(const Params& p, uint32_t version);
}
