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
  if (s.size() > 0xffff) fail(ErrorCode::Internal, "string longer than 65535 bytes");
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

void BitWriter::put(uint64_t value, unsigned nbits) {
  if (nbits == 0) return;
  if (nbits < 64) value &= (uint64_t{1} << nbits) - 1;
  bits_ += nbits;
  // Emit in chunks so acc_ never overflows.
  while (nbits > 0) {
    unsigned take = nbits > 32 ? 32 : nbits;
    uint64_t chunk = value >> (nbits - take);
    if (take < 64) chunk &= (uint64_t{1} << take) - 1;
    acc_ = (acc_ << take) | chunk;
    nacc_ += take;
    nbits -= take;
    while (nacc_ >= 8) {
      nacc_ -= 8;
      out_.push_back(static_cast<uint8_t>(acc_ >> nacc_));
    }
    acc_ &= (uint64_t{1} << nacc_) - 1;
  }
}

void BitWriter::flush() {
  if (nacc_ > 0) {
    out_.push_back(static_cast<uint8_t>(acc_ << (8 - nacc_)));
    acc_ = 0;
    nacc_ = 0;
  }
}

uint64_t BitReader::get(unsigned nbits) {
  if (nbits == 0) return 0;
  if (nbits > bits_left())
    fail(ErrorCode::Corrupt, what_ + ": bit stream ends early (at bit " + std::to_string(pos_) + ")");
  uint64_t v = 0;
  while (nbits > 0) {
    uint64_t byte = d_[pos_ >> 3];
    unsigned off = pos_ & 7;
    unsigned avail = 8 - off;
    unsigned take = nbits < avail ? nbits : avail;
    uint64_t bits = (byte >> (avail - take)) & ((1u << take) - 1);
    v = (v << take) | bits;
    pos_ += take;
    nbits -= take;
  }
  return v;
}

unsigned bits_for(uint64_t n) noexcept {
  if (n <= 1) return 0;
  return static_cast<unsigned>(std::bit_width(n - 1));
}

}  // namespace gradcodec
