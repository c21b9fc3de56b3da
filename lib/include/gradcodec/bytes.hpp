// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — bounds-checked byte and bit readers/writers (little-endian throughout).
//
// Every read from untrusted bytes goes through ByteReader/BitReader, which throw
// Error(Corrupt, "<what>: ...") instead of reading past the end. Writers append to a vector.
#pragma once

#include <gradcodec/error.hpp>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gradcodec {

// The longest string str16() writes (a u16 length): tensor names and dtype descriptions in a
// container.
inline constexpr size_t kMaxStr16 = 0xffff;

class ByteWriter {
 public:
  explicit ByteWriter(std::vector<uint8_t>& out) : out_(out) {}
  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) { put(v); }
  void u32(uint32_t v) { put(v); }
  void u64(uint64_t v) { put(v); }
  void f32(float v) { put(v); }
  void f64(double v) { put(v); }
  void varint(uint64_t v);  // LEB128
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  // u16 length + bytes (throws Internal if longer than kMaxStr16, which callers check first)
  void str16(std::string_view s);
  size_t size() const { return out_.size(); }
  std::vector<uint8_t>& buffer() { return out_; }

 private:
  template <class T>
  void put(T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));  // the library only builds on little-endian hosts
    out_.insert(out_.end(), b, b + sizeof(T));
  }
  std::vector<uint8_t>& out_;
};

class ByteReader {
 public:
  // `what` names the section in error messages ("tensor record", "index stream").
  ByteReader(std::span<const uint8_t> data, std::string what) : d_(data), what_(std::move(what)) {}
  uint8_t u8() { return get<uint8_t>(); }
  uint16_t u16() { return get<uint16_t>(); }
  uint32_t u32() { return get<uint32_t>(); }
  uint64_t u64() { return get<uint64_t>(); }
  float f32() { return get<float>(); }
  double f64() { return get<double>(); }
  uint64_t varint();
  std::span<const uint8_t> bytes(uint64_t n);
  std::string str16();
  size_t remaining() const { return d_.size() - pos_; }
  size_t position() const { return pos_; }
  bool done() const { return pos_ == d_.size(); }
  // Throws Corrupt unless every byte was consumed.
  void expect_end() const;
  [[noreturn]] void corrupt(const std::string& why) const;
  const std::string& what() const { return what_; }

 private:
  template <class T>
  T get() {
    if (remaining() < sizeof(T)) corrupt("unexpected end");
    T v;
    std::memcpy(&v, d_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::span<const uint8_t> d_;
  size_t pos_ = 0;
  std::string what_;
};

// MSB-first bit packing into bytes (the last byte is zero-padded): the first bit put is the
// most significant bit of the first byte. Up to 31 pending bits are kept in a 64-bit
// accumulator and appended four bytes at a time: call flush() before reading `out` or appending
// to it directly.
class BitWriter {
 public:
  explicit BitWriter(std::vector<uint8_t>& out) : out_(out) {}
  // Appends the low `nbits` bits of value, most significant first (nbits <= 64).
  void put(uint64_t value, unsigned nbits) {
    if (nbits > 32) {
      put32(static_cast<uint32_t>(value >> 32) & mask32(nbits - 32), nbits - 32);
      put32(static_cast<uint32_t>(value), 32);
    } else if (nbits > 0) {
      put32(static_cast<uint32_t>(value) & mask32(nbits), nbits);
    }
  }
  void bit(bool b) { put32(b ? 1u : 0u, 1); }
  void zeros(uint64_t n);                    // appends n zero bits (any n)
  void flush();                              // pads the last partial byte with zeros
  uint64_t bits_written() const { return bits_; }

 private:
  static uint32_t mask32(unsigned n) { return n >= 32 ? 0xffffffffu : (uint32_t{1} << n) - 1; }
  // n in [1, 32], v < 2^n. Invariant between calls: nacc_ < 32 and acc_ < 2^nacc_.
  void put32(uint32_t v, unsigned n) {
    acc_ = (acc_ << n) | v;
    nacc_ += n;
    bits_ += n;
    if (nacc_ >= 32) emit32();
  }
  void emit32();
  std::vector<uint8_t>& out_;
  uint64_t acc_ = 0;
  unsigned nacc_ = 0;
  uint64_t bits_ = 0;
};

// Reads what BitWriter wrote. Every read is bounds-checked: reading past the end throws
// Error(Corrupt, "<what>: bit stream ends early (at bit N)").
class BitReader {
 public:
  BitReader(std::span<const uint8_t> data, std::string what) : d_(data), what_(std::move(what)) {}
  // The next `nbits` bits (nbits <= 64) as an unsigned value, first bit most significant.
  uint64_t get(unsigned nbits) {
    const uint64_t byte = pos_ >> 3;
    if (nbits <= 56 && byte + 8 <= d_.size()) {  // fast path: one unaligned 8-byte load
      if (nbits == 0) return 0;
      uint64_t w;
      std::memcpy(&w, d_.data() + byte, 8);
      w = __builtin_bswap64(w) << (pos_ & 7);
      pos_ += nbits;
      return w >> (64 - nbits);
    }
    return get_slow(nbits);
  }
  bool bit() { return get(1) != 0; }
  // Counts 0 bits up to the next 1 bit and consumes both (the unary code "z zeros, then 1").
  // Throws Corrupt when more than `limit` zeros come first or the stream ends.
  uint64_t unary(uint64_t limit) {
    const uint64_t byte = pos_ >> 3;
    if (byte + 8 <= d_.size()) {  // fast path: the 1 is within the next 57+ bits
      uint64_t w;
      std::memcpy(&w, d_.data() + byte, 8);
      w = __builtin_bswap64(w) << (pos_ & 7);
      if (w != 0) {
        const uint64_t z = static_cast<uint64_t>(__builtin_clzll(w));
        if (z <= limit) {
          pos_ += z + 1;
          return z;
        }
      }
    }
    return unary_slow(limit);
  }
  // Consumes 0 bits until the next 1 bit (left unread) or until `most` zeros were consumed;
  // returns how many. Throws Corrupt when the stream ends first.
  uint64_t skip_zeros(uint64_t most);
  uint64_t bits_left() const { return d_.size() * 8 - pos_; }
  uint64_t position() const { return pos_; }
  const std::string& what() const { return what_; }
  [[noreturn]] void corrupt(const std::string& why) const;

 private:
  uint64_t get_slow(unsigned nbits);
  uint64_t unary_slow(uint64_t limit);
  std::span<const uint8_t> d_;
  uint64_t pos_ = 0;
  std::string what_;
};

// Minimum number of bits to write values in [0, n): ceil(log2 n), 0 for n <= 1.
unsigned bits_for(uint64_t n) noexcept;

}  // namespace gradcodec
