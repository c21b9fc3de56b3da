// SPDX-License-Identifier: BSD-3-Clause
#include "bench_collective.hpp"

#include "bench_collective_report.hpp"
#include "bench_workers.hpp"
#include "collectives.hpp"
#include "ranks.hpp"

#include <gradcodec/gradcodec.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

namespace gradcodec::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

enum class Kind { Fp32, Fp16, Cast, Ring, Allgather };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Fp32:
    case Kind::Fp16:
    case Kind::Cast: return "allreduce";
    case Kind::Ring: return "ring";
    case Kind::Allgather: return "allgather";
  }
  return "?";
}

struct Row {
  std::string name, pipeline_text;
  Kind kind = Kind::Allgather;
  CompressorOptions options;  // Cast, Ring and Allgather rows
  DType cast = DType::F32;    // Cast rows: the type the values are summed in
};

// This rank's gradients: per step, its floating tensors (as read) and their values in f32, all
// tensors back to back.
struct Worker {
  std::vector<std::vector<Tensor>> steps;
  std::vector<std::vector<float>> flat;
  std::vector<uint64_t> offsets;  // tensor i's first element in `flat`; one past the end last
};

// One step's five times on this rank, in seconds.
struct Times {
  double encode = 0, transfer = 0, aggregate = 0, decode = 0, step = 0;
};

struct Measured {
  std::vector<Times> times;                // per step and pass: the slowest rank's
  double payload_bytes = 0;                // per rank and step, the mean over both
  std::vector<std::vector<float>> result;  // per step: the aggregate, all tensors back to back (pass 0)
};

std::string describe(const std::vector<Tensor>& tensors) {
  std::string s;
  for (const Tensor& t : tensors) {
    s += t.name() + " " + dtype_name(t.dtype()) + " " + shape_string(t.shape()) + "\n";
  }
  return s;
}

Worker load_worker(const std::vector<std::vector<std::string>>& steps, const InputOptions& in) {
  const size_t me = static_cast<size_t>(ranks::rank());
  Worker w;
  for (size_t s = 0; s < steps.size(); ++s) {
    const std::string& path = steps[s][me];
    OpenInput input = open_input(path, in);
    std::vector<Tensor> tensors;
    for (size_t k : input.selected) {
      if (!is_float(input.reader->arrays()[k].dtype)) continue;
      Tensor t = input.reader->read(k);
      // The figures compare every row with the workers' mean: NaN or Inf would make them
      // meaningless, silently.
      if (const uint64_t bad = count_nonfinite(t) + count_beyond_f32(t))
        fail(ErrorCode::Input, "--workers: " + path + ": tensor '" + t.name() + "' has " + std::to_string(bad) +
                                   " value(s) that are NaN/Inf or beyond float32's range");
      tensors.push_back(std::move(t));
    }
    if (s > 0 && describe(tensors) != describe(w.steps[0]))
      fail(ErrorCode::Input, "--workers: " + path + " does not hold the tensors (names, dtypes, shapes) of " +
                                 steps[0][me] + "; every step must hold the same");
    std::vector<uint64_t> offsets{0};
    for (const Tensor& t : tensors) offsets.push_back(offsets.back() + t.elements());
    std::vector<float> flat(offsets.back());
    for (size_t i = 0; i < tensors.size(); ++i)
      if (tensors[i].elements()) to_f32(tensors[i].dtype(), tensors[i].data.data(), tensors[i].elements(), flat.data() + offsets[i]);
    w.offsets = offsets;
    w.steps.push_back(std::move(tensors));
    w.flat.push_back(std::move(flat));
  }
  return w;
}

// The rows: the two baselines, then every preset or pipeline asked for (default: every preset
// but lossless, which a Compressor does not take).
std::vector<Row> make_rows(const CollectiveBenchArgs& a) {
  std::vector<Row> rows = {{"allreduce-fp32", "raw", Kind::Fp32, {}, DType::F32},
                           {"allreduce-fp16", "fp16", Kind::Fp16, {}, DType::F16}};
  std::vector<std::string> presets = a.presets;
  if (a.presets.empty() && a.pipelines.empty())
    for (const std::string& p : bench_plan(BenchOptions{}))
      if (p != "lossless") presets.push_back(p);
  auto add = [&](const std::optional<std::string>& name, CompressorOptions o) {
    // A row sends every tensor through its pipeline: none goes raw (--nonfinite is refused here).
    o.nonfinite_advice = "bench --collective sends no tensor raw; such values need a pipeline that can code them";
    const CollectiveTraits traits = collective_traits(o.preset, o.pipeline);
    Row r{name ? *name : traits.pipeline, traits.pipeline, Kind::Allgather, std::move(o), DType::F32};
    if (a.collective == "auto" && traits.signs) r.kind = Kind::Ring;
    if (a.collective == "auto" && traits.cast) r.kind = Kind::Cast, r.cast = *traits.cast;
    rows.push_back(std::move(r));
  };
  for (const std::string& name : presets) {
    CompressorOptions o;
    o.preset = name;
    add(name, o);
  }
  for (const std::string& text : a.pipelines) {
    CompressorOptions o;
    o.pipeline = text;
    add(std::nullopt, o);
  }
  for (const Row& r : rows)
    if (r.kind != Kind::Fp32 && r.kind != Kind::Fp16) Compressor check(r.options);  // Usage now, not mid-run
  return rows;
}

// Records back to back, each after its u64 length (little-endian): what a rank sends.
void append_record(std::vector<uint8_t>& out, const std::vector<uint8_t>& record) {
  ByteWriter w(out);
  w.u64(record.size());
  w.bytes(record.data(), record.size());
}

std::vector<std::span<const uint8_t>> split_records(const std::vector<uint8_t>& blob, size_t count, int rank) {
  ByteReader r(blob, "bench --collective: rank " + std::to_string(rank) + "'s records");
  std::vector<std::span<const uint8_t>> out;
  for (size_t i = 0; i < count; ++i) out.push_back(r.bytes(r.u64()));
  r.expect_end();
  return out;
}

std::vector<float> values_f32(const Tensor& t) {
  std::vector<float> v(t.elements());
  if (!v.empty()) to_f32(t.dtype(), t.data.data(), v.size(), v.data());
  return v;
}

// The ring's message: each tensor's bits packed (LSB first, each tensor from a new byte), then one
// f64 per tensor (the running sum of scales, or η in the last rank's broadcast).
std::vector<uint8_t> pack_ring(const std::vector<std::vector<uint8_t>>& bits, const std::vector<double>& numbers) {
  std::vector<uint8_t> out;
  for (const auto& b : bits) {
    const size_t at = out.size();
    out.resize(at + (b.size() + 7) / 8, 0);
    for (size_t j = 0; j < b.size(); ++j) out[at + j / 8] |= static_cast<uint8_t>(b[j] << (j % 8));
  }
  const size_t at = out.size();
  out.resize(at + 8 * numbers.size());
  std::memcpy(out.data() + at, numbers.data(), 8 * numbers.size());
  return out;
}

void unpack_ring(const std::vector<uint8_t>& msg, std::vector<std::vector<uint8_t>>& bits, std::vector<double>& numbers) {
  size_t need = 8 * numbers.size();
  for (const auto& b : bits) need += (b.size() + 7) / 8;
  if (msg.size() != need)
    fail(ErrorCode::Corrupt, "bench --collective: a ring message of " + std::to_string(msg.size()) + " bytes, not " +
                                 std::to_string(need));
  size_t at = 0;
  for (auto& b : bits) {
    for (size_t j = 0; j < b.size(); ++j) b[j] = (msg[at + j / 8] >> (j % 8)) & 1;
    at += (b.size() + 7) / 8;
  }
  std::memcpy(numbers.data(), msg.data() + at, 8 * numbers.size());
}

class StepRunner {
 public:
  explicit StepRunner(const Worker& w) : w_(w) {
    me_ = ranks::rank();
    n_ = ranks::size();
  }

  Measured run(const Row& row, unsigned repeat) {
    Measured m;
    double payload = 0;
    for (unsigned pass = 0; pass < std::max(1u, repeat); ++pass) {
      std::optional<Compressor> comp;
      std::vector<Decompressor> decs;
      if (row.kind == Kind::Cast || row.kind == Kind::Ring || row.kind == Kind::Allgather) {
        CompressorOptions o = row.options;
        o.seed = static_cast<uint64_t>(me_);  // worker r's seed is r
        comp.emplace(o);
        for (int r = 0; r < n_; ++r) {
          CompressorOptions d = row.options;
          d.seed = static_cast<uint64_t>(r);
          decs.emplace_back(d);
        }
      }
      for (size_t s = 0; s < w_.steps.size(); ++s) {
        std::vector<float> out(w_.flat[s].size());
        Times t;
        uint64_t bytes = 0;
        collectives::barrier();
        const Clock::time_point start = Clock::now();
        switch (row.kind) {
          case Kind::Fp32:
          case Kind::Fp16: bytes = reduce_in(row.cast, w_.flat[s], out, t); break;
          case Kind::Cast: bytes = cast(s, *comp, row.cast, out, t); break;
          case Kind::Ring: bytes = ring(s, *comp, out, t); break;
          case Kind::Allgather: bytes = allgather(s, *comp, decs, out, t); break;
        }
        t.step = seconds_since(start);
        // The step takes as long as its slowest rank; so does each phase.
        for (double* x : {&t.encode, &t.transfer, &t.aggregate, &t.decode, &t.step}) *x = collectives::all_max(*x);
        m.times.push_back(t);
        if (pass == 0) {
          payload += static_cast<double>(bytes);
          m.result.push_back(std::move(out));
        }
      }
    }
    std::vector<double> sum{payload};
    collectives::all_reduce_sum(sum);
    m.payload_bytes = sum[0] / static_cast<double>(n_) / static_cast<double>(std::max<size_t>(1, w_.steps.size()));
    return m;
  }

 private:
  size_t tensors() const { return w_.offsets.size() - 1; }
  TensorView view(size_t s, size_t i) const {
    const Tensor& t = w_.steps[s][i];
    return TensorView(t.name(), t.dtype(), t.shape(), t.data.data());
  }

  // Every rank's `values` summed in type `dt` by MPI_Allreduce (F32: MPI_SUM; F16, BF16: each
  // addition rounded to the type), then divided by N in f32. The casts count as encode and
  // decode time (a DDP bucket is one buffer: the copy into it too).
  uint64_t reduce_in(DType dt, const std::vector<float>& values, std::vector<float>& out, Times& t) {
    const float n = static_cast<float>(n_);
    const size_t count = values.size();
    Clock::time_point t0 = Clock::now();
    if (dt == DType::F32) {
      out = values;
      t.encode += seconds_since(t0);
      t0 = Clock::now();
      collectives::all_reduce_sum(std::span<float>(out));
      t.transfer = seconds_since(t0);
      t0 = Clock::now();
    } else {
      std::vector<uint16_t> h(count);
      if (dt == DType::F16) {
        if (count) f32_to_f16_n(values.data(), count, reinterpret_cast<uint8_t*>(h.data()));
      } else {
        for (size_t j = 0; j < count; ++j) h[j] = f32_to_bf16(values[j]);
      }
      t.encode += seconds_since(t0);
      t0 = Clock::now();
      if (dt == DType::F16) collectives::all_reduce_sum_f16(h);
      else collectives::all_reduce_sum_bf16(h);
      t.transfer = seconds_since(t0);
      t0 = Clock::now();
      if (dt == DType::F16) {
        if (count) f16_to_f32_n(reinterpret_cast<const uint8_t*>(h.data()), count, out.data());
      } else {
        for (size_t j = 0; j < count; ++j) out[j] = bf16_to_f32(h[j]);
      }
    }
    for (float& x : out) x /= n;
    t.decode = seconds_since(t0);
    return count * dtype_size(dt);
  }

  // A cast pipeline's row: each worker encodes (its error feedback included); its records are
  // its values in the cast's type, which the all-reduce sums.
  uint64_t cast(size_t s, Compressor& comp, DType dt, std::vector<float>& out, Times& t) {
    const Clock::time_point t0 = Clock::now();
    std::vector<std::vector<float>> mine;
    encode(s, comp, mine);
    std::vector<float> flat(w_.flat[s].size());
    for (size_t i = 0; i < tensors(); ++i) std::copy(mine[i].begin(), mine[i].end(), flat.begin() + static_cast<std::ptrdiff_t>(w_.offsets[i]));
    t.encode = seconds_since(t0);
    return reduce_in(dt, flat, out, t);
  }

  // Encodes this rank's step with its Compressor: the records, and each tensor decoded in f32.
  std::vector<std::vector<uint8_t>> encode(size_t s, Compressor& comp, std::vector<std::vector<float>>& mine) {
    std::vector<std::vector<uint8_t>> records;
    mine.assign(tensors(), {});
    ranks::together([&] {
      for (size_t i = 0; i < tensors(); ++i) {
        Tensor decoded;
        records.push_back(comp.encode(w_.steps[s][i].name(), view(s, i), &decoded));
        mine[i] = values_f32(decoded);
      }
    });
    return records;
  }

  uint64_t allgather(size_t s, Compressor& comp, std::vector<Decompressor>& decs, std::vector<float>& out, Times& t) {
    Clock::time_point t0 = Clock::now();
    std::vector<std::vector<float>> mine;
    const auto records = encode(s, comp, mine);
    std::vector<uint8_t> blob;
    for (const auto& r : records) append_record(blob, r);
    t.encode = seconds_since(t0);
    t0 = Clock::now();
    const auto all = collectives::all_gather(blob);
    t.transfer = seconds_since(t0);
    t0 = Clock::now();
    std::vector<std::vector<std::vector<float>>> vals(static_cast<size_t>(n_));
    ranks::together([&] {
      for (int r = 0; r < n_; ++r) {
        if (r == me_) continue;
        const auto theirs = split_records(all[static_cast<size_t>(r)], tensors(), r);
        for (size_t i = 0; i < tensors(); ++i)
          vals[static_cast<size_t>(r)].push_back(values_f32(decs[static_cast<size_t>(r)].decode(w_.steps[s][i].name(), theirs[i])));
      }
    });
    vals[static_cast<size_t>(me_)] = std::move(mine);
    t.decode = seconds_since(t0);
    t0 = Clock::now();
    for (size_t i = 0; i < tensors(); ++i) {
      std::vector<std::span<const float>> spans;
      for (const auto& v : vals) spans.emplace_back(v[i]);
      const std::vector<float> mean = workers_mean(spans);
      std::copy(mean.begin(), mean.end(), out.begin() + static_cast<std::ptrdiff_t>(w_.offsets[i]));
    }
    t.aggregate = seconds_since(t0);
    return blob.size();
  }

  uint64_t ring(size_t s, Compressor& comp, std::vector<float>& out, Times& t) {
    const size_t T = tensors();
    Clock::time_point t0 = Clock::now();
    std::vector<std::vector<float>> mine;
    encode(s, comp, mine);
    std::vector<std::vector<uint8_t>> own(T);
    std::vector<double> scales(T);
    for (size_t i = 0; i < T; ++i) own[i] = ring_sign_bits(mine[i]), scales[i] = ring_scale(mine[i]);
    t.encode = seconds_since(t0);
    std::vector<std::vector<uint8_t>> running = own;
    std::vector<double> sums = scales;
    uint64_t sent = 0;
    if (me_ > 0) {
      t0 = Clock::now();
      const std::vector<uint8_t> msg = collectives::receive(me_ - 1);
      t.transfer += seconds_since(t0);
      t0 = Clock::now();
      unpack_ring(msg, running, sums);
      for (size_t i = 0; i < T; ++i) {
        ring_hop(running[i], own[i], static_cast<uint32_t>(me_ + 1), static_cast<uint32_t>(n_), 0,
                 static_cast<uint32_t>(s), static_cast<uint32_t>(i));
        sums[i] += scales[i];
      }
      t.aggregate += seconds_since(t0);
    }
    std::vector<uint8_t> msg;
    if (me_ < n_ - 1) {
      t0 = Clock::now();
      msg = pack_ring(running, sums);
      collectives::send(msg, me_ + 1);
      sent = msg.size();
      t.transfer += seconds_since(t0);
    } else {
      t0 = Clock::now();
      for (double& x : sums) x /= static_cast<double>(n_);  // η
      msg = pack_ring(running, sums);
      sent = msg.size();
      t.aggregate += seconds_since(t0);
    }
    t0 = Clock::now();
    collectives::broadcast(msg, n_ - 1);
    t.transfer += seconds_since(t0);
    t0 = Clock::now();
    unpack_ring(msg, running, sums);
    for (size_t i = 0; i < T; ++i) {
      const float eta = static_cast<float>(sums[i]);
      for (size_t j = 0; j < running[i].size(); ++j) out[w_.offsets[i] + j] = running[i][j] ? eta : -eta;
    }
    t.decode = seconds_since(t0);
    return sent;
  }

  const Worker& w_;
  int me_ = 0, n_ = 1;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t k = v.size() / 2;
  return v.size() % 2 ? v[k] : 0.5 * (v[k - 1] + v[k]);
}

// The ring algorithms' bytes sent per rank per step for a payload of B bytes (docs/scale-out.md).
double sent_bytes(Kind k, double payload, int n) {
  const double N = n;
  return k == Kind::Allgather ? (N - 1) * payload : 2 * (N - 1) / N * payload;
}

void write_aggregate(Encoder& enc, const Worker& w, const std::vector<float>& flat) {
  std::vector<TensorView> views;
  std::vector<std::vector<uint8_t>> own;  // the aggregate in the workers' dtypes, as merge writes it
  const std::vector<Tensor>& first = w.steps[0];
  for (size_t i = 0; i < first.size(); ++i) {
    const uint64_t n = first[i].elements();
    own.emplace_back(n * dtype_size(first[i].dtype()));
    if (n) from_f32(flat.data() + w.offsets[i], n, first[i].dtype(), own.back().data());
  }
  for (size_t i = 0; i < first.size(); ++i)
    views.emplace_back(first[i].name(), first[i].dtype(), first[i].shape(), own[i].data());
  enc.add_frame(views);
}

}  // namespace

int run_bench_collective(const CollectiveBenchArgs& a) {
  if (a.collective != "auto" && a.collective != "allgather")
    fail(ErrorCode::Usage, "--collective '" + a.collective + "' with --workers: expected auto (each pipeline's own: "
                           "Marsit's ring for one-bit signs, else allgather) or allgather");
  const int n = ranks::size(), me = ranks::rank();
  if (n < 2)
    fail(ErrorCode::Usage, "bench --collective measures a real aggregation: start it with mpirun -np N (N >= 2, one "
                           "rank per worker), e.g. mpirun -np 4 gradcodec bench --collective auto --workers 'w_*.npz'");
  const std::vector<Row> rows = make_rows(a);
  const auto steps = expand_worker_steps(a.steps);
  if (steps[0].size() != static_cast<size_t>(n))
    fail(ErrorCode::Usage, "bench --collective: each step has " + std::to_string(steps[0].size()) +
                               " worker inputs but the job has " + std::to_string(n) +
                               " ranks (one rank per worker: mpirun -np " + std::to_string(steps[0].size()) + ")");
  std::unique_ptr<AtomicOutput> json;
  std::vector<Encoder> aggregates;
  ranks::together([&] {
    if (me != 0) return;
    if (!a.json.empty()) {
      if (a.json != "-" && is_directory(a.json)) fail(ErrorCode::Usage, a.json + ": is a directory");
      json = std::make_unique<AtomicOutput>(a.json, a.force);
    }
    if (!a.aggregates.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(a.aggregates, ec);
      if (ec) fail(ErrorCode::Input, "--aggregates " + a.aggregates + ": cannot create the directory: " + ec.message());
      for (size_t k = 0; k < rows.size(); ++k) {
        EncoderOptions o;
        o.preset = "lossless";
        o.overwrite = a.force;
        aggregates.push_back(Encoder::to_path((std::filesystem::path(a.aggregates) / ("row" + std::to_string(k) + ".gcz")).string(), o));
      }
    }
  });
  Worker w;
  ranks::together([&] { w = load_worker(steps, a.in); });
  // Every worker must hold the same tensors.
  {
    const std::string mine = describe(w.steps[0]);
    const auto all = ranks::all_gather(std::vector<uint8_t>(mine.begin(), mine.end()));
    ranks::together([&] {
      for (int r = 1; r < n; ++r)
        if (all[static_cast<size_t>(r)] != all[0])
          fail(ErrorCode::Input, "--workers: " + steps[0][static_cast<size_t>(r)] +
                                     " does not hold the tensors (names, dtypes, shapes) of " + steps[0][0]);
    });
  }
  // The reference: the workers' mean of every step, in double.
  std::vector<std::vector<double>> truth;
  for (const auto& flat : w.flat) {
    std::vector<double> sum(flat.begin(), flat.end());
    collectives::all_reduce_sum(sum);
    for (double& x : sum) x /= n;
    truth.push_back(std::move(sum));
  }

  nlohmann::ordered_json report;
  report["schema"] = kCollectiveSchema;
  report["tool"] = version();
  report["ranks"] = n;
  report["steps"] = steps.size();
  report["parameters"] = w.offsets.back();
  report["repeat"] = std::max(1u, a.repeat);
  report["timed_steps"] = steps.size() * std::max(1u, a.repeat);
  nlohmann::ordered_json workers = nlohmann::ordered_json::array();
  for (const auto& s : steps) workers.push_back(s);
  report["workers"] = workers;
  report["rows"] = nlohmann::ordered_json::array();
  StepRunner runner(w);
  double fp32_step = 0, fp16_step = 0;
  for (size_t k = 0; k < rows.size(); ++k) {
    const Row& row = rows[k];
    const Measured m = runner.run(row, a.repeat);
    auto column = [&](double Times::*field) {
      std::vector<double> v;
      for (const Times& t : m.times) v.push_back(t.*field);
      return median(v);
    };
    const double step = column(&Times::step);
    if (row.kind == Kind::Fp32) fp32_step = step;
    if (row.kind == Kind::Fp16) fp16_step = step;
    double err = 0, ref = 0;
    for (size_t s = 0; s < truth.size(); ++s)
      for (size_t j = 0; j < truth[s].size(); ++j) {
        const double d = static_cast<double>(m.result[s][j]) - truth[s][j];
        err += d * d, ref += truth[s][j] * truth[s][j];
      }
    nlohmann::ordered_json r;
    r["name"] = row.name;
    r["pipeline"] = row.pipeline_text;
    r["collective"] = kind_name(row.kind);
    r["payload_bytes"] = m.payload_bytes;
    r["sent_bytes"] = sent_bytes(row.kind, m.payload_bytes, n);
    r["bits_per_param"] = w.offsets.back() ? 8 * m.payload_bytes / static_cast<double>(w.offsets.back()) : 0.0;
    r["encode_seconds"] = column(&Times::encode);
    r["transfer_seconds"] = column(&Times::transfer);
    r["aggregate_seconds"] = column(&Times::aggregate);
    r["decode_seconds"] = column(&Times::decode);
    r["step_seconds"] = step;
    r["rel_l2"] = ref > 0 ? std::sqrt(err / ref) : std::sqrt(err);
    if (!aggregates.empty()) r["aggregate"] = (std::filesystem::path(a.aggregates) / ("row" + std::to_string(k) + ".gcz")).string();
    report["rows"].push_back(r);
    ranks::together([&] {
      if (me != 0 || aggregates.empty()) return;
      for (const auto& flat : m.result) write_aggregate(aggregates[k], w, flat);
    });
  }
  // The baselines are the first two rows: every row's speed-up against both.
  for (auto& r : report["rows"]) {
    const double step = r["step_seconds"].get<double>();
    r["speedup_fp32"] = step > 0 ? fp32_step / step : 0.0;
    r["speedup_fp16"] = step > 0 ? fp16_step / step : 0.0;
  }
  report["formulas"] = {
      {"step_seconds", "the median over steps and passes of the slowest rank's time from a barrier to the aggregate "
                       "in hand; each phase likewise"},
      {"payload_bytes", "the bytes a rank hands to MPI for one step: records with a u64 length each (allgather), "
                        "the packed sign bits and an f64 per tensor (ring), 4 or 2 bytes per parameter (allreduce)"},
      {"sent_bytes", "S = (N-1) * B (allgather), 2(N-1)/N * B (allreduce and ring: the ring algorithm's bytes "
                     "per rank; Marsit's ring: N-1 hops and the last rank's broadcast)"},
      {"speedup_fp32", "step_seconds of allreduce-fp32 / this row's"},
      {"rel_l2", "||aggregate - mean||_2 / ||mean||_2 over every element of every step, mean = (1/N) sum of the "
                 "raw worker gradients"}};
  if (me != 0) return 0;
  const std::string text = report.dump(2) + "\n";
  if (a.json != "-") print_collective_table(report, a.markdown);
  if (json) {
    json->write(text.data(), text.size());
    json->commit();
  }
  for (Encoder& e : aggregates) e.finish();
  return 0;
}

}  // namespace gradcodec::cli
