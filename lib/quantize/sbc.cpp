// SPDX-License-Identifier: BSD-3-Clause
#include "quantize/sbc.hpp"

#include "quantize/codes.hpp"

#include <cmath>

namespace gradcodec::stages {

namespace {

constexpr const char* kName = "sbc";

// Drop mode (see sbc.hpp): element positions the index coder will code after us.
bool can_drop(const Payload& p) noexcept { return p.sparse && !p.lowrank && p.block == 1 && !p.index_implicit; }

class Sbc final : public Quantizer {
 public:
  void encode(Payload& p, Streams& out, const StageContext&) override {
    const std::span<const float> v = codes::coded_values(p);
    const size_t n = v.size();
    double sum[2] = {0, 0};
    uint64_t num[2] = {0, 0};
    for (float x : v) {
      const int side = codes::sign_bit(x) ? 1 : 0;
      sum[side] += x;
      ++num[side];
    }
    const double mean_pos = num[1] ? sum[1] / static_cast<double>(num[1]) : 0.0;
    const double mean_neg = num[0] ? sum[0] / static_cast<double>(num[0]) : 0.0;
    const bool keep_pos = num[0] == 0 || (num[1] > 0 && std::fabs(mean_pos) >= std::fabs(mean_neg));
    const float mean = static_cast<float>(keep_pos ? mean_pos : mean_neg);

    Stream& value = out.add(kValueStream, 4);
    if (n > 0) codes::write_f32s(value, std::span<const float>(&mean, 1));
    if (!can_drop(p)) {
      std::vector<uint8_t> bytes;
      codes::BitPacker bits(bytes, n);
      for (float x : v) bits.put(codes::sign_bit(x) == keep_pos ? 1 : 0, 1);
      bits.finish();
      out.add(kSideStream, 1).bytes = std::move(bytes);
      return;
    }
    // Drop the other side: compact index and values in place, keeping their order.
    size_t w = 0;
    for (size_t k = 0; k < p.index.size(); ++k) {
      if (codes::sign_bit(p.values[k]) != keep_pos) continue;
      p.index[w] = p.index[k];
      p.values[w] = mean;
      ++w;
    }
    p.index.resize(w);
    p.values.resize(w);
  }

  void decode(Payload& p, const Streams& in, const StageContext&) override {
    const uint64_t count = p.value_count();
    const auto mean = codes::read_f32s(codes::stream(in, kValueStream, kName), count > 0 ? 1 : 0, kName, kValueStream);
    if (can_drop(p)) {
      p.values.assign(count, count > 0 ? mean[0] : 0.0f);
      return;
    }
    auto bytes = codes::stream(in, kSideStream, kName);
    codes::expect_bytes(kName, kSideStream, bytes.size(), codes::packed_bytes(count, 1, kName));
    codes::expand_bits(bytes, count, count > 0 ? mean[0] : 0.0f, 0.0f, p.values);
  }
};

}  // namespace

std::unique_ptr<Stage> make_sbc(const Params&, uint32_t) { return std::make_unique<Sbc>(); }

}  // namespace gradcodec::stages
