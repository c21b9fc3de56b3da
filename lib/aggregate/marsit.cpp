// SPDX-License-Identifier: BSD-3-Clause
#include "aggregate/marsit.hpp"

#include "aggregate/signs.hpp"

namespace gradcodec::aggregate {

void marsit_step(std::span<uint8_t> v, std::span<const uint8_t> w, uint64_t m, uint64_t m_total, const Rng& rng) {
  const double b_if0 = static_cast<double>(m - 1) / static_cast<double>(m);  // v* = 0 (so v = 1)
  const double b_if1 = 1.0 / static_cast<double>(m);                        // v* = 1 (so v = 0)
  for (uint64_t j = 0; j < v.size(); ++j) {
    if (v[j] == w[j]) continue;  // v ∧ v* decides; the transient bit is not looked at
    const double b = w[j] ? b_if1 : b_if0;
    const double u = static_cast<double>(rng.at(j * (m_total - 1) + (m - 2)) >> 11) * 0x1.0p-53;
    v[j] = u < b ? 1 : 0;
  }
}

std::vector<uint8_t> marsit_bits(const std::vector<std::span<const uint8_t>>& bits, const Rng& rng) {
  if (bits.empty()) return {};
  const uint64_t m_total = bits.size();
  std::vector<uint8_t> v(bits[0].begin(), bits[0].end());
  for (uint64_t m = 2; m <= m_total; ++m) marsit_step(v, bits[m - 1], m, m_total, rng);
  return v;
}

MergedValues marsit(const std::vector<std::span<const float>>& workers, const MergeKey& key,
                    std::optional<double> eta) {
  std::vector<std::vector<uint8_t>> own;
  own.reserve(workers.size());
  for (const auto& w : workers) own.push_back(sign_bits(w));
  std::vector<std::span<const uint8_t>> views(own.begin(), own.end());
  const Rng rng(key.seed, key.frame, key.tensor, RngPurpose::Merge);
  MergedValues out;
  out.values = expand(marsit_bits(views, rng), eta ? *eta : mean_scale(workers));
  const uint64_t n = workers.empty() ? 0 : workers[0].size();
  out.hop_bits.assign(workers.size() > 1 ? workers.size() - 1 : 0, n + 32);
  return out;
}

}  // namespace gradcodec::aggregate
