// SPDX-License-Identifier: BSD-3-Clause
// The hot loop of qsgd's encode: the stochastic level and the code of each value of a run.
// A portable loop and an AVX-512 one (sixteen values per step in f32 lanes, the counter-based
// generator's mix in 64-bit lanes, each output split into two 32-bit uniforms) chosen at run time
// where the CPU has it; both give the same codes bit for bit (tests/stages/test_qsgd.cpp).
#pragma once

#include <cstdint>

namespace gradcodec::stages::codes {

// The 32-bit uniform word of value i of a stream keyed `key`: the low half of the stream's output
// ⌊i/2⌋ for an even i, its high half for an odd one (two values per generator output).
uint32_t qsgd_word(uint64_t key, uint64_t i) noexcept;

// For j < m, value i = first + j: r = |x[j]|·scale in f32; rc = r when r < s, s when r ≥ s, 0 when
// r is NaN; l = ⌊rc⌋ + [w_i·2⁻³² < rc − ⌊rc⌋] with w_i = qsgd_word(key, i);
// code[j] = (sign_bit(x[j]) << level_bits) | l. Requires s < 2^24 (an integer, exact in f32) and
// level_bits ≤ 24.
void qsgd_codes(const float* x, uint64_t m, float scale, float s, unsigned level_bits, uint64_t key, uint64_t first,
                uint32_t* code) noexcept;
void qsgd_codes_portable(const float* x, uint64_t m, float scale, float s, unsigned level_bits, uint64_t key,
                         uint64_t first, uint32_t* code) noexcept;

// Σ x[i]² over i < n in double (each square exact), as sixteen partial sums: partial k adds the
// squares of x[k], x[k + 16], x[k + 32], … in order; then partial k and k + 8 are added (k < 8),
// then those k and k + 4 (k < 4), then k and k + 2, then 0 and 1. The portable and AVX-512 loops
// give the same double bit for bit.
double qsgd_sum_squares(const float* x, uint64_t n) noexcept;
double qsgd_sum_squares_portable(const float* x, uint64_t n) noexcept;
// The AVX2 loop qsgd_sum_squares takes where the CPU has AVX2 but not AVX-512 (for the tests;
// the portable loop where qsgd_sums_avx2() is false).
double qsgd_sum_squares_avx2(const float* x, uint64_t n) noexcept;
bool qsgd_sums_avx2() noexcept;

// Whether qsgd_codes takes its vector loop on this CPU.
bool qsgd_codes_vectorised() noexcept;

}  // namespace gradcodec::stages::codes
