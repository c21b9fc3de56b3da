// SPDX-License-Identifier: BSD-3-Clause
#include <gradcodec/bytes.hpp>

#include <bit>

namespace gradcodec {

void ByteWriter::varint(uint64_t v) {
  while (v >= 0x80) {
    out_.push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  out_.push_back(static_cast<uint8_t>(v));
}

void ByteWriter::str16(std::string_view s) {
  if (s.size() > kMaxStr16) fail(ErrorCode::Internal, "string longer than " + std::to_string(kMaxStr16) + " bytes");
  u16(static_cast<uint16_t>(s.size()));
  bytes(s.data(), s.size());
}

uint64_t ByteReader::varint() {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    uint8_t b = u8();
    if (shift == 63 && (b & 0x7e)) corrupt("varint overflows 64 bits");
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  corrupt("varint longer than 10 bytes");
}

std::span<const uint8_t> ByteReader::bytes(uint64_t n) {
  if (n > remaining()) corrupt("length " + std::to_string(n) + " runs past the end");
  auto s = d_.subspan(pos_, n);
  pos_ += n;
  return s;
}

std::string ByteReader::str16() {
  uint16_t n = u16();
  auto b = bytes(n);
  return std::string(b.begin(), b.end());
}

void ByteReader::expect_end() const {
  if (!done()) corrupt(std::to_string(remaining()) + " unexpected trailing bytes");
}

void ByteReader::corrupt(const std::string& why) const {
  fail(ErrorCode::Corrupt, what_ + ": " + why + " (at byte " + std::to_string(pos_) + ")");
}

void BitWriter::emit32() {
  nacc_ -= 32;
  const uint32_t w = static_cast<uint32_t>(acc_ >> nacc_);
  const uint8_t b[4] = {static_cast<uint8_t>(w >> 24), static_cast<uint8_t>(w >> 16), static_cast<uint8_t>(w >> 8),
                        static_cast<uint8_t>(w)};
  out_.insert(out_.end(), b, b + 4);
  acc_ &= (uint64_t{1} << nacc_) - 1;
}

void BitWriter::zeros(uint64_t n) {
  while (n >= 32) put32(0, 32), n -= 32;
  if (n) put32(0, static_cast<unsigned>(n));
}

void BitWriter::flush() {
  if (nacc_ == 0) return;
  const unsigned nbytes = (nacc_ + 7) / 8;
  const uint64_t v = acc_ << (nbytes * 8 - nacc_);
  for (unsigned i = nbytes; i-- > 0;) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  acc_ = 0;
  nacc_ = 0;
}

void BitReader::corrupt(const std::string& why) const {
  fail(ErrorCode::Corrupt, what_ + ": " + why + " (at bit " + std::to_string(pos_) + ")");
}

uint64_t BitReader::get_slow(unsigned nbits) {
  if (nbits == 0) return 0;
  if (nbits > 64) fail(ErrorCode::Internal, what_ + ": BitReader::get of more than 64 bits");
  if (nbits > bits_left()) corrupt("bit stream ends early");
  uint64_t v = 0;
  while (nbits > 0) {
    const uint64_t byte = d_[pos_ >> 3];
    const unsigned off = pos_ & 7;
    const unsigned avail = 8 - off;
    const unsigned take = nbits < avail ? nbits : avail;
    const uint64_t bits = (byte >> (avail - take)) & ((1u << take) - 1);
    v = (v << take) | bits;
    pos_ += take;
    nbits -= take;
  }
  return v;
}

uint64_t BitReader::unary_slow(uint64_t limit) {
  uint64_t zeros = skip_zeros(limit);
  if (bits_left() == 0) corrupt("bit stream ends early in a unary code");
  if (get(1) == 0) corrupt("unary code longer than " + std::to_string(limit));  // `limit` zeros, no 1
  return zeros;
}

uint64_t BitReader::skip_zeros(uint64_t most) {
  uint64_t zeros = 0;
  while (zeros < most) {  // every step consumes bits or returns: bounded by the stream
    const uint64_t left = bits_left();
    if (left == 0) corrupt("bit stream ends early in a run of zeros");
    uint64_t take = left < 56 ? left : 56;
    if (take > most - zeros) take = most - zeros;
    const unsigned t = static_cast<unsigned>(take);
    const uint64_t w = get(t) << (64 - t);  // top-aligned window
    if (w != 0) {
      const unsigned z = static_cast<unsigned>(std::countl_zero(w));
      pos_ -= t - z;  // leave the 1 and what follows unread
      return zeros + z;
    }
    zeros += take;
  }
  return zeros;
}

unsigned bits_for(uint64_t n) noexcept {
  if (n <= 1) return 0;
  return static_cast<unsigned>(std::bit_width(n - 1));
}

}  // namespace gradcodec
