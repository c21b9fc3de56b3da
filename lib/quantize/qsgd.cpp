#include "quantize/qsgd.hpp"

#include "core/pages.hpp"
#include "quantize/codes.hpp"
#include "quantize/expand.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace gradcodec::stages {

namespace {

constexpr const char* kName = "qsgd";

class Qsgd final : public Quantizer {
 public:
  Qsgd(uint32_t levels, uint64_t bucket, bool elias)
      : s_(levels), bucket_(bucket), elias_(elias), level_bits_(bits_for(uint64_t{levels} + 1)) {}
  bool stochastic() const noexcept override { return true; }
  bool screens_nonfinite() const noexcept override { return true; }

  void encode(Payload& p, Streams& out, const StageContext& ctx) override {
    const std::span<const float> v = codes::coded_values(p);
    const uint64_t n = v.size();
    const uint64_t nb = codes::bucket_count(n, bucket_);
    const uint64_t size = bucket_ == 0 ? n : bucket_;
    std::vector<float> norms(nb);
    std::vector<uint8_t> bytes;
    codes::BitPacker bits(bytes, n * (1 + level_bits_));
    Rng rng = ctx.rng(RngPurpose::Round);
    bool nonfinite = false;
    for (uint64_t b = 0; b < nb; ++b) {
      const uint64_t lo = b * size, hi = std::min(n, lo + size);
      double ss = 0;
      for (uint64_t i = lo; i < hi; ++i) ss += static_cast<double>(v[i]) * v[i];
      // Squares of f32 values cannot overflow a double: ss is finite unless a value is NaN/±Inf.
      if (!std::isfinite(ss)) nonfinite = true;
      const float norm = static_cast<float>(std::sqrt(ss));
      norms[b] = norm;
      const double scale = norm > 0 ? s_ / static_cast<double>(norm) : 0.0;
      for (uint64_t i = lo; i < hi; ++i) {
        const double r = std::fabs(static_cast<double>(v[i])) * scale;
        const double u = rng.uniform();
        uint64_t l;
        if (r < s_) {  // NaN fails this test and the next: it codes as level 0
          const uint64_t fl = static_cast<uint64_t>(r);  // r ≥ 0: truncation is ⌊r⌋
          l = fl + (u < r - static_cast<double>(fl) ? 1 : 0);
        } else {
          l = r >= s_ ? s_ : 0;
        }
        put(bits, l, codes::sign_bit(v[i]));
      }
    }
    bits.finish();
    out.add(kValueStream, 1).bytes = std::move(bytes);
    codes::write_f32s(out.add(kScaleStream, 4), norms);
    if (nonfinite) codes::note_nonfinite(p, v);
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
  void put(codes::BitPacker& bits, uint64_t l, bool positive) const {
    if (!elias_) {
      bits.put((uint64_t{positive} << level_bits_) | l, 1 + level_bits_);
      return;
    }
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
