// SPDX-License-Identifier: BSD-3-Clause
#include <gradcodec/metrics.hpp>
#include <gradcodec/plugin/stage.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace gradcodec {

void ErrorMetrics::add(const float* g, const float* gh, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    const double a = g[i], b = gh[i];
    if (!std::isfinite(a) || !std::isfinite(b)) {
      ++nonfinite;
      continue;
    }
    const double d = a - b;
    sum_sq_err += d * d;
    sum_sq_ref += a * a;
    sum_sq_dec += b * b;
    dot += a * b;
    max_abs = std::max(max_abs, std::fabs(d));
    sign_agree += (a >= 0) == (b >= 0);
    ++count;
  }
}

void ErrorMetrics::add(const Tensor& ref, const Tensor& dec) {
  if (ref.elements() != dec.elements()) fail(ErrorCode::Internal, "metrics: element counts differ for " + ref.name());
  if (!is_float(ref.dtype()) || !is_float(dec.dtype())) return;
  const uint64_t n = ref.elements();
  constexpr uint64_t kChunk = 1 << 16;
  std::vector<float> a(std::min(n, kChunk)), b(std::min(n, kChunk));
  const size_t ea = dtype_size(ref.dtype()), eb = dtype_size(dec.dtype());
  for (uint64_t off = 0; off < n; off += kChunk) {
    uint64_t m = std::min(kChunk, n - off);
    to_f32(ref.dtype(), ref.data.data() + off * ea, m, a.data());
    to_f32(dec.dtype(), dec.data.data() + off * eb, m, b.data());
    add(a.data(), b.data(), m);
  }
}

ErrorMetrics& ErrorMetrics::operator+=(const ErrorMetrics& o) {
  sum_sq_err += o.sum_sq_err;
  sum_sq_ref += o.sum_sq_ref;
  sum_sq_dec += o.sum_sq_dec;
  dot += o.dot;
  max_abs = std::max(max_abs, o.max_abs);
  count += o.count;
  sign_agree += o.sign_agree;
  nonfinite += o.nonfinite;
  return *this;
}

double ErrorMetrics::rel_l2() const {
  if (sum_sq_ref == 0) return sum_sq_err == 0 ? 0.0 : INFINITY;
  return std::sqrt(sum_sq_err / sum_sq_ref);
}

double ErrorMetrics::cosine() const {
  if (sum_sq_ref == 0 && sum_sq_dec == 0) return 1.0;
  if (sum_sq_ref == 0 || sum_sq_dec == 0) return 0.0;
  return dot / std::sqrt(sum_sq_ref * sum_sq_dec);
}

double ErrorMetrics::sign_agreement() const { return count ? double(sign_agree) / double(count) : 1.0; }

bool bit_identical(const Tensor& a, const Tensor& b) {
  return a.info.dtype == b.info.dtype && a.info.shape == b.info.shape && a.data.size() == b.data.size() &&
         (a.data.size() == 0 || std::memcmp(a.data.data(), b.data.data(), a.data.size()) == 0);
}

}  // namespace gradcodec
