// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — the merge methods compared on several workers' gradients over training steps
// (`gradcodec bench --workers`, docs/merge.md). Part of the API: <gradcodec/gradcodec.hpp>
// includes it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace gradcodec {

struct WorkersBenchOptions {
  size_t workers = 2;        // M >= 2: the workers per step, in ring order
  unsigned seeds = 1;        // seeds 0..N-1 of the stochastic methods (marsit, cascade); at least 1
  bool compensation = true;  // marsit over the steps with Marsit's global compensation
  uint32_t full_sync = 0;    // marsit: steps 0, K, 2K, ... in full precision; 0 = never
};

// One tensor of one step: every worker's values (f32, ring order) and the reference they are
// compared with (the caller's mean of the raw gradients), all of one length.
struct WorkersBenchTensor {
  std::string name;  // for messages
  std::vector<std::span<const float>> workers;
  std::span<const float> mean;
};

// One merge method's figures (docs/merge.md, "bench --workers").
struct WorkersBenchRow {
  std::string method;  // "marsit", "cascade", "majority", "mean", in that order
  bool stochastic = false;
  unsigned seeds = 1;
  std::vector<double> match;       // per seed: the sign agreement with the mean, over every element
  std::vector<double> rel;         // per seed: ||agg - mean|| / ||mean|| over every element
  std::vector<double> acc_err;     // per seed: ||sum_t mean_t - sum_t agg_t|| / ||sum_t mean_t||
  std::vector<uint64_t> hop_bits;  // per hop 1..M-1, summed over tensors and steps (seed 0)
};

class WorkersBench {
 public:
  explicit WorkersBench(const WorkersBenchOptions& options);
  WorkersBench(WorkersBench&&) noexcept;
  WorkersBench& operator=(WorkersBench&&) noexcept;
  ~WorkersBench();

  // Merges one step's tensors with every method and seed (marsit as one sequence over the
  // steps: MarsitSequence, docs/merge.md) and adds the figures. Tensor i of every step is the
  // same tensor (the first step fixes their count and lengths; Error(Input) when a later one
  // differs). Error(Input) "step S, tensor 'NAME': METHOD's merged values exceed float32's
  // range ..." when a method's aggregate is not finite; Error(Usage) for workers other than M.
  void add_step(std::span<const WorkersBenchTensor> tensors);
  // Every method's figures over the steps added so far.
  std::vector<WorkersBenchRow> rows() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gradcodec
