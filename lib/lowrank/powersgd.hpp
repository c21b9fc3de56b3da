// SPDX-License-Identifier: BSD-3-Clause
// powersgd(rank, iters, ef) — PowerSGD rank-r compression (Vogels, Karimireddy & Jaggi 2019,
// "PowerSGD: Practical Low-Rank Gradient Compression", Alg. 1 and Alg. 2; Makkar 2023 (survey)
// §3; docs/stages.md "powersgd"; PyTorch's ddp_comm_hooks/powerSGD_hook.py conventions). Stateful.
//
// A tensor with ≥ 2 dimensions is viewed as M = [n, m] = [shape[0], prod(rest)] (row-major, the
// hook's view). r' = min(n, m, rank). It is compressed only when 2·(n + m)·r' < n·m (PyTorch's
// min_compression_rate = 2); every other tensor — all 1-D and 0-d tensors among them — is sent
// dense (its n values go to the value codec as they are). The decoder applies the same rule to
// the shape, so nothing on the wire says which.
//
// Compressed tensor, per frame (iters power iterations, default 1):
//   M ← M + e                          (error feedback, ef=true: Alg. 2 line 7)
//   Q ← the previous frame's decoded Q (warm start; its first r' columns), or i.i.d. N(0, 1)
//       from ctx.rng(Init) when there is none (first frame, keyframe) — and for every column
//       that is all zero or not finite (a zero or rank-deficient M leaves such columns; they
//       would otherwise stay zero forever)
//   repeat iters times:  P ← M·Q;  P̂ ← orthonormalize(P);  Q ← Mᵀ·P̂
//   decoded M̂ = P̂·Qᵀ;   e ← (M + e) − decoded (what the decoder got, after the value codec)
// orthonormalize: modified Gram–Schmidt in f64. A column whose norm after removing the earlier
// columns is 0 or below 1e-6 of its norm before (numerically dependent: M has rank < r') is set
// to zero instead of divided (PyTorch's epsilon = 0 would give NaN): never NaN, and the product
// P̂·Qᵀ loses nothing, since that column of Q = Mᵀ·0 = 0.
// The error memory e is f32, one per element, encoder-private; dense tensors have e = 0 unless
// a lossy value codec follows.
//
// Wire, version 1: no stream of its own. Values (to the value codec, computed, so `raw` stores
// f32): compressed — P̂ (n·r', column-major) then Q (m·r', column-major); dense — the n values.
// Ratio per compressed matrix (f32 factors): n·m / (r'·(n + m)).
// Shared state (both sides): the decoded Q of the last frame, m × r' f32.
#pragma once
#include <gradcodec/plugin/params.hpp>

#include <cstdint>
#include <vector>

namespace gradcodec::stages {

std::unique_ptr<Stage> make_powersgd(const Params& p, uint32_t version);

// How powersgd treats a tensor of this shape at this rank.
struct PowerSgdView {
  uint64_t n = 0, m = 0;  // M = [n, m]
  uint32_t rank = 0;      // r' = min(n, m, rank)
  bool compressed = false;
  uint64_t factor_values() const noexcept { return compressed ? (n + m) * rank : 0; }
};
PowerSgdView powersgd_view(const std::vector<uint64_t>& shape, uint32_t rank);

}  // namespace gradcodec::stages
