// SPDX-License-Identifier: BSD-3-Clause
#include "aggregate/cascade.hpp"

#include <cmath>

namespace gradcodec::aggregate {

std::vector<float> ssdm_roundtrip(std::span<const float> x, const Rng& rng, uint64_t offset) {
  double ss = 0;
  for (float v : x) ss += static_cast<double>(v) * v;
  const float norm = static_cast<float>(std::sqrt(ss));
  const double half_inv = norm > 0 ? 0.5 / static_cast<double>(norm) : 0.0;
  std::vector<float> out(x.size());
  for (size_t j = 0; j < x.size(); ++j) {
    const double prob = 0.5 + static_cast<double>(x[j]) * half_inv;  // P(+1)
    const double u = static_cast<double>(rng.at(offset + j) >> 11) * 0x1.0p-53;
    out[j] = u < prob ? norm : -norm;
  }
  return out;
}

MergedValues cascade(const std::vector<std::span<const float>>& workers, const MergeKey& key) {
  MergedValues out;
  if (workers.empty()) return out;
  const uint64_t n = workers[0].size();
  const Rng rng(key.seed, key.frame, key.tensor, RngPurpose::Merge);
  std::vector<float> w = ssdm_roundtrip(workers[0], rng, 0);
  for (uint64_t h = 2; h <= workers.size(); ++h) {
    out.hop_bits.push_back(n + 32);  // hop h−1 sent Q(...) to worker h
    std::vector<float> sum(n);
    for (uint64_t j = 0; j < n; ++j) sum[j] = w[j] + workers[h - 1][j];
    w = ssdm_roundtrip(sum, rng, (h - 1) * n);
  }
  const double inv_m = 1.0 / static_cast<double>(workers.size());
  for (auto& v : w) v = static_cast<float>(static_cast<double>(v) * inv_m);
  out.values = std::move(w);
  return out;
}

}  // namespace gradcodec::aggregate
