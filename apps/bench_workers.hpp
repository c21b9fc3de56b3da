// SPDX-License-Identifier: BSD-3-Clause
// gradcodec bench --workers: the multi-worker mode (issue 9, docs/merge.md). Each --workers value
// is one training step's worker inputs — a glob ('run/step7/worker_*.npz', matches sorted) or a
// manifest file (*.txt / *.list: one step per line, the workers' paths separated by spaces,
// relative to the manifest's directory; '#' starts a comment). For every step the true mean of
// the raw worker gradients is the reference; every merge method aggregates the workers (ring
// order = the order above) and the report gives, per method, the sign matching rate against the
// true mean, the bits each hop of the ring sends, the relative L2 error, and the accumulated error
// over the steps. marsit runs over the steps as one sequence (MarsitSequence: Marsit's global
// compensation unless turned off, full-precision steps every K).
#pragma once

#include "common.hpp"

#include <string>
#include <vector>

namespace gradcodec::cli {

inline constexpr const char* kWorkersSchema = "gradcodec-bench-workers/1";

struct WorkersBenchArgs {
  std::vector<std::string> steps;  // --workers values
  unsigned seeds = 1;              // seeds of the stochastic methods (marsit, cascade)
  std::string json;                // write the report as JSON here (empty: no)
  bool markdown = false;
  InputOptions in;
  bool compensation = true;  // marsit over the steps with Marsit's global compensation
  uint32_t full_sync = 0;    // marsit: steps 0, K, 2K, ... in full precision; 0 = never
};

// Each --workers value expanded to the worker files of its step(s). Error(Input) when a glob
// matches nothing or a manifest cannot be read; Error(Usage) for a step with fewer than 2 workers
// or steps with different worker counts.
std::vector<std::vector<std::string>> expand_worker_steps(const std::vector<std::string>& values);

int run_bench_workers(const WorkersBenchArgs& args);

}  // namespace gradcodec::cli
