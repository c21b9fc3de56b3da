// SPDX-License-Identifier: BSD-3-Clause
// The report of bench() and `gradcodec bench --json`: every row's figures under stable field names
// (docs/bench.md; the CLI's table and CSV are made from this record).
#include "api/bench_run.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace gradcodec::api {

namespace {

using nlohmann::ordered_json;

// v / params, or null for params == 0 (a snapshot of empty or pass-through arrays only): a
// per-parameter figure that would mean nothing.
ordered_json per_param(double v, uint64_t params) {
  if (params == 0) return nullptr;
  return v / double(params);
}

// Every figure of a row, by its stable field name (JSON and CSV share these names).
ordered_json row_fields(const BenchRow& r) {
  const double mb = double(r.input_bytes) / 1e6;
  const uint64_t streams = r.index_bytes + r.value_bytes + r.scale_bytes + r.side_bytes;
  const uint64_t overhead = r.output_bytes > streams ? r.output_bytes - streams : 0;
  const double kept = double(r.kept);
  auto cr = [&](double dense_bits, uint64_t bytes) -> ordered_json {
    if (bytes == 0) return nullptr;
    return dense_bits / (8.0 * double(bytes));
  };
  const double t_enc = r.encode_median;
  ordered_json j;
  j["label"] = r.label;
  j["pipeline"] = r.pipeline;
  j["sweep"] = r.sweep;
  j["deterministic"] = r.deterministic;
  j["lossless"] = r.exact;
  j["parameters"] = r.parameters;
  j["kept"] = r.kept;
  j["kept_fraction"] = per_param(kept, r.parameters);
  j["input_bytes"] = r.input_bytes;
  j["output_bytes"] = r.output_bytes;
  j["ratio"] = r.output_bytes ? double(r.input_bytes) / double(r.output_bytes) : 0.0;
  // Against a 16-bit (fp16 / bf16) copy of the same parameters: many papers compare with fp32
  // only, while 16-bit gradients are common (--baseline fp16).
  j["ratio_16bit"] = r.output_bytes ? 2.0 * double(r.parameters) / double(r.output_bytes) : 0.0;
  j["bits_per_param"] = per_param(8.0 * double(r.output_bytes), r.parameters);
  j["bits_index"] = per_param(8.0 * double(r.index_bytes), r.parameters);
  j["bits_value"] = per_param(8.0 * double(r.value_bytes), r.parameters);
  j["bits_scale_side"] = per_param(8.0 * double(r.scale_bytes + r.side_bytes), r.parameters);
  j["bits_overhead"] = per_param(8.0 * double(overhead), r.parameters);
  j["index_cr"] = cr(32.0 * kept, r.index_bytes);
  j["value_cr"] = cr(32.0 * kept, r.value_bytes + r.scale_bytes);
  j["overall_cr"] = cr(64.0 * kept, streams);
  j["rel_l2"] = r.err.rel_l2();
  j["cosine"] = r.err.cosine();
  j["max_abs_error"] = r.err.max_abs;
  j["sign_agreement"] = r.err.sign_agreement();
  j["nonfinite_values"] = r.err.nonfinite;
  j["encode_mbps"] = t_enc > 0 ? mb / t_enc : 0.0;
  j["decode_mbps"] = r.decode_median > 0 ? mb / r.decode_median : 0.0;
  j["throughput_mbps"] = t_enc > 0 ? (double(r.input_bytes) - double(r.output_bytes)) / 1e6 / t_enc : 0.0;
  j["encode_seconds_median"] = t_enc;
  j["decode_seconds_median"] = r.decode_median;
  j["runs"] = r.encode_s.size();
  j["decode_runs"] = r.decode_s.size();
  j["encode_spread"] = r.encode_spread;
  j["decode_spread"] = r.decode_spread;
  double total = r.container_ns;
  for (double v : r.times.ns) total += v;
  auto share = [&](double v) { return total > 0 ? v / total : 0.0; };
  j["time_transform"] = share(r.times.of(StageKind::Transform));
  j["time_sparsify"] = share(r.times.of(StageKind::Sparsifier) + r.times.of(StageKind::LowRank));
  j["time_quantize"] = share(r.times.of(StageKind::Quantizer));
  j["time_index"] = share(r.times.of(StageKind::IndexCoder));
  j["time_lossless"] = share(r.times.of(StageKind::Lossless));
  j["time_container"] = share(r.container_ns);
  j["seeds"] = r.seeds;
  auto num = [&](double v) { return r.bias.valid && std::isfinite(v) ? ordered_json(v) : ordered_json(nullptr); };
  j["bias"] = num(r.bias.bias);
  j["bias_z"] = num(r.bias.z);
  j["bias_sq"] = num(r.bias.excess);
  j["bias_sq_se"] = num(r.bias.excess_se);
  j["bias_raw"] = num(r.bias.raw);
  j["bias_noise"] = num(r.bias.noise);
  j["rel_l2_mean"] = r.rel_l2_mean;
  j["rel_l2_std"] = r.rel_l2_std;
  return j;
}


// The stages' figures (Stage::stream_stats) by name: value, and the sums it is the ratio of.
ordered_json stats_json(const StageStats& stats) {
  ordered_json j = ordered_json::object();
  for (const auto& s : stats)
    j[s.name] = {{"value", s.value()}, {"num", s.num}, {"den", s.den}, {"formula", s.formula}};
  return j;
}

// The link model's formulas, as the report and the table's legend state them (docs/bench.md).
constexpr const char* kLinkFormulas[][2] = {
    {"link_payload_bytes", "B = record bytes per frame (one worker's payload for one aggregation)"},
    {"link_sent_bytes", "S = 2(N-1)/N * B (allreduce, ring) or (N-1) * B (allgather)"},
    {"link_messages", "M = 2(N-1) (allreduce, ring) or N-1 (allgather)"},
    {"link_comm_seconds", "t_comm = M * latency + S / rate"},
    {"link_encode_seconds", "t_enc = median encode seconds / frames"},
    {"link_decode_seconds", "t_dec = median decode seconds / frames * D, D = N-1 (allgather) or 1"},
    {"link_step_seconds", "t = t_enc + t_dec + t_comm"},
    {"link_fp32_seconds", "t_fp32 = 2(N-1) * latency + 2(N-1)/N * 4p / rate, p = parameters per frame"},
    {"link_fp16_seconds", "t_fp16 = 2(N-1) * latency + 2(N-1)/N * 2p / rate (the casts not counted)"},
    {"link_speedup_fp32", "t_fp32 / t"},
    {"link_speedup_fp16", "t_fp16 / t"},
};

// The row's link-model figures (ctx.link.rate > 0): one aggregation of N workers' payloads of
// the row's mean record bytes per frame.
void add_link_fields(ordered_json& j, const BenchRow& r, const LinkModel& link) {
  const double frames = std::max<size_t>(1, r.frames.size());
  const double n = link.workers;
  uint64_t record_bytes = 0;
  for (const auto& f : r.frames) record_bytes += f.record_bytes;
  const double payload = double(record_bytes) / frames;
  const double params = double(r.parameters) / frames;
  const std::string c = link.collective == "auto" ? r.collective : link.collective;
  const bool gather = c == "allgather";
  const double sent = gather ? (n - 1) * payload : 2 * (n - 1) / n * payload;
  const double messages = gather ? n - 1 : 2 * (n - 1);
  const double comm = messages * link.latency + sent / link.rate;
  const double enc = r.encode_median / frames;
  const double dec = r.decode_median / frames * (gather ? n - 1 : 1);
  const double step = enc + dec + comm;
  auto all_reduce = [&](double bytes) { return 2 * (n - 1) * link.latency + 2 * (n - 1) / n * bytes / link.rate; };
  const double fp32 = all_reduce(4 * params), fp16 = all_reduce(2 * params);
  j["link_collective"] = c;
  j["link_payload_bytes"] = payload;
  j["link_sent_bytes"] = sent;
  j["link_messages"] = messages;
  j["link_comm_seconds"] = comm;
  j["link_encode_seconds"] = enc;
  j["link_decode_seconds"] = dec;
  j["link_step_seconds"] = step;
  j["link_fp32_seconds"] = fp32;
  j["link_fp16_seconds"] = fp16;
  j["link_speedup_fp32"] = step > 0 ? fp32 / step : 0.0;
  j["link_speedup_fp16"] = step > 0 ? fp16 / step : 0.0;
}

}  // namespace

std::string auto_collective(const Pipeline& pipeline) {
  bool signs = false, summing = false, other = false;
  for (const auto& s : pipeline.stages()) {
    if (s.name == "raw" || s.name == "fp16" || s.name == "bf16" || s.name == "ef") continue;
    if (s.name == "powersgd" || (s.name == "randk" && s.params.flag("shared_seed")))
      summing = true;  // the same positions, or the factors, on every worker: the values sum
    else if (s.name == "sign" || s.name == "ssdm")
      signs = true;
    else
      other = true;  // an index, a per-worker scale or code, a lossless stage: gathered
  }
  if (other || (signs && summing)) return "allgather";
  return signs ? "ring" : "allreduce";
}

// The row's target (docs/target.md): what the search chose on the first frame, or why it chose
// nothing.
ordered_json target_json(const RowTarget& t) {
  ordered_json j;
  j["status"] = t.status;
  j["given"] = t.given;
  if (t.status == "met") {
    j["stage"] = t.stage;
    j["param"] = t.param;
    j["value"] = t.value;
    j["bits_per_param"] = t.bits_per_parameter;
    j["rel_l2"] = t.has_error ? ordered_json(t.rel_l2) : ordered_json(nullptr);
    j["encodes"] = t.encodes;
  } else {
    j["reason"] = t.reason;
  }
  return j;
}

std::string rows_json(const std::vector<BenchRow>& rows, const BenchContext& ctx) {
  ordered_json out;
  out["schema"] = kBenchSchema;
  out["tool"] = tool_version();
  out["inputs"] = ctx.inputs;
  out["frames"] = ctx.frames;
  out["threads"] = ctx.threads;
  out["repeat"] = ctx.repeat;
  out["min_time"] = ctx.min_time;
  if (!ctx.target.empty()) out["target"] = ctx.target;
  const bool link = ctx.link.rate > 0;
  if (link) {
    ordered_json formulas = ordered_json::object();
    for (const auto& [field, formula] : kLinkFormulas) formulas[field] = formula;
    out["link"] = {{"rate_bytes_per_second", ctx.link.rate},
                   {"workers", ctx.link.workers},
                   {"latency_seconds", ctx.link.latency},
                   {"collective", ctx.link.collective},
                   {"formulas", formulas}};
  }
  ordered_json arr = ordered_json::array();
  for (const auto& r : rows) {
    ordered_json j = row_fields(r);
    if (link) add_link_fields(j, r, ctx.link);
    ordered_json frames = ordered_json::array();
    for (size_t f = 0; f < r.frames.size(); ++f) {
      const auto& ff = r.frames[f];
      frames.push_back({{"frame", f},
                        {"input_bytes", ff.input_bytes},
                        {"record_bytes", ff.record_bytes},
                        {"parameters", ff.parameters},
                        {"ratio", ff.record_bytes ? double(ff.input_bytes) / ff.record_bytes : 0.0},
                        {"bits_per_param", per_param(8.0 * double(ff.record_bytes), ff.parameters)},
                        {"rel_l2", ff.err.rel_l2()},
                        {"cosine", ff.err.cosine()}});
    }
    j["per_frame"] = frames;
    j["stage_stats"] = stats_json(r.stats);
    if (r.target.asked) j["target"] = target_json(r.target);
    if (!r.tensors.empty()) {
      ordered_json ts = ordered_json::array();
      for (const auto& t : r.tensors)
        ts.push_back({{"frame", t.frame},
                      {"name", t.name},
                      {"storage", t.storage},
                      {"parameters", t.parameters},
                      {"kept", t.kept},
                      {"input_bytes", t.input_bytes},
                      {"record_bytes", t.record_bytes},
                      {"ratio", t.record_bytes ? double(t.input_bytes) / t.record_bytes : 0.0},
                      {"rel_l2", t.err.rel_l2()},
                      {"stage_stats", stats_json(t.stats)}});
      j["per_tensor"] = ts;
    }
    arr.push_back(j);
  }
  out["rows"] = arr;
  return out.dump(2) + "\n";
}

}  // namespace gradcodec::api
