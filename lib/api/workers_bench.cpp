// SPDX-License-Identifier: BSD-3-Clause
// WorkersBench (workers_bench.hpp): the merge methods over several workers' steps.
#include <gradcodec/workers_bench.hpp>

#include <gradcodec/error.hpp>
#include <gradcodec/merge.hpp>
#include <gradcodec/metrics.hpp>

#include <algorithm>
#include <cmath>

namespace gradcodec {

struct WorkersBench::Impl {
  WorkersBenchOptions options;
  std::vector<MergeMethod> methods;
  std::vector<WorkersBenchRow> rows;
  // marsit runs over the steps as one sequence per seed (Marsit's compensation and full syncs).
  std::vector<std::vector<MarsitSequence>> sequences;
  // Σ_t of each method's aggregate per seed and tensor, and of the true mean, in double.
  std::vector<std::vector<std::vector<std::vector<double>>>> sum_agg;
  std::vector<std::vector<double>> sum_mean;
  std::vector<std::vector<ErrorMetrics>> acc;
  size_t steps = 0;

  void start(std::span<const WorkersBenchTensor> tensors) {
    sum_mean.resize(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) sum_mean[i].assign(tensors[i].mean.size(), 0.0);
    sequences.assign(rows.size(), {});
    sum_agg.assign(rows.size(), {});
    for (size_t k = 0; k < rows.size(); ++k) {
      sum_agg[k].assign(rows[k].seeds, sum_mean);
      if (methods[k] == MergeMethod::Marsit)
        sequences[k].assign(rows[k].seeds, MarsitSequence(tensors.size(), {options.compensation, options.full_sync}));
    }
  }
};

WorkersBench::WorkersBench(const WorkersBenchOptions& options) : impl_(std::make_unique<Impl>()) {
  if (options.workers < 2)
    fail(ErrorCode::Usage, "bench --workers needs at least 2 workers, got " + std::to_string(options.workers));
  impl_->options = options;
  for (MergeMethod m : merge_methods()) {
    WorkersBenchRow r;
    r.method = merge_method_name(m);
    r.stochastic = m == MergeMethod::Marsit || m == MergeMethod::Cascade;
    r.seeds = r.stochastic ? std::max(1u, options.seeds) : 1;
    r.hop_bits.assign(options.workers - 1, 0);
    impl_->methods.push_back(m);
    impl_->rows.push_back(r);
  }
  impl_->acc.resize(impl_->rows.size());
  for (size_t k = 0; k < impl_->rows.size(); ++k) impl_->acc[k].resize(impl_->rows[k].seeds);
}

WorkersBench::WorkersBench(WorkersBench&&) noexcept = default;
WorkersBench& WorkersBench::operator=(WorkersBench&&) noexcept = default;
WorkersBench::~WorkersBench() = default;

void WorkersBench::add_step(std::span<const WorkersBenchTensor> tensors) {
  Impl& m = *impl_;
  const size_t s = m.steps;
  if (s == 0) m.start(tensors);
  if (tensors.size() != m.sum_mean.size())
    fail(ErrorCode::Input, "step " + std::to_string(s) + " holds " + std::to_string(tensors.size()) +
                               " tensors, step 0 " + std::to_string(m.sum_mean.size()));
  for (size_t i = 0; i < tensors.size(); ++i) {
    const WorkersBenchTensor& t = tensors[i];
    if (t.workers.size() != m.options.workers)
      fail(ErrorCode::Usage, "step " + std::to_string(s) + ", tensor '" + t.name + "': " +
                                 std::to_string(t.workers.size()) + " workers, not " +
                                 std::to_string(m.options.workers));
    if (t.mean.size() != m.sum_mean[i].size())
      fail(ErrorCode::Input, "step " + std::to_string(s) + ", tensor '" + t.name + "': " +
                                 std::to_string(t.mean.size()) + " elements, step 0 " +
                                 std::to_string(m.sum_mean[i].size()));
    for (size_t j = 0; j < t.mean.size(); ++j) m.sum_mean[i][j] += t.mean[j];
    for (size_t k = 0; k < m.rows.size(); ++k) {
      WorkersBenchRow& row = m.rows[k];
      for (unsigned seed = 0; seed < row.seeds; ++seed) {
        const MergeKey key{seed, static_cast<uint32_t>(s), static_cast<uint32_t>(i)};
        MergedValues mv = m.methods[k] == MergeMethod::Marsit ? m.sequences[k][seed].merge(t.workers, key)
                                                              : merge_values(m.methods[k], t.workers, key);
        if (!std::all_of(mv.values.begin(), mv.values.end(), [](float x) { return std::isfinite(x); }))
          fail(ErrorCode::Input, "step " + std::to_string(s) + ", tensor '" + t.name + "': " + row.method +
                                     "'s merged values exceed float32's range (|x| > 3.4e38)" +
                                     (m.methods[k] == MergeMethod::Cascade
                                          ? ": its ring adds the workers' values in float32, as the paper's does"
                                          : ""));
        m.acc[k][seed].add(t.mean.data(), mv.values.data(), t.mean.size());
        std::vector<double>& sum = m.sum_agg[k][seed][i];
        for (size_t j = 0; j < sum.size(); ++j) sum[j] += mv.values[j];
        if (seed == 0)
          for (size_t h = 0; h < mv.hop_bits.size(); ++h) row.hop_bits[h] += mv.hop_bits[h];
      }
    }
  }
  ++m.steps;
}

std::vector<WorkersBenchRow> WorkersBench::rows() const {
  const Impl& m = *impl_;
  std::vector<WorkersBenchRow> rows = m.rows;
  for (size_t k = 0; k < rows.size(); ++k) {
    for (const auto& e : m.acc[k]) {
      rows[k].match.push_back(e.sign_agreement());
      rows[k].rel.push_back(e.rel_l2());
    }
    if (m.steps == 0) continue;
    for (const auto& per_tensor : m.sum_agg[k]) {
      double diff = 0, ref = 0;
      for (size_t i = 0; i < per_tensor.size(); ++i)
        for (size_t j = 0; j < per_tensor[i].size(); ++j) {
          const double e = m.sum_mean[i][j] - per_tensor[i][j];
          diff += e * e;
          ref += m.sum_mean[i][j] * m.sum_mean[i][j];
        }
      rows[k].acc_err.push_back(ref > 0 ? std::sqrt(diff / ref) : 0.0);
    }
  }
  return rows;
}

}  // namespace gradcodec
