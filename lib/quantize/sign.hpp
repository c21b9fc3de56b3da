// SPDX-License-Identifier: BSD-3-Clause
// sign(scale=mean|l1|none) — scaled sign quantization (docs/stages.md "sign"): signSGD (Bernstein
// et al. 2018) with scale=none, EF-signSGD (Karimireddy et al. 2019, ‖g‖₁/d) with scale=l1, and the
// sign value coding of BIRD/BIRD+ (Wu et al. 2023 §IV: one scaler per layer) with scale=mean.
//
// Each coded value v_i → S·sign(v_i), where sign(0) = +1 (0 and -0 count as non-negative, so a
// zero decodes to +S, and to +1 with scale=none), and
//   mean: S = mean of |v_i| over the coded values (the kept values after a sparsifier, so values
//         sharing one magnitude — BIRD's sign(t)·S — come back exactly);
//   l1:   S = ‖g‖₁/d over the dense tensor: Σ|v_i| / n with n the tensor's element count (for a
//         dense tensor the same as mean; after a sparsifier the dropped values count as zeros);
//         a low-rank stage's factors use their own count;
//   none: S = 1, no scale is sent.
// S is computed in double and sent as f32.
//
// Wire, version 1:
//   value  1 bit per value, MSB-first, zero-padded: 1 = non-negative, 0 = negative.
//   scale  mean/l1: S as one f32 (0 bytes when there are no values); none: no scale stream.
#pragma once
#include <gradcodec/plugin/params.hpp>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_sign(const Params& p, uint32_t version);
}
