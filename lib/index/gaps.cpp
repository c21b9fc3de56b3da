// SPDX-License-Identifier: BSD-3-Clause
#include "index/gaps.hpp"

#include <algorithm>
#include <bit>

namespace gradcodec::stages::idx {

unsigned leb128_size(uint64_t v) noexcept {
  return v == 0 ? 1u : static_cast<unsigned>((std::bit_width(v) + 6) / 7);
}

void put_leb128(std::vector<uint8_t>& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<uint8_t>(v));
}

uint64_t get_leb128(std::span<const uint8_t> s, size_t& pos, const char* coder) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (pos >= s.size()) corrupt(coder, "LEB128 value runs past the end (at byte " + std::to_string(pos) + ")");
    const uint8_t b = s[pos++];
    if (shift == 63 && (b & 0xfe)) corrupt(coder, "LEB128 value overflows 64 bits");
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  corrupt(coder, "LEB128 value longer than 10 bytes");
}

void corrupt(const char* coder, const std::string& why) {
  fail(ErrorCode::Corrupt, std::string(coder) + ": " + why);
}

void check_positions(const Payload& p, const char* coder, bool allow_value_order) {
  if (p.value_order && !allow_value_order)
    fail(ErrorCode::Usage, std::string(coder) +
                               " cannot keep a value-order index (it codes ascending positions); use plain or varint");
  uint64_t next = 0;
  for (uint64_t x : p.index) {
    if (x >= p.universe)
      fail(ErrorCode::Internal, std::string(coder) + ": position " + std::to_string(x) + " is outside [0, " +
                                    std::to_string(p.universe) + ")");
    if (!p.value_order && x < next)
      fail(ErrorCode::Internal, std::string(coder) + ": index is not strictly ascending at position " +
                                    std::to_string(x));
    next = x + 1;
  }
}

void check_count(uint64_t k, uint64_t universe, uint64_t bits, uint64_t min_bits_each, const char* coder) {
  if (k > universe)
    corrupt(coder, "count " + std::to_string(k) + " exceeds the universe of " + std::to_string(universe) +
                       " positions");
  if (min_bits_each > 0 && k > bits / min_bits_each)
    corrupt(coder, "count " + std::to_string(k) + " needs at least " + std::to_string(min_bits_each) +
                       " bits per position but the stream holds " + std::to_string(bits) + " bits");
}

void GapDecoder::out_of_range(uint64_t gap) const {
  corrupt(coder_, "gap " + std::to_string(gap) + " after position " + std::to_string(next_) +
                      " leaves the universe of " + std::to_string(universe_) + " positions");
}

void expect_padding(BitReader& r, const char* coder) {
  const uint64_t left = r.bits_left();
  if (left >= 8) corrupt(coder, std::to_string(left / 8) + " unexpected trailing bytes");
  if (r.get(static_cast<unsigned>(left)) != 0) corrupt(coder, "nonzero padding bits");
}

void check_distinct(const std::vector<uint64_t>& index, const char* coder) {
  std::vector<uint64_t> sorted(index);
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    corrupt(coder, "value-order index repeats a position");
}

}  // namespace gradcodec::stages::idx
