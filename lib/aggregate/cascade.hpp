// SPDX-License-Identifier: BSD-3-Clause
// cascade — cascading compression over a ring (Marsit, Wu, He, Guo et al. 2022 §3.2, appendix A,
// s₃): hop 1 sends Q(g₁); worker m decodes what it received, adds its own gradient and sends
// Q(decoded + g_m); the last worker's Q(...) divided by M is the aggregate.
//   s₃ = (1/M)·Q(…Q(Q(g₁) + g₂)… + g_M)
// Q is ssdm (docs/stages.md "ssdm"): bit 1 with probability 1/2 + x_j/(2‖x‖₂), decoded ‖x‖₂·(±1),
// the norm sent as f32 (as the `ssdm` stage does). Unbiased: E[s₃] = mean of the g_m, but the
// variance of every hop adds up (Theorem 3 of the paper).
//
// Randomness: the draw of element j at hop h (1..M) is uniform(rng.at((h−1)·n + j)). Each of the
// M−1 hops sends n bits + 32 (the norm).
#pragma once

#include <gradcodec/merge.hpp>
#include <gradcodec/rng.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace gradcodec::aggregate {

// One ssdm compression of x, decoded (±‖x‖₂ per element), drawing from rng.at(offset + j).
std::vector<float> ssdm_roundtrip(std::span<const float> x, const Rng& rng, uint64_t offset);

MergedValues cascade(const std::vector<std::span<const float>>& workers, const MergeKey& key);

}  // namespace gradcodec::aggregate
