// SPDX-License-Identifier: BSD-3-Clause
// majority — signSGD with majority vote (Bernstein et al. 2018; a baseline of Marsit, Wu, He,
// Guo et al. 2022).
//
// Final bit = 1 when at least half of the M workers have bit 1 (2·#ones ≥ M): a tie, possible
// for even M, goes to 1, as 0 counts as + everywhere in gradcodec. Output ±η as marsit.
// Deterministic. Over a ring the partial vote after h workers is a count in 0..h per element, so
// hop h sends ⌈log2(h+1)⌉ bits per element (plus one f32 scale per tensor for η) — more than one
// bit from the second hop on, which is what Marsit avoids.
#pragma once

#include <gradcodec/merge.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace gradcodec::aggregate {

// The vote over M ≥ 1 workers' unpacked bits (0/1), all of one length.
std::vector<uint8_t> majority_bits(const std::vector<std::span<const uint8_t>>& bits);

// Bits per element of a count in 0..h: ⌈log2(h+1)⌉.
uint32_t count_bits(uint64_t h) noexcept;

MergedValues majority(const std::vector<std::span<const float>>& workers, std::optional<double> eta);

}  // namespace gradcodec::aggregate
