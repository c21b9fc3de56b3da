// SPDX-License-Identifier: BSD-3-Clause
// Shared helpers of the sign-based merge methods (marsit, majority): a worker's sign bits and
// scale, and the ±η output. Private to lib/aggregate.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

namespace gradcodec::aggregate {

// Sign bit of a value: 1 = non-negative (0 and −0 count as +), 0 = negative (docs/merge.md).
// NaN gets 0 (it is not ≥ 0).
inline uint8_t sign_bit(float x) noexcept { return x >= 0.0f ? 1 : 0; }

// One unpacked bit (0/1) per element.
inline std::vector<uint8_t> sign_bits(std::span<const float> v) {
  std::vector<uint8_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = sign_bit(v[i]);
  return b;
}

// A worker's scale: mean |value| over the tensor (the `sign` stage's scale=mean rule; a tensor
// decoded from a sign or ssdm record gives back the record's scale). 0 for an empty tensor.
inline double mean_abs(std::span<const float> v) {
  if (v.empty()) return 0.0;
  double s = 0;
  for (float x : v) s += std::fabs(static_cast<double>(x));
  return s / static_cast<double>(v.size());
}

// η = the mean of the workers' scales.
inline double mean_scale(const std::vector<std::span<const float>>& workers) {
  double s = 0;
  for (const auto& w : workers) s += mean_abs(w);
  return workers.empty() ? 0.0 : s / static_cast<double>(workers.size());
}

// bit → +η / −η.
inline std::vector<float> expand(const std::vector<uint8_t>& bits, double eta) {
  const float e = static_cast<float>(eta);
  std::vector<float> v(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) v[i] = bits[i] ? e : -e;
  return v;
}

}  // namespace gradcodec::aggregate
