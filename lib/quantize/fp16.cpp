// SPDX-License-Identifier: BSD-3-Clause
#include "quantize/fp16.hpp"

#include <gradcodec/detail/pages.hpp>
#include "quantize/codes.hpp"

#include <gradcodec/half.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>

namespace gradcodec::stages {

namespace {

template <uint16_t (*To)(float), DType Half>
class HalfCast final : public Quantizer {
 public:
  // Its stream: 2 bytes per coded value.
  double work_per_element(const TensorInfo&, double kept) const noexcept override { return 2 * kept; }
  explicit HalfCast(const char* name) : name_(name) {}
  bool screens_nonfinite() const noexcept override { return true; }
  void encode(Payload& p, Streams& out, const StageContext&) override {
    // The source's own f32 values when dense (no copy); the halves appended in cache-sized
    // chunks (written once, not zero-filled first); ±Inf/NaN halves counted in the same pass.
    const std::span<const float> v = codes::coded_values(p);
    Stream& s = out.add(kValueStream, 2);
    constexpr uint16_t kExp = Half == DType::F16 ? 0x7c00 : 0x7f80;  // a half's exponent bits
    uint64_t nonfinite = 0;
    append_chunked<8192>(s.bytes, v.size() * 2, [&](uint8_t* dst, uint64_t first, uint64_t bytes) {
      const float* x = v.data() + first / 2;
      const uint64_t m = bytes / 2;
      if constexpr (Half == DType::F16) {
        f32_to_f16_n(x, m, dst);
      } else {
        for (uint64_t i = 0; i < m; ++i) {
          const uint16_t h = To(x[i]);
          std::memcpy(dst + 2 * i, &h, 2);
        }
      }
      uint32_t all_ones = 0;  // how many exponents are all ones (NaN/±Inf), counted branch-free
      for (uint64_t i = 0; i < m; ++i) {
        uint16_t h;
        std::memcpy(&h, dst + 2 * i, 2);
        all_ones += (h & kExp) == kExp ? 1u : 0u;
      }
      nonfinite += all_ones;
    });
    if (nonfinite == 0) return;
    // Either NaN/±Inf in the values, or finite values beyond the half type's range, which
    // round to ±Inf: the latter cannot be decoded as they were.
    uint64_t source = 0;
    for (float x : v) source += std::isfinite(x) ? 0 : 1;
    if (source) codes::note_nonfinite(p, v);
    if (nonfinite > source) {
      char why[160];
      std::snprintf(why, sizeof why, "%s: %llu value(s) would round to ±Inf, beyond %s's range (largest finite %s)", name_,
                    static_cast<unsigned long long>(nonfinite - source), Half == DType::F16 ? "float16" : "bfloat16",
                    Half == DType::F16 ? "65504" : "3.39e38");
      p.overflow = why;
    }
  }
  void decode(Payload& p, const Streams& in, const StageContext&) override {
    auto b = in.get(kValueStream);
    const uint64_t count = p.value_count();
    if (b.size() != count * 2)
      fail(ErrorCode::Corrupt, std::string(name_) + ": value stream holds " + std::to_string(b.size()) +
                                   " bytes, expected " + std::to_string(count * 2));
    // Converted in chunks appended to fresh memory (written once, not zero-filled first).
    p.values.clear();
    append_chunked<4096>(p.values, count, [&](float* dst, uint64_t first, uint64_t n) {
      to_f32(Half, b.data() + 2 * first, n, dst);
    });
  }

 private:
  const char* name_;
};

}  // namespace

std::unique_ptr<Stage> make_fp16(const Params&, uint32_t) {
  return std::make_unique<HalfCast<f32_to_f16, DType::F16>>("fp16");
}
std::unique_ptr<Stage> make_bf16(const Params&, uint32_t) {
  return std::make_unique<HalfCast<f32_to_bf16, DType::BF16>>("bf16");
}

}  // namespace gradcodec::stages
