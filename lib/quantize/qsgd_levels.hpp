// SPDX-License-Identifier: BSD-3-Clause
// The hot loop of qsgd's encode: the stochastic level and the code of each value of a run.
// A portable loop and an AVX-512 one (eight values per step in double lanes, the counter-based
// generator's mix in 64-bit lanes) chosen at run time where the CPU has it; both give the same
// codes bit for bit (tests/stages/test_qsgd.cpp).
#pragma once

#include <cstdint>

namespace gradcodec::stages::codes {

// For j < m: r = |x[j]|·scale (double); rc = r when r < s, s when r ≥ s, 0 when r is NaN;
// l = ⌊rc⌋ + [u_j < rc − ⌊rc⌋] with u_j = Rng(key).uniform_at(first + j) (what the stream's
// uniform() gives at that counter); code[j] = (sign_bit(x[j]) << level_bits) | l.
// Requires s < 2^24 and level_bits ≤ 24.
void qsgd_codes(const float* x, uint64_t m, double scale, double s, unsigned level_bits, uint64_t key, uint64_t first,
                uint32_t* code) noexcept;
void qsgd_codes_portable(const float* x, uint64_t m, double scale, double s, unsigned level_bits, uint64_t key,
                         uint64_t first, uint32_t* code) noexcept;

// Whether qsgd_codes takes its vector loop on this CPU.
bool qsgd_codes_vectorised() noexcept;

}  // namespace gradcodec::stages::codes
