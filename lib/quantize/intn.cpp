// SPDX-License-Identifier: BSD-3-Clause
#include "quantize/intn.hpp"

#include "quantize/codes.hpp"

#include <algorithm>
#include <cmath>

namespace gradcodec::stages {

namespace {

constexpr const char* kName = "intN";

class IntN final : public Quantizer {
 public:
  explicit IntN(unsigned bits) : bits_(bits), levels_((uint64_t{1} << bits) - 1) {}

  void encode(Payload& p, Streams& out, const StageContext&) override {
    const std::span<const float> v = codes::coded_values(p);
    const size_t n = v.size();
    float lo = 0, hi = 0;
    if (n > 0) {
      lo = hi = v[0];
      for (float x : v) lo = std::min(lo, x), hi = std::max(hi, x);
    }
    const double range = static_cast<double>(hi) - lo;
    const double scale = range > 0 ? static_cast<double>(levels_) / range : 0.0;
    std::vector<uint8_t> bytes;
    codes::BitPacker packer(bytes, n * bits_);
    for (float x : v) {
      const double t = std::floor((static_cast<double>(x) - lo) * scale + 0.5);
      // The comparisons also send NaN to 0.
      const uint64_t q = t > 0 ? (t < static_cast<double>(levels_) ? static_cast<uint64_t>(t) : levels_) : 0;
      packer.put(q, bits_);
    }
    packer.finish();
    out.add(kValueStream, 1).bytes = std::move(bytes);
    const float lohi[2] = {lo, hi};
    codes::write_f32s(out.add(kScaleStream, 4), std::span<const float>(lohi, n > 0 ? 2 : 0));
  }

  void decode(Payload& p, const Streams& in, const StageContext&) override {
    const uint64_t count = p.value_count();
    const auto lohi = codes::read_f32s(codes::stream(in, kScaleStream, kName), count > 0 ? 2 : 0, kName, kScaleStream);
    auto bytes = codes::stream(in, kValueStream, kName);
    codes::expect_bytes(kName, kValueStream, bytes.size(), codes::packed_bytes(count, bits_, kName));
    p.values.resize(count);
    if (count == 0) return;
    const double lo = lohi[0], step = (static_cast<double>(lohi[1]) - lo) / static_cast<double>(levels_);
    float* out = p.values.data();
    codes::for_each_code(bytes, count, bits_, [&](uint64_t i, uint64_t q) {
      out[i] = static_cast<float>(lo + static_cast<double>(q) * step);  // q = 0 gives lo exactly
    });
  }

 private:
  unsigned bits_;
  uint64_t levels_;
};

}  // namespace

std::unique_ptr<Stage> make_intn(const Params& p, uint32_t) {
  return std::make_unique<IntN>(static_cast<unsigned>(p.integer("bits")));
}

}  // namespace gradcodec::stages
