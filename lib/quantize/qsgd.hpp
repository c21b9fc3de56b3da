// SPDX-License-Identifier: BSD-3-Clause
// qsgd(levels=s, bucket=512, coding=fixed|elias) — QSGD stochastic quantization (Alistarh et al.,
// NeurIPS 2017; Makkar 2023 (survey) §2.2; docs/stages.md "qsgd").
//
// Per bucket v of `bucket` consecutive coded values (bucket=0: one bucket of all of them):
//   l_i = ⌊|v_i|/‖v‖₂·s⌋, plus 1 with probability frac(|v_i|/‖v‖₂·s);  decoded ‖v‖₂·sign(v_i)·l_i/s.
// Unbiased (E decoded = v) and E‖Q(v) − v‖² ≤ min(n/s², √n/s)·‖v‖² per bucket of n values.
// ‖v‖₂ is rounded to f32 first and both sides use that f32 norm, so the code stays unbiased for
// exactly the scale the decoder applies; l_i is clamped to s (f32 rounding can push |v_i|/‖v‖₂
// above 1 by an ulp).
//
// Wire, version 1:
//   scale  one f32 ‖v‖₂ per bucket, bucket order (4·⌈count/bucket⌉ bytes; none when count = 0).
//   value  per value in order, MSB-first, zero-padded to a byte:
//          fixed: sign bit (1 = non-negative, 0 counts as +) then l_i in ⌈log2(s+1)⌉ bits;
//          elias: Elias-gamma code of l_i + 1 (⌊log2(l_i+1)⌋ zeros, then l_i + 1 in binary), then
//                 the sign bit only when l_i > 0.
// Randomness: one uniform of ctx.rng(Round) per value, in value order.
#pragma once
#include <gradcodec/plugin/params.hpp>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_qsgd(const Params& p, uint32_t version);
}
