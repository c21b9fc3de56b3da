// The measurement behind `gradcodec bench`: run one pipeline over the loaded frames, time encode
// and decode (median of repeats after a warm-up), check every decoded run, and collect the figures.
#pragma once

#include "common.hpp"

#include <gradcodec/metrics.hpp>

#include <map>
#include <string>
#include <vector>

namespace gradcodec::cli {

using Frames = std::vector<std::vector<Tensor>>;

struct BenchSettings {
  unsigned repeat = 3;       // at least this many timed runs
  double min_time = 0.2;     // and at least this many seconds of encoding (and of decoding)
  unsigned seeds = 1;        // stochastic pipelines: runs with seeds 0..N-1 for bias and spread
  unsigned threads = 1;
  NonFinite nonfinite = NonFinite::Refuse;
  bool per_tensor = false;
  std::string temp_dir;
  std::vector<std::string> sources;   // input path of each frame (recorded in the frame sections)
  std::string inputs_json = "[]";  // the container header's input description (as encode writes it)
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

struct BenchRow {
  std::string label;       // preset name, or "pipeline"
  std::string pipeline;    // canonical text
  std::string sweep;       // "topk.ratio=0.01" or ""
  bool deterministic = true;
  bool exact = false;      // lossless: decoded must equal the input bit for bit
  uint64_t input_bytes = 0, output_bytes = 0, parameters = 0, kept = 0;
  uint64_t index_bytes = 0, value_bytes = 0, scale_bytes = 0, side_bytes = 0;
  ErrorMetrics err;
  std::vector<double> encode_s, decode_s;  // every timed run
  double encode_median = 0, decode_median = 0;
  StageTimes times;        // encode time per stage kind (one run)
  double container_ns = 0; // encode time outside the stages (I/O, container, checksums)
  StageStats stats;        // the stages' figures summed over every record (bloom's policy errors, ...)
  unsigned seeds = 1;
  double bias = -1;        // ‖mean ĝ − g‖/‖g‖ over seeds; −1 when deterministic or seeds == 1
  double rel_l2_mean = 0, rel_l2_std = 0;
  std::vector<FrameFigures> frames;
  std::vector<TensorFigures> tensors;
};

// Runs one row. Throws Error(Mismatch) when a decoded run differs from what it must be.
BenchRow bench_pipeline(const Pipeline& pipeline, const std::string& label, const std::string& sweep,
                        const Frames& frames, const BenchSettings& settings);

}  // namespace gradcodec::cli
