// SPDX-License-Identifier: BSD-3-Clause
#include "quantize/terngrad.hpp"

#include "quantize/codes.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace gradcodec::stages {

namespace {

constexpr const char* kName = "terngrad";

class TernGrad final : public Quantizer {
 public:
  // Its streams: at most 2 bits per coded value, and scales.
  double work_per_element(const TensorInfo&, double kept) const noexcept override { return 1 * kept + 0.01; }
  explicit TernGrad(double clip) : clip_(clip) {}
  bool stochastic() const noexcept override { return true; }

  void encode(Payload& p, Streams& out, const StageContext& ctx) override {
    const std::span<const float> v = codes::coded_values(p);
    const size_t n = v.size();
    // Clip bounds (double); without clipping they are ±inf and leave every value alone.
    double lo = -HUGE_VAL, hi = HUGE_VAL;
    if (clip_ > 0 && n > 0) {
      double sum = 0;
      for (float x : v) sum += x;
      const double mu = sum / static_cast<double>(n);
      double ss = 0;
      for (float x : v) ss += (x - mu) * (x - mu);
      const double sigma = std::sqrt(ss / static_cast<double>(n));
      // Around 0, not μ (Wen et al. 2017 §3.3: |g_i| ≤ cσ). σ = 0 (all values equal) leaves
      // the values alone rather than clipping them all to 0.
      if (sigma > 0) lo = -clip_ * sigma, hi = clip_ * sigma;
    }
    auto clipped = [&](float x) { return std::clamp(static_cast<double>(x), lo, hi); };
    double smax = 0;
    for (float x : v) smax = std::max(smax, std::fabs(clipped(x)));  // NaN never wins std::max
    const float s = static_cast<float>(smax);

    std::vector<uint8_t> bytes;
    codes::BitPacker bits(bytes, 2 * n);
    Rng rng = ctx.rng(RngPurpose::Round);
    const double inv = s > 0 ? 1.0 / static_cast<double>(s) : 0.0;
    for (size_t i = 0; i < n; ++i) {
      const double g = clipped(v[i]);
      const double u = rng.uniform();
      const bool keep = u < std::fabs(g) * inv;  // P(keep) = |g_i|/s
      bits.put((uint64_t{keep} << 1) | (g < 0 ? 0u : 1u), 2);
    }
    bits.finish();
    out.add(kValueStream, 1).bytes = std::move(bytes);
    Stream& sc = out.add(kScaleStream, 4);
    if (n > 0) codes::write_f32s(sc, std::span<const float>(&s, 1));
  }

  void decode(Payload& p, const Streams& in, const StageContext&) override {
    const uint64_t count = p.value_count();
    const std::vector<float> s =
        codes::read_f32s(codes::stream(in, kScaleStream, kName), count > 0 ? 1 : 0, kName, kScaleStream);
    auto bytes = codes::stream(in, kValueStream, kName);
    codes::expect_bytes(kName, kValueStream, bytes.size(), codes::packed_bytes(count, 2, kName));
    p.values.resize(count);
    if (count == 0) return;
    const float by_code[4] = {0.0f, 0.0f, -s[0], s[0]};  // (b, sign bit)
    float table[256][4];  // four codes per byte
    for (unsigned x = 0; x < 256; ++x)
      for (unsigned j = 0; j < 4; ++j) table[x][j] = by_code[(x >> (6 - 2 * j)) & 3u];
    float* out = p.values.data();
    const uint64_t full = count / 4;
    for (uint64_t k = 0; k < full; ++k) std::memcpy(out + 4 * k, table[bytes[k]], sizeof table[0]);
    for (uint64_t i = 4 * full; i < count; ++i) out[i] = table[bytes[full]][i - 4 * full];
  }

 private:
  double clip_;
};

}  // namespace

std::unique_ptr<Stage> make_terngrad(const Params& p, uint32_t) { return std::make_unique<TernGrad>(p.num("clip")); }

}  // namespace gradcodec::stages
