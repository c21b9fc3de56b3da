// SPDX-License-Identifier: BSD-3-Clause
// zsplit's inner loops on f32 elements (lossless/zsplit.hpp has the stream): splitting a run of
// elements into the three planes (zero bitmap, low bytes, high bytes) and joining them back.
// The join has a portable loop and an AVX-512 one (VBMI byte permute + 32-bit expand, sixteen
// elements per step) chosen at run time where the CPU has it; both write the same bytes
// (tests/stages/test_lossless.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace gradcodec::stages::zsplit {

// Elements [0, m) of `x` (4 bytes each): their bitmap bytes into `bits` (bit t of byte j/8 set
// when element j + t is not all-zero bytes), the high byte of each non-zero element at *high
// (advanced), its 3 low bytes at `low` (4 bytes are written per element: `low` has one byte of
// slack); returns the low bytes' count.
size_t split_run(const uint8_t* x, uint64_t m, uint8_t* bits, uint8_t*& high, uint8_t* low) noexcept;

// The inverse over elements [0, m) into out[0, 4m): `bits` from a byte boundary, *low and *high
// advanced by 3 and 1 bytes per set bit (bits at or past m in the last bitmap byte are ignored).
// Requires low (up to low_end) and high to hold the bytes of every set bit; neither is read
// past what the set bits take.
void join_run(const uint8_t* bits, uint64_t m, const uint8_t*& low, const uint8_t* low_end, const uint8_t*& high,
              uint8_t* out) noexcept;
void join_run_portable(const uint8_t* bits, uint64_t m, const uint8_t*& low, const uint8_t* low_end,
                       const uint8_t*& high, uint8_t* out) noexcept;

// The set bits of bits[0, n) (the POPCNT instruction where the CPU has it).
uint64_t count_ones(const uint8_t* bits, size_t n) noexcept;

// Whether join_run takes its vector loop on this CPU.
bool join_vectorised() noexcept;

}  // namespace gradcodec::stages::zsplit
