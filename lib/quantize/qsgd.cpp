// SPDX-License-Identifier: BSD-3-Clause
#include "quantize/qsgd.hpp"

#include <gradcodec/detail/pages.hpp>
#include "quantize/codes.hpp"
#include "quantize/expand.hpp"
#include "quantize/qsgd_levels.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace gradcodec::stages {

namespace {

constexpr const char* kName = "qsgd";

class Qsgd final : public Quantizer {
 public:
  Qsgd(uint32_t levels, uint64_t bucket, bool elias)
      : s_(levels), bucket_(bucket), elias_(elias), level_bits_(bits_for(uint64_t{levels} + 1)) {}
  bool stochastic() const noexcept override { return true; }
  bool screens_nonfinite() const noexcept override { return true; }
  // Elias-gamma codes of levels up to 2^24 take up to 49 bits and a sign (else at most 4 B).
  double work_per_element(const TensorInfo&, double kept) const noexcept override { return (elias_ ? 7 : 4) * kept; }

  void encode(Payload& p, Streams& out, const StageContext& ctx) override {
    const std::span<const float> v = codes::coded_values(p);
    const uint64_t n = v.size();
    const uint64_t nb = codes::bucket_count(n, bucket_);
    const uint64_t size = bucket_ == 0 ? n : bucket_;
    std::vector<float> norms(nb);
    std::vector<uint8_t> bytes;
    codes::BitPacker bits(bytes, elias_ ? n * (1 + level_bits_) : 0);
    FixedPacker fixed(bytes, elias_ ? 0 : n, 1 + level_bits_);
    const uint64_t key = ctx.rng(RngPurpose::Round).key();
    const auto s = static_cast<float>(s_);  // exact: levels < 2^24
    bool nonfinite = false, overflow = false;
    uint32_t code[kRun];   // the codes of a run of values: sign << level_bits | level
    float scaled[kRun];    // a run of a bucket whose norm is below 2^-64, times 2^64
    for (uint64_t b = 0; b < nb; ++b) {
      const uint64_t lo = b * size, hi = std::min(n, lo + size);
      const double ss = codes::qsgd_sum_squares(v.data() + lo, hi - lo);
      // Squares of f32 values cannot overflow a double: ss is finite unless a value is NaN/±Inf.
      if (!std::isfinite(ss)) nonfinite = true;
      const float norm = static_cast<float>(std::sqrt(ss));
      if (std::isinf(norm) && std::isfinite(ss)) overflow = true;  // finite values, norm beyond f32
      norms[b] = norm;
      // s/N in f32. A norm below 2^-64 (where s/N could overflow f32) is first multiplied by
      // 2^64 with the bucket's values: exact, and the same r = |v|·s/N up to f32 rounding.
      const bool tiny = norm > 0 && norm < 0x1.0p-64f;
      const float scale = norm > 0 ? s / (tiny ? norm * 0x1.0p64f : norm) : 0.0f;
      for (uint64_t i = lo; i < hi; i += kRun) {
        // Value i's uniform is the 32-bit word i of the stream (two per generator output).
        const uint64_t m = std::min<uint64_t>(kRun, hi - i);
        const float* x = v.data() + i;
        if (tiny) {
          for (uint64_t j = 0; j < m; ++j) scaled[j] = x[j] * 0x1.0p64f;
          x = scaled;
        }
        codes::qsgd_codes(x, m, scale, s, level_bits_, key, i, code);
        if (elias_) {
          for (uint64_t j = 0; j < m; ++j) put_elias(bits, code[j] & ((1u << level_bits_) - 1), code[j] >> level_bits_);
        } else {
          fixed.put(code, m);
        }
      }
    }
    if (elias_) bits.finish();
    else fixed.finish();
    out.add(kValueStream, 1).bytes = std::move(bytes);
    codes::write_f32s(out.add(kScaleStream, 4), norms);
    if (nonfinite) codes::note_nonfinite(p, v);
    else if (overflow) p.overflow = "qsgd: a bucket's L2 norm is beyond float32's range (3.4e38)";
  }

  void decode(Payload& p, const Streams& in, const StageContext&) override {
    const uint64_t count = p.value_count();
    const uint64_t nb = codes::bucket_count(count, bucket_);
    const uint64_t size = bucket_ == 0 ? count : bucket_;
    const std::vector<float> norms = codes::read_f32s(codes::stream(in, kScaleStream, kName), nb, kName, kScaleStream);
    auto bytes = codes::stream(in, kValueStream, kName);
    if (!elias_) codes::expect_bytes(kName, kValueStream, bytes.size(), codes::packed_bytes(count, 1 + level_bits_, kName));
    else if (count > bytes.size() * 8)  // every code takes at least one bit: bound before allocating
      fail(ErrorCode::Corrupt, std::string(kName) + ": value stream of " + std::to_string(bytes.size()) +
                                   " bytes cannot hold " + std::to_string(count) + " codes");
    const unsigned w = 1 + level_bits_;
    if (!elias_ && s_ + 1 == uint64_t{1} << level_bits_ && 8 % w == 0 && (nb == 1 || size * w % 8 == 0))
      return decode_by_table(bytes.data(), count, size, norms, p.values);
    p.values.resize(count);
    float* out = p.values.data();
    if (!elias_) {
      const uint64_t level_mask = (uint64_t{1} << level_bits_) - 1;
      uint64_t b = 0, next = 0;  // current bucket, first value of the next one
      double step = 0;
      codes::for_each_code(bytes, count, 1 + level_bits_, [&](uint64_t i, uint64_t code) {
        if (i == next) step = static_cast<double>(norms[b++]) / s_, next += size;
        const uint64_t l = code & level_mask;
        if (l > s_) bad_level(l);
        // sign bit 1 → +1, 0 → −1, without a branch on the (random) sign
        const double sign = static_cast<double>(code >> level_bits_) * 2.0 - 1.0;
        out[i] = static_cast<float>(step * static_cast<double>(l) * sign);
      });
      return;
    }
    codes::BitUnpacker bits(bytes, kName, kValueStream);
    for (uint64_t b = 0; b < nb; ++b) {
      const uint64_t lo = b * size, hi = std::min(count, lo + size);
      const double step = static_cast<double>(norms[b]) / s_;
      for (uint64_t i = lo; i < hi; ++i) {
        bool positive = true;
        const uint64_t l = get_elias(bits, positive);
        out[i] = static_cast<float>(step * static_cast<double>(l) * (positive ? 1.0 : -1.0));
      }
    }
    bits.expect_end();
  }

 private:
  // The fixed-width codes (sign, then the level in level_bits_ bits), MSB-first: the bytes a
  // BitPacker would write, 32 bits at a time into a buffer sized once.
  class FixedPacker {
   public:
    FixedPacker(std::vector<uint8_t>& out, uint64_t count, unsigned width) : out_(out), w_(width) {
      out_.resize(codes::packed_bytes(count, width, kName));
      at_ = out_.data();
    }
    void put(const uint32_t* c, uint64_t m) {  // w_ ≤ 25 and n_ < 32 on entry: acc_ never overflows
      uint64_t j = 0;
      if (n_ == 0) {  // on a word boundary: widths that divide 32 fill whole words without a carry
        switch (w_) {
          case 2: j = words<2>(c, m); break;
          case 4: j = nibbles(c, m), j += words<4>(c + j, m - j); break;
          case 8: j = words<8>(c, m); break;
          default: break;
        }
      }
      for (; j < m; ++j) {
        acc_ = (acc_ << w_) | c[j];
        n_ += w_;
        if (n_ >= 32) {
          n_ -= 32;
          const auto word = static_cast<uint32_t>(acc_ >> n_);
          at_[0] = static_cast<uint8_t>(word >> 24), at_[1] = static_cast<uint8_t>(word >> 16);
          at_[2] = static_cast<uint8_t>(word >> 8), at_[3] = static_cast<uint8_t>(word);
          at_ += 4;
          acc_ &= (uint64_t{1} << n_) - 1;
        }
      }
    }
    // 4-bit codes 16 at a time (SSE2: packed to bytes, then byte m = code 2m << 4 | code 2m + 1,
    // the bytes words<4> writes); returns the number of codes written, a multiple of 16.
    uint64_t nibbles(const uint32_t* c, uint64_t m) {
      uint64_t j = 0;
#if defined(__SSE2__)
      const __m128i low_byte = _mm_set1_epi16(0x00ff);
      for (; j + 16 <= m; j += 16) {
        auto at = [&](uint64_t k) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(c + j + k)); };
        const __m128i b = _mm_packus_epi16(_mm_packs_epi32(at(0), at(4)), _mm_packs_epi32(at(8), at(12)));  // codes < 16
        const __m128i pairs = _mm_or_si128(_mm_and_si128(_mm_slli_epi16(b, 4), low_byte), _mm_srli_epi16(b, 8));
        _mm_storel_epi64(reinterpret_cast<__m128i*>(at_), _mm_packus_epi16(pairs, pairs));
        at_ += 8;
      }
#endif
      return j;
    }
    // Whole 32-bit words of W-bit codes (big-endian: the first code in the high bits), as many
    // as c[0..m) fills; returns the number of codes written.
    template <unsigned W>
    uint64_t words(const uint32_t* c, uint64_t m) {
      constexpr unsigned per = 32 / W;
      uint64_t j = 0;
      for (; j + per <= m; j += per) {
        uint32_t word = 0;
        for (unsigned k = 0; k < per; ++k) word |= c[j + k] << (32 - W * (k + 1));
        at_[0] = static_cast<uint8_t>(word >> 24), at_[1] = static_cast<uint8_t>(word >> 16);
        at_[2] = static_cast<uint8_t>(word >> 8), at_[3] = static_cast<uint8_t>(word);
        at_ += 4;
      }
      return j;
    }
    void finish() {
      for (; n_ >= 8; n_ -= 8) *at_++ = static_cast<uint8_t>(acc_ >> (n_ - 8));
      if (n_ > 0) *at_++ = static_cast<uint8_t>(acc_ << (8 - n_));
      n_ = 0;
      if (at_ != out_.data() + out_.size()) fail(ErrorCode::Internal, "qsgd: packed size mismatch");
    }

   private:
    std::vector<uint8_t>& out_;
    uint8_t* at_;
    unsigned w_, n_ = 0;
    uint64_t acc_ = 0;
  };

  static constexpr uint64_t kRun = 256;  // values coded between two packings (codes in L1)
  void put_elias(codes::BitPacker& bits, uint64_t l, bool positive) const {
    const uint64_t x = l + 1;
    const unsigned width = static_cast<unsigned>(std::bit_width(x));  // ⌊log2 x⌋ + 1
    bits.put(x, 2 * width - 1);  // width − 1 leading zeros, then x
    if (l > 0) bits.put(positive ? 1 : 0, 1);
  }

  // The fixed-width codes when every code is a valid level (levels = 2^k − 1), the width divides
  // a byte and every bucket starts on a byte: the 2^w values of a bucket are tabulated once and
  // each byte expands to 8/w values. The same products as the general loop, so the same floats.
  void decode_by_table(const uint8_t* in, uint64_t count, uint64_t size, const std::vector<float>& norms,
                       std::vector<float>& values) const {
    const unsigned w = 1 + level_bits_, per = 8 / w;
    const uint64_t level_mask = (uint64_t{1} << level_bits_) - 1, code_mask = (uint64_t{1} << w) - 1;
    float table[256];
    uint64_t table_bucket = ~uint64_t{0};
    // Every value is step·(±l), the product rounded to f32 as the formula does (±l exact in
    // double, and step·(±l) = ±(step·l) bit for bit). Where a bucket has fewer than 8 values per
    // table entry (8-bit codes, small buckets), a table would cost more than it saves and each
    // value is computed directly.
    const bool direct = (code_mask + 1) * 8 > size;
    double signed_level[256];
    for (uint64_t code = 0; code <= code_mask; ++code)
      signed_level[code] = static_cast<double>(code & level_mask) * (static_cast<double>(code >> level_bits_) * 2.0 - 1.0);
    double step = 0;
    values.clear();
    // Written in cache-sized chunks straight into fresh memory. A run starts at a chunk start
    // (a multiple of 4096 elements) or a bucket start (byte-aligned by the caller's condition),
    // so it starts on a byte.
    append_chunked<4096>(values, count, [&](float* dst, uint64_t first, uint64_t n) {
      for (uint64_t i = 0; i < n;) {
        const uint64_t b = (first + i) / size;
        if (b != table_bucket) {
          table_bucket = b;
          step = static_cast<double>(norms[b]) / s_;
          if (!direct)
            for (uint64_t code = 0; code <= code_mask; ++code) table[code] = static_cast<float>(step * signed_level[code]);
        }
        const uint64_t len = std::min(n, (b + 1) * size - first) - i;
        const uint8_t* src = in + (first + i) * w / 8;
        float* out = dst + i;
        uint64_t j = 0;
        if (direct && w == 8) {  // codes sign·2^7 | l (levels = 127)
          codes::scale_codes8(src, len, step, signed_level, out);
          j = len;
        } else if (direct) {
          for (; j < len; ++j) {
            const unsigned k = static_cast<unsigned>(j % per);
            out[j] = static_cast<float>(step * signed_level[(src[j / per] >> (8 - w * (k + 1))) & code_mask]);
          }
        } else if (w == 4 || w == 2) {
          codes::expand_codes(src, len, w, table, out);
          j = len;
        } else {
          for (; j + per <= len; j += per, ++src)
            for (unsigned k = 0; k < per; ++k) out[j + k] = table[(*src >> (8 - w * (k + 1))) & code_mask];
        }
        for (unsigned k = 0; j < len; ++j, ++k) out[j] = table[(*src >> (8 - w * (k + 1))) & code_mask];
        i += len;
      }
    });
  }

  [[noreturn]] void bad_level(uint64_t l) const {
    fail(ErrorCode::Corrupt, std::string(kName) + ": level " + std::to_string(l) + " above levels=" + std::to_string(s_));
  }

  uint64_t get_elias(codes::BitUnpacker& bits, bool& positive) const {
    const unsigned max_zeros = static_cast<unsigned>(std::bit_width(uint64_t{s_} + 1)) - 1;
    unsigned zeros = 0;
    while (bits.get(1) == 0)
      if (++zeros > max_zeros) fail(ErrorCode::Corrupt, std::string(kName) + ": Elias-gamma code longer than levels allow");
    const uint64_t x = (uint64_t{1} << zeros) | bits.get(zeros);
    const uint64_t l = x - 1;
    if (l > s_) bad_level(l);
    positive = l == 0 || bits.get(1) != 0;
    return l;
  }

  uint32_t s_;
  uint64_t bucket_;
  bool elias_;
  unsigned level_bits_;
};

}  // namespace

std::unique_ptr<Stage> make_qsgd(const Params& p, uint32_t) {
  return std::make_unique<Qsgd>(static_cast<uint32_t>(p.integer("levels")), static_cast<uint64_t>(p.integer("bucket")),
                                p.text("coding") == "elias");
}

}  // namespace gradcodec::stages
