// SPDX-License-Identifier: BSD-3-Clause
#include "quantize/fractional.hpp"

#include "quantize/codes.hpp"

#include <cmath>
#include <limits>

namespace gradcodec::stages {

namespace {

constexpr const char* kName = "fractional";

class Fractional final : public Quantizer {
 public:
  explicit Fractional(uint32_t intervals) : P_(intervals), index_bits_(bits_for(intervals)) {}

  void encode(Payload& p, Streams& out, const StageContext&) override {
    const std::span<const float> v = codes::coded_values(p);
    const size_t n = v.size();
    double umax = 0, umin = std::numeric_limits<double>::infinity();
    bool has_zero = false;
    for (float x : v) {
      const double a = std::fabs(static_cast<double>(x));
      if (a == 0) has_zero = true;
      else if (a > 0) umax = std::max(umax, a), umin = std::min(umin, a);  // NaN takes no part
    }
    // Edges e_0 = u_max > e_1 > … > e_P = u_min (eq. 20–21); I_p = [e_p, e_{p−1}].
    std::vector<double> edge(P_ + 1, umax);
    if (umax > 0) {
      const double sigma = std::pow(umin / umax, 1.0 / P_);
      for (uint32_t k = 1; k < P_; ++k) edge[k] = umax * std::pow(sigma, static_cast<double>(k));
      edge[P_] = umin;
    }
    std::vector<double> sum(P_, 0.0);
    std::vector<uint64_t> num(P_, 0);
    std::vector<uint32_t> interval(n);
    for (size_t i = 0; i < n; ++i) {
      const double a = std::fabs(static_cast<double>(v[i]));
      if (!(a > 0)) {  // zero (flagged in `side`) or NaN: lowest interval, not in its mean
        interval[i] = P_ - 1;
        continue;
      }
      // The first p (1-based) with a ≥ e_p: binary search over the descending edges e_1..e_P.
      uint32_t lo = 1, hi = P_;
      while (lo < hi) {
        const uint32_t mid = lo + (hi - lo) / 2;
        if (a >= edge[mid]) hi = mid;
        else lo = mid + 1;
      }
      interval[i] = lo - 1;
      sum[lo - 1] += a;
      ++num[lo - 1];
    }
    std::vector<float> means(n > 0 ? P_ : 0);
    for (size_t k = 0; k < means.size(); ++k) means[k] = num[k] ? static_cast<float>(sum[k] / static_cast<double>(num[k])) : 0.0f;

    std::vector<uint8_t> bytes;
    codes::BitPacker bits(bytes, n * (1 + index_bits_));
    for (size_t i = 0; i < n; ++i) bits.put((uint64_t{codes::sign_bit(v[i])} << index_bits_) | interval[i], 1 + index_bits_);
    bits.finish();
    out.add(kValueStream, 1).bytes = std::move(bytes);
    codes::write_f32s(out.add(kScaleStream, 4), means);
    if (has_zero) {
      std::vector<uint8_t> zeros;
      codes::BitPacker zb(zeros, n);
      for (float x : v) zb.put(x == 0.0f ? 1 : 0, 1);
      zb.finish();
      out.add(kSideStream, 1).bytes = std::move(zeros);
    }
  }

  void decode(Payload& p, const Streams& in, const StageContext&) override {
    const uint64_t count = p.value_count();
    const auto means = codes::read_f32s(codes::stream(in, kScaleStream, kName), count > 0 ? P_ : 0, kName, kScaleStream);
    auto bytes = codes::stream(in, kValueStream, kName);
    codes::expect_bytes(kName, kValueStream, bytes.size(), codes::packed_bytes(count, 1 + index_bits_, kName));
    const Stream* zeros = in.find(kSideStream);
    if (zeros) codes::expect_bytes(kName, kSideStream, zeros->view().size(), codes::packed_bytes(count, 1, kName));
    p.values.resize(count);
    const uint64_t index_mask = (uint64_t{1} << index_bits_) - 1;
    float* out = p.values.data();
    codes::for_each_code(bytes, count, 1 + index_bits_, [&](uint64_t i, uint64_t code) {
      const uint64_t k = code & index_mask;
      if (k >= P_) fail(ErrorCode::Corrupt, std::string(kName) + ": interval " + std::to_string(k + 1) + " above P=" + std::to_string(P_));
      out[i] = (code >> index_bits_) ? means[k] : -means[k];
    });
    if (zeros) {
      const std::span<const uint8_t> zero_bits = zeros->view();
      for (uint64_t i = 0; i < count; ++i)
        if (codes::bit_at(zero_bits, i)) out[i] = 0.0f;
    }
  }

 private:
  uint32_t P_;
  unsigned index_bits_;
};

}  // namespace

std::unique_ptr<Stage> make_fractional(const Params& p, uint32_t) {
  return std::make_unique<Fractional>(static_cast<uint32_t>(p.integer("P")));
}

}  // namespace gradcodec::stages
