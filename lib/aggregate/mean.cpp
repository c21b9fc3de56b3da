// SPDX-License-Identifier: BSD-3-Clause
#include "aggregate/mean.hpp"

namespace gradcodec::aggregate {

MergedValues mean(const std::vector<std::span<const float>>& workers) {
  MergedValues out;
  if (workers.empty()) return out;
  const size_t n = workers[0].size();
  std::vector<double> acc(n, 0.0);
  for (const auto& w : workers)
    for (size_t j = 0; j < n; ++j) acc[j] += static_cast<double>(w[j]);
  const double m = static_cast<double>(workers.size());
  out.values.resize(n);
  for (size_t j = 0; j < n; ++j) out.values[j] = static_cast<float>(acc[j] / m);
  out.hop_bits.assign(workers.size() - 1, 32 * static_cast<uint64_t>(n));
  return out;
}

}  // namespace gradcodec::aggregate
