// SPDX-License-Identifier: BSD-3-Clause
// bench(): the rows to run (presets, pipeline texts, their sweeps), each measured by
// bench_pipeline (bench_run.cpp), and the report of them all (bench_json.cpp). `gradcodec bench`
// loads its inputs and calls this (gradcodec.hpp, docs/bench.md).
#include <gradcodec/gradcodec.hpp>

#include "api/bench_run.hpp"
#include "api/facade.hpp"
#include "api/threads.hpp"

#include <gradcodec/plugin/registry.hpp>

#include <cmath>
#include <filesystem>
#include <map>
#include <unistd.h>

namespace gradcodec {

namespace {

struct Row {
  Pipeline pipeline;
  std::string label, sweep;
};

struct Sweep {
  std::string stage, param;
  std::vector<std::string> values;
};

Sweep parse_sweep(const std::string& s) {
  auto dot = s.find('.');
  auto eq = s.find('=');
  if (dot == std::string::npos || eq == std::string::npos || dot > eq || eq + 1 >= s.size())
    fail(ErrorCode::Usage, "--sweep '" + s + "': expected STAGE.PARAM=a,b,c (e.g. topk.ratio=0.001,0.01,0.1)");
  Sweep w{s.substr(0, dot), s.substr(dot + 1, eq - dot - 1), {}};
  std::string rest = s.substr(eq + 1);
  size_t start = 0;
  while (start <= rest.size()) {
    size_t comma = rest.find(',', start);
    std::string v = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (v.empty()) fail(ErrorCode::Usage, "--sweep '" + s + "': empty value");
    w.values.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return w;
}

// The rows in report order: the presets, then the pipeline texts (neither: every preset), each
// row of a swept stage replaced by one row per value, sweep after sweep.
// The link model's settings, checked (Usage).
void check_link(const BenchOptions& o) {
  const bool rate = o.link_rate != 0;
  if (rate && !(o.link_rate > 0 && std::isfinite(o.link_rate)))
    fail(ErrorCode::Usage, "the link rate must be a positive number of bytes per second");
  if (rate && o.link_workers < 2)
    fail(ErrorCode::Usage, "the link model needs the number of workers, at least 2 (--workers N)");
  if (!rate && o.link_workers != 0)
    fail(ErrorCode::Usage, "a number of workers for the link model needs a link rate (--link RATE)");
  if (!(o.link_latency >= 0 && std::isfinite(o.link_latency)))
    fail(ErrorCode::Usage, "the link latency must be a number of seconds >= 0");
  if (o.collective != "auto" && o.collective != "allreduce" && o.collective != "allgather" && o.collective != "ring")
    fail(ErrorCode::Usage, "collective '" + o.collective + "': expected auto, allreduce, allgather or ring");
  if (!rate && o.collective != "auto") fail(ErrorCode::Usage, "--collective applies to the link model (--link RATE)");
}

std::vector<Row> bench_rows(const BenchOptions& o) {
  check_link(o);
  if (!o.target.empty()) {
    parse_target(o.target, o.target_scope);  // Usage for a malformed one, now
    if (!o.sweeps.empty())
      fail(ErrorCode::Usage, "--target chooses each row's main parameter itself: give --sweep or --target, not both");
  } else if (!o.target_scope.empty()) {
    fail(ErrorCode::Usage, "--target-scope applies to --target rel_l2=E");
  }
  std::vector<Row> rows;
  for (const auto& p : o.presets) rows.push_back({Pipeline::preset(p), p, ""});
  for (const auto& t : o.pipelines)
    rows.push_back({Pipeline::parse(o.target.empty() ? t : target_pipeline(t)), "pipeline", ""});
  if (rows.empty())
    for (const auto& p : preset_table()) rows.push_back({Pipeline::preset(p.name), p.name, ""});
  std::map<std::string, std::string> swept;  // "stage.param" -> the sweep's text
  for (const auto& text : o.sweeps) {
    Sweep sw = parse_sweep(text);
    // Two sweeps over a stage's alternatives (topk.k and topk.ratio) would each replace the
    // other: every row would run the second and be labelled with both.
    if (const char* other = alternative_param(sw.stage, sw.param); other && swept.count(sw.stage + "." + other))
      fail(ErrorCode::Usage, "--sweep " + text + " and --sweep " + swept[sw.stage + "." + other] + ": " + sw.stage +
                                 " takes " + sw.param + " or " + other + ", not both; sweep one of them");
    swept[sw.stage + "." + sw.param] = text;
    std::vector<Row> expanded;
    bool used = false;
    for (const auto& r : rows) {
      if (!r.pipeline.has_stage(sw.stage)) {
        expanded.push_back(r);
        continue;
      }
      used = true;
      for (const auto& v : sw.values)
        expanded.push_back({r.pipeline.with_param(sw.stage, sw.param, v), r.label,
                            (r.sweep.empty() ? "" : r.sweep + ", ") + sw.stage + "." + sw.param + "=" + v});
    }
    if (!used)
      fail(ErrorCode::Usage, "--sweep " + text + ": no pipeline given has a stage '" + sw.stage +
                                 "' (a stage inside another's parameters, as accordion's, cannot be swept)");
    rows = std::move(expanded);
  }
  return rows;
}

// A row's name in progress reports and bench_plan.
std::string row_name(const Row& r) {
  std::string name = r.label == "pipeline" ? r.pipeline.text() : r.label;
  return r.sweep.empty() ? name : name + " [" + r.sweep + "]";
}

// Timed runs write a real container: to memory-backed /dev/shm when there is one, so the disk
// does not enter the encode figures.
std::string scratch_dir(const std::string& given) {
  if (!given.empty()) return given;
  return std::filesystem::is_directory("/dev/shm") && ::access("/dev/shm", W_OK) == 0
             ? "/dev/shm"
             : std::filesystem::temp_directory_path().string();
}

// bench --target: the row's main parameter chosen by search_target on `frame` (the first), as
// `encode --target` chooses it with seed 0; the row's pipeline becomes the chosen one. Without a
// searched parameter (Usage from the search) or with a target no value meets (Input), the row
// stays as given and the target says why.
api::RowTarget choose_target(Row& row, const std::vector<Tensor>& frame, const BenchOptions& o,
                             const api::BenchSettings& s) {
  api::RowTarget t;
  t.asked = true;
  t.given = row.pipeline.text();
  EncoderOptions eo;
  eo.pipeline = t.given;
  eo.threads = s.threads;
  eo.nonfinite = s.nonfinite;
  eo.nonfinite_advice = s.nonfinite_advice;
  eo.inputs_json = s.inputs_json;  // the header the row's container has: the same bits/param
  FrameSource src;
  src.count = frame.size();
  src.info = [&frame](size_t i) { return frame[i].info; };
  src.load = [&frame](size_t i) { return frame[i]; };
  src.source = s.sources.empty() ? "" : s.sources[0];
  try {
    const TargetResult r = search_target(eo, src, parse_target(o.target, o.target_scope));
    row.pipeline = Pipeline::parse(r.pipeline);
    t.status = "met";
    t.stage = r.stage, t.param = r.param, t.value = r.value;
    t.bits_per_parameter = r.bits_per_parameter, t.rel_l2 = r.rel_l2, t.has_error = r.has_error;
    t.encodes = r.encodes;
    t.header_json = r.json;
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Usage && e.code() != ErrorCode::Input) throw;
    t.status = e.code() == ErrorCode::Usage ? "none" : "unmet";
    t.reason = e.what();
  }
  return t;
}

}  // namespace

std::vector<std::string> bench_plan(const BenchOptions& options) {
  std::vector<std::string> names;
  for (const Row& r : bench_rows(options)) names.push_back(row_name(r));
  return names;
}

std::string bench(std::span<const std::vector<TensorView>> frames, const BenchOptions& options) {
  std::vector<std::vector<Tensor>> tensors;
  for (const auto& frame : frames) {
    std::vector<Tensor> ts;
    ts.reserve(frame.size());
    for (const TensorView& v : frame) ts.push_back(api::view_tensor(v));
    tensors.push_back(std::move(ts));
  }
  return bench(tensors, options);
}

std::string bench(const std::vector<std::vector<Tensor>>& frames, const BenchOptions& options) {
  const std::vector<Row> rows = bench_rows(options);
  if (frames.empty()) fail(ErrorCode::Usage, "bench: no frame to measure");
  if (!options.sources.empty() && options.sources.size() != frames.size())
    fail(ErrorCode::Usage, "bench: " + std::to_string(options.sources.size()) + " sources for " +
                               std::to_string(frames.size()) + " frames");
  api::BenchSettings s;
  s.repeat = std::max(1u, options.repeat);
  s.min_time = options.min_time;
  s.seeds = std::max(1u, options.seeds);
  s.threads = api::thread_count(options.threads);  // at most one per core, as encode and decode take it
  s.per_tensor = options.per_tensor;
  s.nonfinite = options.nonfinite;
  s.nonfinite_advice = options.nonfinite_advice;
  s.inputs_json = options.inputs_json.empty() ? "[]" : options.inputs_json;
  // As Encoder::add_frame records a frame given no source.
  s.sources = options.sources.empty() ? std::vector<std::string>(frames.size(), "<memory>") : options.sources;
  s.temp_dir = scratch_dir(options.temp_dir);
  api::LinkModel link{options.link_rate, options.link_workers, options.link_latency, options.collective};
  std::vector<api::BenchRow> measured;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (options.rows && !options.rows(i)) continue;
    if (options.progress) options.progress(i, rows.size(), row_name(rows[i]));
    Row row = rows[i];
    api::RowTarget target;
    if (!options.target.empty()) target = choose_target(row, frames[0], options, s);
    api::BenchSettings rs = s;
    rs.target_json = target.header_json;  // the container encode --target writes
    measured.push_back(api::bench_pipeline(row.pipeline, row.label, row.sweep, frames, rs));
    measured.back().collective = api::auto_collective(row.pipeline);
    measured.back().target = std::move(target);
  }
  if (options.progress) options.progress(rows.size(), rows.size(), "");
  std::vector<std::string> inputs = options.inputs;
  if (inputs.empty()) inputs = s.sources;
  return api::rows_json(measured, {inputs, frames.size(), s.threads, s.repeat, s.min_time, link, options.target});
}

}  // namespace gradcodec
