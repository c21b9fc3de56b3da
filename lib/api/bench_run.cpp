// SPDX-License-Identifier: BSD-3-Clause
#include "bench_run.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <unistd.h>

namespace gradcodec::api {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// max / min of the runs: > 2 says the machine disturbed the row's runs (docs/bench.md).
double spread(const std::vector<double>& v) {
  if (v.empty()) return 1;
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return *lo > 0 ? *hi / *lo : 1;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct EncodeResult {
  std::vector<std::vector<TensorOutcome>> outcomes;
  uint64_t bytes = 0;
  double seconds = 0;
};

EncodeResult encode_all(const Pipeline& p, const Frames& frames, uint64_t seed, const BenchSettings& s,
                        const std::string& path, bool timed, double stall = 0) {
  EncodeResult r;
  EncodeOptions eo;
  eo.seed = seed;
  eo.threads = s.threads;
  eo.workers = s.workers;
  eo.nonfinite = s.nonfinite;
  eo.nonfinite_advice = s.nonfinite_advice;
  eo.time_stages = timed;
  // The previous run's container is deleted before the clock starts: replacing it in place made
  // the kernel free its pages inside the timed run, serially (a measurable share of a fast
  // preset's encode: docs/performance.md, "Figures behind design choices").
  std::error_code ec;
  std::filesystem::remove(path, ec);
  auto start = Clock::now();
  SequenceEncoder enc(p, eo);
  ContainerHeader header = enc.header(s.inputs_json);
  header.target_json = s.target_json;
  ContainerWriter w(path, true, header);
  for (size_t f = 0; f < frames.size(); ++f) {
    const auto& fr = frames[f];
    FrameSource src;
    src.count = fr.size();
    src.info = [&fr](size_t i) { return fr[i].info; };
    src.load = [&fr](size_t i) { return fr[i]; };
    src.source = f < s.sources.size() ? s.sources[f] : "";
    src.recorded = src.source;
    r.outcomes.push_back(enc.encode_frame(src, w));
  }
  w.finish();
  if (stall > 0) std::this_thread::sleep_for(std::chrono::duration<double>(stall));
  r.seconds = seconds_since(start);
  r.bytes = w.bytes_written();
  return r;
}

Frames decode_all(const std::string& path, double& seconds) {
  auto start = Clock::now();
  ContainerReader reader = ContainerReader::open(path);
  SequenceDecoder dec(reader);
  Frames out(reader.frame_count());
  for (size_t f = 0; f < reader.frame_count(); ++f)
    dec.decode_frame(f, [&](Tensor&& t) { out[f].push_back(std::move(t)); });
  seconds = seconds_since(start);
  return out;
}

void check_same(const Frames& want, const Frames& got, const std::string& what, const std::string& pipeline) {
  for (size_t f = 0; f < want.size(); ++f)
    for (size_t i = 0; i < want[f].size(); ++i)
      if (!bit_identical(want[f][i], got[f][i]))
        fail(ErrorCode::Mismatch, "bench: '" + pipeline + "': tensor '" + want[f][i].name() + "' of frame " +
                                      std::to_string(f) + " decoded differently from " + what);
}

bool is_exact_pipeline(const Pipeline& p) {
  for (const auto& s : p.stages())
    if (s.name != "raw" && find_stage(s.name)->kind != StageKind::Lossless) return false;
  return true;
}

}  // namespace

BenchRow bench_pipeline(const Pipeline& pipeline, const std::string& label, const std::string& sweep,
                        const Frames& frames, const BenchSettings& s) {
  BenchRow row;
  row.label = label;
  row.pipeline = pipeline.text();
  row.sweep = sweep;
  row.exact = is_exact_pipeline(pipeline);
  PipelineStages probe(pipeline);
  row.deterministic = !probe.stochastic();
  // The container of the timed runs, removed after the row, and by the signal handler when the
  // run is interrupted.
  const ScratchFile scratch(
      (std::filesystem::path(s.temp_dir) / ("gradcodec-bench-" + std::to_string(::getpid()) + ".gcz")).string());
  const std::string& path = scratch.path();

  // Warm-up run: also the run whose figures are reported, with stage timing on.
  EncodeResult first = encode_all(pipeline, frames, 0, s, path, true);
  double dsec = 0;
  Frames decoded = decode_all(path, dsec);
  // Test hook: proves that verification catches a wrong decode (tests/cli/cli_bench.py).
  if (std::getenv("GRADCODEC_TEST_FLIP_DECODED") && !decoded.empty() && !decoded[0].empty() &&
      !decoded[0][0].data.empty()) {
    const Buffer& b = decoded[0][0].data;
    std::vector<uint8_t> flipped(b.data(), b.data() + b.size());
    flipped[0] ^= 1;
    decoded[0][0].data = Buffer(std::move(flipped));
  }
  if (row.exact) check_same(frames, decoded, "the input (lossless pipeline)", row.pipeline);
  row.output_bytes = first.bytes;
  double stage_ns = 0;
  for (size_t f = 0; f < frames.size(); ++f) {
    FrameFigures ff;
    for (size_t i = 0; i < frames[f].size(); ++i) {
      const Tensor& t = frames[f][i];
      const TensorOutcome& o = first.outcomes[f][i];
      ErrorMetrics e;
      e.add(t, decoded[f][i]);
      ff.err += e;
      ff.input_bytes += o.input_bytes;
      ff.record_bytes += o.record_bytes;
      if (is_float(t.dtype())) ff.parameters += t.elements();  // as inspect: floating-point parameters
      row.kept += o.kept;
      row.times += o.times;
      merge_stats(row.stats, o.stats);
      for (const auto& [name, bytes] : o.streams) {
        if (name == kIndexStream) row.index_bytes += bytes;
        else if (name == kValueStream || name == "raw") row.value_bytes += bytes;
        else if (name == kScaleStream) row.scale_bytes += bytes;
        else row.side_bytes += bytes;
      }
      if (s.per_tensor)
        row.tensors.push_back({t.name(), static_cast<uint32_t>(f), t.elements(), o.input_bytes, o.record_bytes,
                               o.kept, storage_name(o.storage), e, o.stats});
    }
    row.input_bytes += ff.input_bytes;
    row.parameters += ff.parameters;
    row.err += ff.err;
    row.frames.push_back(ff);
  }
  for (double v : row.times.ns) stage_ns += v;

  // A second, untimed encode and decode, so that every timed run reuses memory a run before it
  // freed (bench serves blocks up to 32 MiB from a heap it never trims; apps/common.cpp). The
  // first decode after the warm-up grows the heap while the warm-up's decoded tensors are still
  // held, and pays the kernel's first touch of those pages: without this run a `--repeat 1`
  // timing is mostly page faults (docs/performance.md, "Figures behind design choices").
  {
    EncodeResult again = encode_all(pipeline, frames, 0, s, path, false);
    if (again.bytes != first.bytes)
      fail(ErrorCode::Mismatch, "bench: '" + row.pipeline + "': encoding is not deterministic");
    double sec = 0;
    check_same(decoded, decode_all(path, sec), "the first decoded run", row.pipeline);
  }

  // Timed runs: at least `repeat` runs and `min_time` seconds each for encode and decode; every
  // decoded run is checked against the first (same seed: same bytes, same tensors).
  // Test hook: GRADCODEC_TEST_SLOW_RUN=S stalls the first timed encode S seconds, as a machine
  // busy elsewhere would, to show the median ignores one slow run and the row is marked
  // (tests/cli/cli_bench_figures.py).
  const char* slow = std::getenv("GRADCODEC_TEST_SLOW_RUN");
  const double stall = slow ? std::atof(slow) : 0.0;
  auto loop_start = Clock::now();
  while (row.encode_s.size() < s.repeat || seconds_since(loop_start) < s.min_time) {
    EncodeResult r = encode_all(pipeline, frames, 0, s, path, false, row.encode_s.empty() ? stall : 0.0);
    if (r.bytes != first.bytes)
      fail(ErrorCode::Mismatch, "bench: '" + row.pipeline + "': encoding is not deterministic");
    row.encode_s.push_back(r.seconds);
    if (row.encode_s.size() > 10000) break;
  }
  loop_start = Clock::now();
  while (row.decode_s.size() < s.repeat || seconds_since(loop_start) < s.min_time) {
    double sec = 0;
    Frames again = decode_all(path, sec);
    check_same(decoded, again, "the first decoded run", row.pipeline);
    row.decode_s.push_back(sec);
    if (row.decode_s.size() > 10000) break;
  }
  row.encode_median = median(row.encode_s);
  row.decode_median = median(row.decode_s);
  row.encode_spread = spread(row.encode_s);
  row.decode_spread = spread(row.decode_s);
  row.container_ns = std::max(0.0, first.seconds * 1e9 - stage_ns);

  // Seeds: bias of the mean reconstruction and spread of the error (stochastic pipelines only).
  row.seeds = row.deterministic ? 1 : std::max(1u, s.seeds);
  row.rel_l2_mean = row.err.rel_l2();
  if (row.seeds > 1) {
    // Per element, Welford's running mean and sum of squared deviations over the seeds.
    std::vector<std::vector<std::vector<double>>> avg(frames.size()), m2(frames.size());
    std::vector<double> errs;
    for (unsigned seed = 0; seed < row.seeds; ++seed) {
      Frames dec = decoded;
      if (seed > 0) {
        encode_all(pipeline, frames, seed, s, path, false);
        double sec;
        dec = decode_all(path, sec);
      }
      ErrorMetrics all;
      const double n = seed + 1;
      for (size_t f = 0; f < frames.size(); ++f) {
        avg[f].resize(frames[f].size());
        m2[f].resize(frames[f].size());
        for (size_t i = 0; i < frames[f].size(); ++i) {
          all.add(frames[f][i], dec[f][i]);
          std::vector<float> v(dec[f][i].elements());
          to_f32(dec[f][i].dtype(), dec[f][i].data.data(), v.size(), v.data());
          auto& mu = avg[f][i];
          auto& sq = m2[f][i];
          mu.resize(v.size(), 0.0);
          sq.resize(v.size(), 0.0);
          for (size_t k = 0; k < v.size(); ++k) {
            const double delta = v[k] - mu[k];
            mu[k] += delta / n;
            sq[k] += delta * (v[k] - mu[k]);
          }
        }
      }
      errs.push_back(all.rel_l2());
    }
    // Over the elements k with m_k the mean of the seeds and s_k² their sample variance:
    // excess·‖g‖² = Σ_k (m_k − g_k)² − s_k²/N, which is the mean over seed pairs s ≠ t of
    // ⟨ĝ_s − g, ĝ_t − g⟩, a U-statistic; its variance, for elements coded independently given g,
    // is Σ_k 4 b_k² σ_k²/N + 2 σ_k⁴/(N(N−1)) (b_k = E ĝ_k − g_k, σ_k² = Var ĝ_k), estimated with
    // s_k² for σ_k² (s_k⁴ overestimates σ_k⁴: the error is conservative) and
    // max(0, (m_k − g_k)² − s_k²/N) for b_k².
    const double N = row.seeds;
    double gg = 0, dd = 0, vv = 0, var_u = 0;
    for (size_t f = 0; f < frames.size(); ++f)
      for (size_t i = 0; i < frames[f].size(); ++i) {
        std::vector<float> g(frames[f][i].elements());
        to_f32(frames[f][i].dtype(), frames[f][i].data.data(), g.size(), g.data());
        for (size_t k = 0; k < g.size(); ++k) {
          const double d = avg[f][i][k] - g[k];
          const double s2 = m2[f][i][k] / (N - 1);
          if (!std::isfinite(g[k]) || !std::isfinite(d) || !std::isfinite(s2)) continue;
          gg += double(g[k]) * g[k];
          dd += d * d;
          vv += s2 / N;
          var_u += 4 * std::max(0.0, d * d - s2 / N) * s2 / N + 2 * s2 * s2 / (N * (N - 1));
        }
      }
    SeedBias& b = row.bias;
    b.valid = true;
    if (gg > 0) {
      b.raw = std::sqrt(dd / gg);
      b.noise = std::sqrt(vv / gg);
      b.excess = (dd - vv) / gg;
      b.excess_se = std::sqrt(var_u) / gg;
      b.z = b.excess_se > 0 ? b.excess / b.excess_se : b.excess == 0 ? 0.0 : std::nan("");
      b.bias = std::sqrt(std::max(0.0, b.excess));
    }
    double mean = 0;
    for (double e : errs) mean += e;
    mean /= errs.size();
    double var = 0;
    for (double e : errs) var += (e - mean) * (e - mean);
    row.rel_l2_mean = mean;
    row.rel_l2_std = errs.size() > 1 ? std::sqrt(var / (errs.size() - 1)) : 0.0;
  }
  return row;
}

}  // namespace gradcodec::api
