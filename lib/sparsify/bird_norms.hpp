// SPDX-License-Identifier: BSD-3-Clause
// The per-block norms BIRD samples by (Wu et al. 2023 (BIRD+) §III-C; docs/stages.md "bird"): for a
// tensor split into blocks of m contiguous elements, L_i = ‖t_i‖₁ and I_i = ‖t_i‖∞ of each block,
// in one pass over the tensor. The norms decide which blocks are sent, so they are the same bits on
// every machine: each block of fewer than 16 elements is summed in element order (s += |x| from 0,
// in f32), longer runs in 8 lanes combined in order, and blocks longer than 8192 piece by piece.
// Only the speed depends on the CPU (SSE2, and AVX2 where the CPU has it).
#pragma once

#include <gradcodec/tensor.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace gradcodec::stages {

// What the pass of the norms also finds, as it goes: the largest L1 norm (bird_max of l1) and
// whether every L1 norm is finite (an f32 sum of |x| is, unless an element is NaN/Inf or the sum
// overflowed).
struct NormsSummary {
  float l1_max = 0;
  bool finite = true;
};

// Per-block ‖·‖₁ and ‖·‖∞ of `v` split into v.size()/m blocks of m, in one pass (f32
// accumulation: 8 lanes for runs of 16 or more elements, blocks longer than 8192 summed in
// pieces of 8192). NaN propagates into l1 and is skipped by linf.
NormsSummary bird_norms(std::span<const float> v, uint64_t m, std::vector<float>& l1, std::vector<float>& linf);
// The same norms, bit for bit, read from a tensor of any floating dtype 8192 elements at a time
// (no copy of the tensor: the frame plan uses it).
NormsSummary bird_norms(const Tensor& t, uint64_t m, std::vector<float>& l1, std::vector<float>& linf);

// The largest element of v: x > top ? x : top from top = 0, so NaN never wins and an empty v
// gives 0.
float bird_max(std::span<const float> v) noexcept;

// Whether blocks of 8 to 15 elements take the AVX2 path on this CPU (tests and benchmarks report it).
bool bird_norms_avx2() noexcept;
// bird_norms(v, …) without the AVX2 path: the tests hold the two to the same bits.
NormsSummary bird_norms_without_avx2(std::span<const float> v, uint64_t m, std::vector<float>& l1,
                                     std::vector<float>& linf);

}  // namespace gradcodec::stages
