// SPDX-License-Identifier: BSD-3-Clause
// gradcodec bench --collective: the seeds' setting for real (docs/scale-out.md). Started by
// mpirun with N ranks, each rank is one worker: rank r reads match r of every --workers glob
// (one glob per training step, N matches each). For each pipeline every step is encoded by each
// worker, carried over MPI with the collective its payload allows, aggregated and decoded, and
// timed; plain MPI_Allreduce of the fp32 and of the fp16 gradients are the baselines, measured
// the same way in the same job.
//   allreduce-fp32, allreduce-fp16  the baselines: the gradients summed by MPI_Allreduce (fp16:
//             binary16 sums, a user-defined operation), then divided by N.
//   allreduce also a pipeline whose records are its values cast to one type (raw, fp16, bf16,
//             after ef or not): they sum in that form, in that type, as the baselines do.
//   ring      one-bit sign pipelines (merge.hpp's is_sign_pipeline): Marsit's ring (Wu, He, Guo et
//             al. 2022 §4.1.1) — rank 0 sends its sign bits and scale to rank 1, each rank merges
//             its own with ring_hop and passes them on, the last broadcasts the result (±η).
//   allgather everything else: every rank's records to every rank (MPI_Allgatherv); each decodes
//             the others' records and averages all N in rank order (workers_mean).
// Worker r encodes with seed r; the ring's random choices use seed 0. The aggregate of every row
// and step is then exactly what `gradcodec merge` computes from the workers' containers (each
// `encode --seed r`): --method marsit for ring rows, mean for allgather rows (--aggregates DIR
// writes it). The all-reduce rows equal merge's mean up to their own rounding (sums in the type).
// Each tensor is encoded as a Compressor encodes it (gradcodec.hpp): a pipeline that plans over a
// whole frame plans each tensor alone, as the DDP hook does.
#pragma once

#include "common.hpp"

#include <string>
#include <vector>

namespace gradcodec::cli {

inline constexpr const char* kCollectiveSchema = "gradcodec-bench-collective/1";

struct CollectiveBenchArgs {
  std::vector<std::string> steps;  // --workers values: one glob (or manifest line) per step
  std::vector<std::string> presets, pipelines;  // default: every preset but lossless
  std::string collective = "auto";              // auto, or allgather for every row
  unsigned repeat = 3;                          // timed passes over the steps
  std::string json;                             // the report as JSON here (empty: no)
  std::string aggregates;                       // DIR: every row's aggregate as DIR/rowK.gcz
  bool markdown = false, force = false;
  InputOptions in;
};

int run_bench_collective(const CollectiveBenchArgs& args);

}  // namespace gradcodec::cli
