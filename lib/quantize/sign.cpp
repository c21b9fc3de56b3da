// SPDX-License-Identifier: BSD-3-Clause
#include "quantize/sign.hpp"

#include "quantize/codes.hpp"

#include <cmath>

namespace gradcodec::stages {

namespace {

constexpr const char* kName = "sign";
enum class Scale { Mean, L1, None };

class Sign final : public Quantizer {
 public:
  // Its streams: 1 bit per coded value, and a scale.
  double work_per_element(const TensorInfo&, double kept) const noexcept override { return 1 * kept + 0.01; }
  explicit Sign(Scale scale) : scale_(scale) {}

  bool screens_nonfinite() const noexcept override { return true; }

  void encode(Payload& p, Streams& out, const StageContext&) override {
    const std::span<const float> v = codes::coded_values(p);
    if (codes::pack_signs(out.add(kValueStream, 1), v)) codes::note_nonfinite(p, v);
    if (scale_ == Scale::None) return;
    Stream& sc = out.add(kScaleStream, 4);
    if (v.empty()) return;
    // Σ|x| in double over eight interleaved partial sums (independent add chains), then added in
    // a fixed order: deterministic, and several times faster than one chain.
    double part[8] = {};
    size_t i = 0;
    for (; i + 8 <= v.size(); i += 8)
      for (int k = 0; k < 8; ++k) part[k] += std::fabs(static_cast<double>(v[i + k]));
    for (; i < v.size(); ++i) part[i % 8] += std::fabs(static_cast<double>(v[i]));
    double l1 = 0;
    for (double x : part) l1 += x;
    // mean: over the coded values; l1: over the tensor's n elements (dropped values are zeros).
    const double d = scale_ == Scale::L1 && p.sparse ? static_cast<double>(p.n) : static_cast<double>(v.size());
    const float s = static_cast<float>(l1 / d);
    codes::write_f32s(sc, std::span<const float>(&s, 1));
  }

  void decode(Payload& p, const Streams& in, const StageContext&) override {
    const uint64_t count = p.value_count();
    float s = 1.0f;
    if (scale_ != Scale::None) {
      const auto sv = codes::read_f32s(codes::stream(in, kScaleStream, kName), count > 0 ? 1 : 0, kName, kScaleStream);
      if (count > 0) s = sv[0];
    }
    auto bytes = codes::stream(in, kValueStream, kName);
    codes::expect_bytes(kName, kValueStream, bytes.size(), codes::packed_bytes(count, 1, kName));
    codes::expand_bits(bytes, count, s, -s, p.values);
  }

 private:
  Scale scale_;
};

}  // namespace

std::unique_ptr<Stage> make_sign(const Params& p, uint32_t) {
  const std::string& s = p.text("scale");
  return std::make_unique<Sign>(s == "l1" ? Scale::L1 : s == "none" ? Scale::None : Scale::Mean);
}

}  // namespace gradcodec::stages
