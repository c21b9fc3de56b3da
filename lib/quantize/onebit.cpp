// SPDX-License-Identifier: BSD-3-Clause
#include "quantize/onebit.hpp"

#include <algorithm>

#include "quantize/codes.hpp"

namespace gradcodec::stages {

namespace {

constexpr const char* kName = "onebit";

class OneBit final : public Quantizer {
 public:
  // Its streams: 1 bit per coded value, and two f32 means per column of [shape[0], rest].
  double work_per_element(const TensorInfo& t, double kept) const noexcept override {
    const double rows = t.shape.empty() ? 1.0 : static_cast<double>(std::max<uint64_t>(1, t.shape[0]));
    return 1 * kept + 8 / rows + 0.01;
  }
  explicit OneBit(bool per_column) : per_column_(per_column) {}

  void encode(Payload& p, Streams& out, const StageContext&) override {
    const std::span<const float> v = codes::coded_values(p);
    const uint64_t n = v.size();
    const uint64_t cols = columns(p, n);
    std::vector<double> sum(2 * cols, 0.0);
    std::vector<uint64_t> num(2 * cols, 0);
    for (uint64_t i = 0, j = 0; i < n; ++i) {
      const uint64_t g = 2 * j + (codes::sign_bit(v[i]) ? 1 : 0);
      sum[g] += v[i];
      ++num[g];
      if (++j == cols) j = 0;
    }
    std::vector<float> means(n > 0 ? 2 * cols : 0);
    for (size_t g = 0; g < means.size(); ++g)
      means[g] = num[g] ? static_cast<float>(sum[g] / static_cast<double>(num[g])) : 0.0f;
    codes::pack_signs(out.add(kValueStream, 1), v);
    codes::write_f32s(out.add(kScaleStream, 4), means);
  }

  void decode(Payload& p, const Streams& in, const StageContext&) override {
    const uint64_t count = p.value_count();
    const uint64_t cols = columns(p, count);
    const std::vector<float> means =
        codes::read_f32s(codes::stream(in, kScaleStream, kName), count > 0 ? 2 * cols : 0, kName, kScaleStream);
    auto bytes = codes::stream(in, kValueStream, kName);
    codes::expect_bytes(kName, kValueStream, bytes.size(), codes::packed_bytes(count, 1, kName));
    p.values.resize(count);
    for (uint64_t i = 0, j = 0; i < count; ++i) {
      p.values[i] = means[2 * j + (codes::bit_at(bytes, i) ? 1 : 0)];
      if (++j == cols) j = 0;
    }
  }

 private:
  // Number of groups interleaved in value order: C columns of the [shape[0], rest] view for a
  // dense tensor of rank ≥ 2 with per=column, else 1. Always ≥ 1 and ≤ max(count, 1).
  uint64_t columns(const Payload& p, uint64_t count) const {
    if (!per_column_ || p.sparse || p.lowrank || !p.info || p.info->shape.size() < 2 || count == 0) return 1;
    const uint64_t rows = p.info->shape[0];
    if (rows == 0 || count % rows != 0)
      fail(ErrorCode::Corrupt, std::string(kName) + ": " + std::to_string(count) + " values do not fill " +
                                   std::to_string(rows) + " rows");
    return count / rows;
  }

  bool per_column_;
};

}  // namespace

std::unique_ptr<Stage> make_onebit(const Params& p, uint32_t) {
  return std::make_unique<OneBit>(p.text("per") == "column");
}

}  // namespace gradcodec::stages
