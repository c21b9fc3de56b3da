// Expansion of 4-bit codes through a 16-entry table of floats, the hot loop of decoding qsgd's
// 4-bit codes (levels=7) and any other quantizer whose codes are nibbles: code i of a packed
// stream is the high nibble of byte i/2 when i is even, the low nibble when it is odd (MSB-first,
// as codes::BitPacker writes them). A portable loop, and an AVX-512 one (sixteen values per
// step through one in-register permute of the table) chosen at run time where the CPU has it;
// both copy the same table entries, so the same floats bit for bit (tests/stages/test_qsgd.cpp).
#pragma once

#include <cstdint>

namespace gradcodec::stages::codes {

// out[i] = table[code i] for i < count; `table` holds 16 floats. `in` holds at least ⌈count/2⌉ bytes (checked by the
// caller); `out` has room for count floats.
void expand_nibbles(const uint8_t* in, uint64_t count, const float* table, float* out) noexcept;

// The portable loop, whatever the CPU (the reference the vector loop is tested against).
void expand_nibbles_portable(const uint8_t* in, uint64_t count, const float* table, float* out) noexcept;

// Whether expand_nibbles takes the vector loop on this CPU.
bool expand_nibbles_vectorised() noexcept;

}  // namespace gradcodec::stages::codes
