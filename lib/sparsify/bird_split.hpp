// SPDX-License-Identifier: BSD-3-Clause
// BIRD's layer splitting and 1-D attach rule (Wu et al. 2023 (BIRD+) §III-B "Layer Splitting";
// docs/stages.md "bird"). Pure functions of shapes and names: the encoder and the decoder derive
// the same split from the tensor's shape, and the attach rule needs only the frame's tensor infos.
//
// Split of one tensor (PyTorch shapes, C order):
//   rank 4 [O, I, kh, kw]  → O·I blocks of m = kh·kw contiguous elements (one kernel each);
//   rank 2 [O, I]          → O blocks of m = I elements: row o of the stored matrix, i.e. the
//                             paper's "column of the <I, O> matrix" (all weights feeding unit o);
//   rank 3, ≥ 5            → blocks are the last dimension (m = shape.back());
//   rank 0, 1              → not split: a *vector* (bias, norm scale), attached or sent dense.
// An empty tensor (a zero dimension) has no blocks (block size reported as 1).
// Block b of a ≥2-D tensor belongs to output channel b / (blocks / shape[0]).
//
// Attach rule: a rank-1 tensor named "X.leaf" with n > 0 elements attaches to the tensor named
// "X.weight" — or "X.<p>weight" when the leaf is "<p>bias" with a non-empty <p> (PyTorch's
// MultiheadAttention in_proj_bias → in_proj_weight) — when that tensor exists in the frame, is
// floating, non-empty, has rank ≥ 2 and shape[0] = n (one entry per output channel). A name without a dot
// has X = "" ("bias" → "weight"). Anything else (BatchNorm/LayerNorm scales and shifts, whose
// "X.weight" is itself 1-D; orphan or mismatched vectors; scalars) has no sibling.
#pragma once

#include <gradcodec/tensor.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gradcodec::stages {

struct BirdSplit {
  bool vector = false;      // rank 0 or 1: not split into blocks
  uint64_t blocks = 0;      // B (0 for vectors and empty tensors)
  uint64_t block = 1;       // m, elements per block (≥ 1)
  uint64_t channels = 0;    // shape[0] of a ≥2-D tensor
  uint64_t per_channel = 0; // blocks per output channel, B / shape[0]
  uint64_t channel_of(uint64_t b) const noexcept { return b / per_channel; }
};

// The split of a tensor of this shape. Never throws; products are taken only when no dimension
// is 0, so they are bounded by the (already validated) element count.
BirdSplit bird_split(const std::vector<uint64_t>& shape) noexcept;

// The name a 1-D tensor's sibling must have ("X.bias" → "X.weight", "X.in_proj_bias" →
// "X.in_proj_weight", "X.scale" → "X.weight").
std::string bird_sibling_name(const std::string& name);

// For each of `count` tensors (infos by index): the index of the tensor its entries attach to,
// or -1 (not a rank-1 floating tensor, or no sibling as defined above). The first tensor of a
// name wins if names repeat. O(count) with a hash map of names.
std::vector<int64_t> bird_attach_map(size_t count, const std::function<TensorInfo(size_t)>& info);

}  // namespace gradcodec::stages
