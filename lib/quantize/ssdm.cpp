// SPDX-License-Identifier: BSD-3-Clause
#include "quantize/ssdm.hpp"

#include "quantize/codes.hpp"

#include <cmath>

namespace gradcodec::stages {

namespace {

constexpr const char* kName = "ssdm";

class Ssdm final : public Quantizer {
 public:
  // Its streams: 1 bit per coded value, and a scale.
  double work_per_element(const TensorInfo&, double kept) const noexcept override { return 1 * kept + 0.01; }
  bool stochastic() const noexcept override { return true; }

  void encode(Payload& p, Streams& out, const StageContext& ctx) override {
    const std::span<const float> v = codes::coded_values(p);
    const size_t n = v.size();
    double ss = 0;
    for (float x : v) ss += static_cast<double>(x) * x;
    const float norm = static_cast<float>(std::sqrt(ss));
    if (std::isinf(norm) && std::isfinite(ss)) {  // finite values whose norm is beyond f32
      p.overflow = "ssdm: the tensor's L2 norm is beyond float32's range (3.4e38)";
      return;
    }
    const double half_inv = norm > 0 ? 0.5 / static_cast<double>(norm) : 0.0;
    std::vector<uint8_t> bytes;
    codes::BitPacker bits(bytes, n);
    Rng rng = ctx.rng(RngPurpose::Round);
    for (size_t i = 0; i < n; ++i) {
      // P(+1) = 1/2 + g_i/(2N); u < P never holds for P ≤ 0 and always holds for P ≥ 1.
      const double prob = 0.5 + static_cast<double>(v[i]) * half_inv;
      bits.put(rng.uniform() < prob ? 1 : 0, 1);
    }
    bits.finish();
    out.add(kValueStream, 1).bytes = std::move(bytes);
    Stream& sc = out.add(kScaleStream, 4);
    if (n > 0) codes::write_f32s(sc, std::span<const float>(&norm, 1));
  }

  void decode(Payload& p, const Streams& in, const StageContext&) override {
    const uint64_t count = p.value_count();
    const auto sv = codes::read_f32s(codes::stream(in, kScaleStream, kName), count > 0 ? 1 : 0, kName, kScaleStream);
    auto bytes = codes::stream(in, kValueStream, kName);
    codes::expect_bytes(kName, kValueStream, bytes.size(), codes::packed_bytes(count, 1, kName));
    codes::expand_bits(bytes, count, count > 0 ? sv[0] : 0.0f, count > 0 ? -sv[0] : 0.0f, p.values);
  }
};

}  // namespace

std::unique_ptr<Stage> make_ssdm(const Params&, uint32_t) { return std::make_unique<Ssdm>(); }

}  // namespace gradcodec::stages
