// SPDX-License-Identifier: BSD-3-Clause
// Helpers shared by the quantizers (qsgd, terngrad, sign, onebit, ssdm, sbc, intN, fractional):
// the values a quantizer codes, MSB-first bit packing of codes, bucket arithmetic, and checks of
// untrusted stream sizes. Nothing here prints or exits; every failure is an Error.
#pragma once

#include <gradcodec/plugin/stage.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gradcodec::stages::codes {

// The values a quantizer codes: the kept values of a sparsifier, a low-rank stage's factors, or
// the whole tensor (materialised lazily from the source). Encode side only.
std::span<const float> coded_values(Payload& p);

// The sign bit of the wire, the same for every quantizer (docs/stages.md, Quantizers):
// 1 = non-negative, 0 = negative. 0 and -0 count as non-negative (so do NaNs: !(v < 0)).
inline bool sign_bit(float v) noexcept { return !(v < 0.0f); }

// Bytes of `count` codes of `bits` bits each, packed MSB-first and zero-padded to a byte.
// Throws Corrupt naming `stage` when the size would not fit in 64 bits (hostile counts).
uint64_t packed_bytes(uint64_t count, uint64_t bits, const char* stage);

// Number of buckets of `bucket` values (0 = one bucket of everything) over `n` values.
inline uint64_t bucket_count(uint64_t n, uint64_t bucket) noexcept {
  if (n == 0) return 0;
  return bucket == 0 ? 1 : (n + bucket - 1) / bucket;
}

// The named stream, or Corrupt "<stage>: missing stream '<name>'".
std::span<const uint8_t> stream(const Streams& in, const char* name, const char* stage);
// Throws Corrupt "<stage>: <name> stream holds X bytes, expected Y" unless got == want.
void expect_bytes(const char* stage, const char* name, uint64_t got, uint64_t want);
// Reads `count` little-endian f32 from a stream that must hold exactly 4·count bytes.
std::vector<float> read_f32s(std::span<const uint8_t> bytes, uint64_t count, const char* stage, const char* name);
// Appends little-endian f32 values to a stream.
void write_f32s(Stream& s, std::span<const float> v);

// MSB-first bit packer; the layout equals gradcodec::BitWriter's (first code in the high bits of
// the first byte; the last byte zero-padded). put() takes at most 56 bits at a time.
class BitPacker {
 public:
  BitPacker(std::vector<uint8_t>& out, uint64_t expected_bits) : out_(out) { out_.reserve(out_.size() + (expected_bits + 7) / 8); }
  void put(uint64_t value, unsigned nbits) {  // value < 2^nbits
    acc_ = (acc_ << nbits) | value;
    n_ += nbits;
    while (n_ >= 8) {
      n_ -= 8;
      out_.push_back(static_cast<uint8_t>(acc_ >> n_));
    }
    acc_ &= (uint64_t{1} << n_) - 1;
  }
  void finish() {
    if (n_ > 0) out_.push_back(static_cast<uint8_t>(acc_ << (8 - n_)));
    acc_ = 0, n_ = 0;
  }

 private:
  std::vector<uint8_t>& out_;
  uint64_t acc_ = 0;
  unsigned n_ = 0;
};

// Bounds-checked MSB-first reader of a BitPacker stream. get() takes at most 56 bits; reading
// past the end throws Corrupt naming the stage and stream.
class BitUnpacker {
 public:
  BitUnpacker(std::span<const uint8_t> d, const char* stage, const char* name) : d_(d), stage_(stage), name_(name) {}
  uint64_t get(unsigned nbits) {
    while (n_ < nbits) {
      if (pos_ >= d_.size()) ended();
      acc_ = (acc_ << 8) | d_[pos_++];
      n_ += 8;
    }
    n_ -= nbits;
    uint64_t v = acc_ >> n_;
    acc_ &= (uint64_t{1} << n_) - 1;
    return v;
  }
  uint64_t bits_left() const noexcept { return (d_.size() - pos_) * 8 + n_; }
  // Throws Corrupt unless only the zero padding of the last byte is left (variable-length codes).
  void expect_end() const;

 private:
  [[noreturn]] void ended() const;
  std::span<const uint8_t> d_;
  size_t pos_ = 0;
  uint64_t acc_ = 0;
  unsigned n_ = 0;
  const char* stage_;
  const char* name_;
};

// Calls f(i, code) for `count` codes of `bits` bits each (1 ≤ bits ≤ 56), packed MSB-first. The
// caller has checked that b holds exactly packed_bytes(count, bits) bytes: no bounds checks here.
template <class F>
inline void for_each_code(std::span<const uint8_t> b, uint64_t count, unsigned bits, F&& f) {
  const uint8_t* in = b.data();
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  uint64_t acc = 0;  // only the low n bits matter; older bits are shifted out
  unsigned n = 0;
  for (uint64_t i = 0; i < count; ++i) {
    while (n < bits) acc = (acc << 8) | *in++, n += 8;
    n -= bits;
    f(i, (acc >> n) & mask);
  }
}

// Packs one sign bit per value (sign_bit()), MSB-first, into `s`. Returns whether a value is
// NaN or ±Inf (seen in the same pass).
bool pack_signs(Stream& s, std::span<const float> v);

// For a quantizer that screens_nonfinite(), once it has seen a NaN/±Inf among the values v it
// coded: sets p.nonfinite to their number when v are an f32 source's own n values (the case the
// codec leaves to the stage). Values converted from another dtype (an f64 beyond the f32 range
// becomes Inf) are the codec's to count: left as they are.
void note_nonfinite(Payload& p, std::span<const float> v) noexcept;
// Bit i (MSB-first) of a packed stream whose size the caller has checked.
inline bool bit_at(std::span<const uint8_t> b, uint64_t i) noexcept { return (b[i >> 3] >> (7 - (i & 7))) & 1u; }
// Replaces `out` with bit i ? one : zero for the first `count` bits of a packed stream (size
// checked by the caller): eight values per byte from a 256-entry table (8 KB on the stack),
// written once into fresh memory (append_chunked: no zero-fill first).
void expand_bits(std::span<const uint8_t> b, uint64_t count, float one, float zero, std::vector<float>& out);

}  // namespace gradcodec::stages::codes
