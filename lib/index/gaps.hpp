// SPDX-License-Identifier: BSD-3-Clause
// Shared helpers of the index coders (lib/index/*): the count header, zero-run gaps, the checks
// of encoder input, and bounded decoding of gaps back into positions.
//
// Conventions every index coder follows (docs/stages.d/40-index.md):
//  - A *gap* is the number of unkept positions before a kept one: g_0 = p_0 and
//    g_i = p_i − p_{i−1} − 1 (the zero run before each 1 of the bitmap). Any g ≥ 0 decodes to a
//    strictly ascending sequence, so only the upper bound (< universe) needs checking.
//  - The bit coders start with the count k as LEB128, then their fixed parameters (one byte each),
//    then an MSB-first bit payload (BitWriter) zero-padded to a whole byte. Decoders refuse
//    nonzero padding and trailing bytes.
//  - Every decoder refuses, before reserving anything, a count larger than the universe or than
//    the stream's bits can hold at the coder's minimum bits per position.
#pragma once

#include <gradcodec/bytes.hpp>
#include <gradcodec/plugin/stage.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gradcodec::stages::idx {

// Bytes of v as LEB128 (7 bits per byte, low group first, high bit = more): 1..10.
unsigned leb128_size(uint64_t v) noexcept;
void put_leb128(std::vector<uint8_t>& out, uint64_t v);
// Reads one LEB128 value at s[pos], advancing pos; throws Corrupt naming `coder` on a value that
// runs past the end or overflows 64 bits.
uint64_t get_leb128(std::span<const uint8_t> s, size_t& pos, const char* coder);

// Throws Error(Corrupt, "<coder>: <why>").
[[noreturn]] void corrupt(const char* coder, const std::string& why);

// Encoder-side checks of p.index. A value-order index (p.value_order) is refused with Usage unless
// `allow_value_order`; a position ≥ p.universe, or an unsorted index that is not in value order,
// throws Internal (the stage before the coder broke its contract). Value-order indices must still
// hold distinct positions (checked by the decoder; the encoder checks only the bound).
void check_positions(const Payload& p, const char* coder, bool allow_value_order);

// Calls f(gap) for the zero-run gaps of ascending positions.
template <class F>
void for_each_gap(std::span<const uint64_t> pos, F&& f) {
  uint64_t next = 0;
  for (uint64_t x : pos) {
    f(x - next);
    next = x + 1;
  }
}

// Refuses a decoded count k that cannot be true: k > universe, or k·min_bits_each > bits (the
// bits the stream still holds). Call before reserving k positions.
void check_count(uint64_t k, uint64_t universe, uint64_t bits, uint64_t min_bits_each, const char* coder);

// Rebuilds positions from gaps: each gap must leave the position below the universe.
class GapDecoder {
 public:
  GapDecoder(uint64_t universe, const char* coder) : universe_(universe), coder_(coder) {}
  uint64_t next(uint64_t gap) {
    if (gap >= universe_ - next_) out_of_range(gap);
    const uint64_t p = next_ + gap;
    next_ = p + 1;
    return p;
  }
  // Largest gap that can still be valid (for bounding unary and escape runs).
  uint64_t max_gap() const noexcept { return universe_ > next_ ? universe_ - next_ - 1 : 0; }

 private:
  [[noreturn]] void out_of_range(uint64_t gap) const;
  uint64_t universe_;
  uint64_t next_ = 0;  // smallest position the next gap may reach
  const char* coder_;
};

// After the last code: only zero padding may remain, and less than one byte of it.
void expect_padding(BitReader& r, const char* coder);

// Refuses a value-order index with repeated positions (sorts a copy: O(k log k)).
void check_distinct(const std::vector<uint64_t>& index, const char* coder);

}  // namespace gradcodec::stages::idx
