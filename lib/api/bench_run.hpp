// SPDX-License-Identifier: BSD-3-Clause
// The measurement behind bench() (gradcodec.hpp) and `gradcodec bench`: run one pipeline over the
// frames, time encode and decode (median of repeats after a warm-up), check every decoded run, and
// collect the figures; and the report those figures make (bench_json.cpp, docs/bench.md).
#pragma once

#include <gradcodec/codec.hpp>
#include <gradcodec/metrics.hpp>
#include <gradcodec/plugin/stage.hpp>

#include <memory>
#include <string>
#include <vector>

namespace gradcodec::api {

using Frames = std::vector<std::vector<Tensor>>;

struct BenchSettings {
  unsigned repeat = 3;       // at least this many timed runs
  double min_time = 0.2;     // and at least this many seconds of encoding (and of decoding)
  unsigned seeds = 1;        // stochastic pipelines: runs with seeds 0..N-1 for bias and spread
  unsigned threads = 1;
  // The encoders' helper threads, shared by every run (and every copy of these settings): a
  // timed run does not create threads, as an encoder kept from one frame to the next would not.
  std::shared_ptr<Workers> workers = make_workers();
  NonFinite nonfinite = NonFinite::Refuse;
  std::string nonfinite_advice = kNonfiniteRawAdvice;
  bool per_tensor = false;
  std::string temp_dir;
  std::vector<std::string> sources;   // each frame's source as the frame section records it
  std::string inputs_json = "[]";  // the container header's input description (as encode writes it)
  std::string target_json;         // the header's "target" (bench --target: as encode --target writes it)
};

struct FrameFigures {
  uint64_t input_bytes = 0, record_bytes = 0, parameters = 0;
  ErrorMetrics err;
};

struct TensorFigures {
  std::string name;
  uint32_t frame = 0;
  uint64_t parameters = 0, input_bytes = 0, record_bytes = 0, kept = 0;
  std::string storage;
  ErrorMetrics err;
  StageStats stats;        // the stages' figures for this record (Stage::stream_stats)
};

// The bias of a stochastic pipeline, measured over N seeds (N >= 2). With m = mean_s ĝ_s and
// s_k² the sample variance of element k over the seeds, the plain figure ‖m − g‖/‖g‖ (`raw`) is
// not the bias: even an unbiased estimator gives E‖m − g‖² = Σ_k σ_k²/N, so at N = 3 a
// high-variance unbiased stage (QSGD with few levels) reads larger than 1. `noise` is that floor,
// sqrt(Σ s_k²/N)/‖g‖. `excess` = (‖m − g‖² − Σ s_k²/N)/‖g‖² is an unbiased estimate of the
// squared relative bias ‖E ĝ − g‖²/‖g‖², `excess_se` its standard error (bench_run.cpp: exact
// for elements coded independently given g, as QSGD and TernGrad do; conservative otherwise in
// the cases measured). `z` = excess / excess_se reads within ±3 for an unbiased pipeline and
// large for a biased one. `bias` = sqrt(max(0, excess)).
struct SeedBias {
  bool valid = false;
  double raw = 0, noise = 0, excess = 0, excess_se = 0;
  double z = 0;            // NaN when excess_se is 0 and excess is not (reported as null)
  double bias = 0;
};

// A row's parameter chosen for BenchOptions::target (search_target on the first frame).
struct RowTarget {
  bool asked = false;          // the run had a target
  std::string status;          // "met"; "unmet": no grid value meets it; "none": no searched parameter
  std::string given;           // the row's pipeline before the search (canonical text)
  std::string stage, param, value;
  double bits_per_parameter = 0, rel_l2 = 0;  // the search's figures for the first frame
  bool has_error = false;
  size_t encodes = 0;
  std::string reason;          // unmet, none: the search's message
  std::string header_json;     // met: the header's "target" record (TargetResult::json)
};

struct BenchRow {
  std::string label;       // preset name, or "pipeline"
  std::string collective;  // how its payloads aggregate: allreduce, allgather or ring (link model)
  std::string pipeline;    // canonical text
  std::string sweep;       // "topk.ratio=0.01" or ""
  bool deterministic = true;
  bool exact = false;      // lossless: decoded must equal the input bit for bit
  uint64_t input_bytes = 0, output_bytes = 0, parameters = 0, kept = 0;
  uint64_t index_bytes = 0, value_bytes = 0, scale_bytes = 0, side_bytes = 0;
  ErrorMetrics err;
  std::vector<double> encode_s, decode_s;  // every timed run
  double encode_median = 0, decode_median = 0;
  double encode_spread = 0, decode_spread = 0;  // slowest / fastest timed run (1 = no spread)
  StageTimes times;        // encode time per stage kind (one run)
  double container_ns = 0; // encode time outside the stages (I/O, container, checksums)
  StageStats stats;        // the stages' figures summed over every record (bloom's policy errors, ...)
  unsigned seeds = 1;
  SeedBias bias;           // over the seeds; bias.valid is false when deterministic or seeds == 1
  double rel_l2_mean = 0, rel_l2_std = 0;
  std::vector<FrameFigures> frames;
  std::vector<TensorFigures> tensors;
  RowTarget target;
};

// Runs one row. Throws Error(Mismatch) when a decoded run differs from what it must be.
BenchRow bench_pipeline(const Pipeline& pipeline, const std::string& label, const std::string& sweep,
                        const Frames& frames, const BenchSettings& settings);

inline constexpr const char* kBenchSchema = "gradcodec-bench/2";

// The link model's settings (BenchOptions); rate 0: none.
struct LinkModel {
  double rate = 0;       // bytes per second
  unsigned workers = 0;  // N
  double latency = 0;    // seconds per message
  std::string collective = "auto";
};

// What the report says of the run as a whole.
struct BenchContext {
  std::vector<std::string> inputs;
  size_t frames = 0;
  unsigned threads = 1;
  unsigned repeat = 0;
  double min_time = 0;
  LinkModel link;
  std::string target;  // BenchOptions::target's text ("" for none)
};

// How a pipeline's payloads aggregate across workers (docs/bench.md, "Link model"): "allreduce"
// when the encoded values sum as they are (casts, PowerSGD's factors, shared-seed random-k
// values, nothing after them but raw/fp16/bf16), "ring" for one-bit signs of every element
// (Marsit's one-bit ring), else "allgather".
std::string auto_collective(const Pipeline& pipeline);

// The report of `gradcodec bench --json` (docs/bench.md): schema, context, and every row's figures
// under their stable names. Text, as bench() returns it.
std::string rows_json(const std::vector<BenchRow>& rows, const BenchContext& ctx);

}  // namespace gradcodec::api
