// SPDX-License-Identifier: BSD-3-Clause
// The hot loops of decoding fixed-width quantizer codes into floats (qsgd's table path):
// - 2- and 4-bit codes through a table of 2^w floats; code i of a packed stream sits MSB-first
//   (as codes::BitPacker writes it): the high bits of byte i·w/8 come first;
// - 8-bit codes sign·2^7 | l (qsgd with levels=127) to float(step·(±l)), the product in double.
// Each has a portable loop and an AVX-512 one (sixteen values per step through an in-register
// permute of the table; eight products per step in double lanes) chosen at run time where the
// CPU has it. Both give the same floats bit for bit (tests/stages/test_qsgd.cpp).
#pragma once

#include <cstdint>

namespace gradcodec::stages::codes {

// out[i] = table[code i] for i < count, codes of `width` ∈ {2, 4} bits. `in` holds at least
// ⌈count·width/8⌉ bytes (checked by the caller), `table` 2^width floats, `out` room for count.
void expand_codes(const uint8_t* in, uint64_t count, unsigned width, const float* table, float* out) noexcept;
void expand_codes_portable(const uint8_t* in, uint64_t count, unsigned width, const float* table,
                           float* out) noexcept;

// out[i] = float(step · signed_level[in[i]]) for i < count, where signed_level[c] is the double
// (c & 127) · (c >> 7 ? 1 : -1) (so −0 for c = 0: the product keeps that sign).
void scale_codes8(const uint8_t* in, uint64_t count, double step, const double* signed_level, float* out) noexcept;
void scale_codes8_portable(const uint8_t* in, uint64_t count, double step, const double* signed_level,
                           float* out) noexcept;

// Whether the functions above take their vector loops on this CPU.
bool expand_vectorised() noexcept;

}  // namespace gradcodec::stages::codes
