// SPDX-License-Identifier: BSD-3-Clause
#include "aggregate/majority.hpp"

#include "aggregate/signs.hpp"

namespace gradcodec::aggregate {

std::vector<uint8_t> majority_bits(const std::vector<std::span<const uint8_t>>& bits) {
  if (bits.empty()) return {};
  std::vector<uint32_t> ones(bits[0].size(), 0);
  for (const auto& w : bits)
    for (size_t j = 0; j < ones.size(); ++j) ones[j] += w[j];
  std::vector<uint8_t> v(ones.size());
  const uint64_t m = bits.size();
  for (size_t j = 0; j < v.size(); ++j) v[j] = 2 * static_cast<uint64_t>(ones[j]) >= m ? 1 : 0;
  return v;
}

uint32_t count_bits(uint64_t h) noexcept {
  uint32_t b = 0;
  while (b < 64 && (uint64_t{1} << b) < h + 1) ++b;
  return b;
}

MergedValues majority(const std::vector<std::span<const float>>& workers, std::optional<double> eta) {
  std::vector<std::vector<uint8_t>> own;
  own.reserve(workers.size());
  for (const auto& w : workers) own.push_back(sign_bits(w));
  std::vector<std::span<const uint8_t>> views(own.begin(), own.end());
  MergedValues out;
  out.values = expand(majority_bits(views), eta ? *eta : mean_scale(workers));
  const uint64_t n = workers.empty() ? 0 : workers[0].size();
  for (uint64_t h = 1; h < workers.size(); ++h) out.hop_bits.push_back(n * count_bits(h) + 32);
  return out;
}

}  // namespace gradcodec::aggregate
