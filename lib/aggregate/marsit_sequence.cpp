// SPDX-License-Identifier: BSD-3-Clause
// MarsitSequence (gradcodec/merge.hpp): marsit over frames with Marsit's global compensation and
// periodic full-precision synchronisation (Wu, He, Guo et al. 2022 (Marsit),
// Algorithm 1 lines 1, 9–13; §4.1.3).
#include <gradcodec/merge.hpp>

#include "aggregate/marsit.hpp"
#include "aggregate/mean.hpp"
#include "aggregate/signs.hpp"

#include <algorithm>

namespace gradcodec {

MarsitSequence::MarsitSequence(size_t tensors, MarsitSequenceOptions options) : options_(options), c_(tensors) {}

const std::vector<float>& MarsitSequence::compensation(size_t tensor, size_t worker) const {
  static const std::vector<float> none;
  if (tensor >= c_.size() || worker >= c_[tensor].size()) return none;
  return c_[tensor][worker];
}

MergedValues MarsitSequence::merge(const std::vector<std::span<const float>>& workers, const MergeKey& key,
                                   std::optional<double> eta) {
  if (workers.size() < 2)
    fail(ErrorCode::Usage, "merge needs at least 2 workers, got " + std::to_string(workers.size()));
  const size_t n = workers[0].size();
  for (const auto& w : workers)
    if (w.size() != n)
      fail(ErrorCode::Usage, "merge: workers hold " + std::to_string(n) + " and " + std::to_string(w.size()) + " values");
  if (key.tensor >= c_.size())
    fail(ErrorCode::Internal, "marsit: tensor " + std::to_string(key.tensor) + " beyond the sequence's " +
                                  std::to_string(c_.size()));
  auto& c = c_[key.tensor];
  if (c.empty()) c.assign(workers.size(), std::vector<float>(n, 0.0f));  // Algorithm 2 line 1: c₀ = 0
  if (c.size() != workers.size() || c[0].size() != n)
    fail(ErrorCode::Input, "marsit: tensor " + std::to_string(key.tensor) + " had " + std::to_string(c.size()) +
                               " workers of " + std::to_string(c[0].size()) + " values, frame " +
                               std::to_string(key.frame) + " has " + std::to_string(workers.size()) + " of " +
                               std::to_string(n));
  if (full_precision_frame(key.frame)) {  // lines 12–13
    MergedValues out = aggregate::mean(workers);
    for (auto& cm : c) std::fill(cm.begin(), cm.end(), 0.0f);
    return out;
  }
  // Line 1: the compensated update u = g + c, whose signs the ring merges (lines 4–9).
  std::vector<std::vector<float>> u(workers.size(), std::vector<float>(n));
  for (size_t m = 0; m < workers.size(); ++m)
    for (size_t j = 0; j < n; ++j) u[m][j] = workers[m][j] + c[m][j];
  // η: given, or the workers' scale as plain marsit takes it — of the gradients g, not of u, so
  // that the step the signs are scaled by does not grow with the compensation (Marsit's η_s is a
  // global step size, Algorithm 1 line 9).
  const double step = eta ? *eta : aggregate::mean_scale(workers);
  MergedValues out = aggregate::marsit(std::vector<std::span<const float>>(u.begin(), u.end()), key, step);
  if (options_.compensation)  // line 10: c ← u − g_t
    for (size_t m = 0; m < workers.size(); ++m)
      for (size_t j = 0; j < n; ++j) c[m][j] = u[m][j] - out.values[j];
  return out;
}

}  // namespace gradcodec
