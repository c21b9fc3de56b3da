// SPDX-License-Identifier: BSD-3-Clause
// marsit — Marsit's one-bit sign aggregation over a ring (Wu, He, Guo et al. 2022 (Marsit)
// §4.1.1, eq. (2)). One frame; over a sequence of frames with Marsit's global compensation see
// MarsitSequence (merge.hpp).
//
// Workers 1..M in ring order. The running bit v starts as worker 1's bit; at worker m (m ≥ 2) it
// meets that worker's bit v*:
//   v ⊙ v* = (v ∧ v*) ∨ ((v ⊕ v*) ∧ r),  r ~ Bernoulli(b),  b = (m−1)/m if v* = 0, 1/m if v* = 1.
// By induction P(v = 1 after m workers) = (#ones among workers 1..m)/m, so the final bit is 1
// with probability (#workers with bit 1)/M: an unbiased one-bit estimate of the mean sign.
//
// Randomness: r for element j at worker m is uniform(rng.at(j·(M−1) + m−2)) < b — addressed by
// position, so any split of the elements between threads gives the same bits. Each hop sends one
// bit per element (plus, in the merge, one f32 scale per tensor for η).
#pragma once

#include <gradcodec/merge.hpp>
#include <gradcodec/rng.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace gradcodec::aggregate {

// Worker m's hop (m = 2..M, `m_total` = M): the running bits v meet its bits w in place.
void marsit_step(std::span<uint8_t> v, std::span<const uint8_t> w, uint64_t m, uint64_t m_total, const Rng& rng);

// The ring's final bits. `bits` holds M ≥ 1 workers' unpacked bits (0/1), all of one length.
std::vector<uint8_t> marsit_bits(const std::vector<std::span<const uint8_t>>& bits, const Rng& rng);

// marsit on values: bits = value ≥ 0, output ±η (η = eta or the mean of the workers' mean |value|).
MergedValues marsit(const std::vector<std::span<const float>>& workers, const MergeKey& key,
                    std::optional<double> eta);

}  // namespace gradcodec::aggregate
