// SPDX-License-Identifier: BSD-3-Clause
#include "bench_report.hpp"
#include "figures.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>

namespace gradcodec::cli {

std::string md_cell(const std::string& s);

namespace {

using nlohmann::ordered_json;

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

// Rows whose runs spread more than this (slowest / fastest) are marked '!' in the table.
constexpr double kSpreadMark = 2.0;
constexpr size_t kNameColumn = 26;

std::string full_name(const BenchRow& r) {
  std::string name = r.label == "pipeline" ? r.pipeline : r.label;
  if (!r.sweep.empty()) name += " [" + r.sweep + "]";
  return name;
}

// The first column of the text tables: the name when it fits, else "#N " and its start, N the
// row's number in the list of names in full printed below the tables (two rows differing only
// past the column's width must not look the same).
std::string name_cell(const BenchRow& r, size_t index, bool md) {
  std::string name = full_name(r);
  if (md) return md_cell(name);
  if (name.size() <= kNameColumn) return name;
  std::string tag = "#" + std::to_string(index + 1) + " ";
  return tag + name.substr(0, kNameColumn - tag.size() - 1) + "~";
}

// A speed with its mark: '!' when the row's runs spread more than kSpreadMark, else (text tables,
// to keep the column aligned) a space.
std::string speed_cell(double mbps, double spread, bool md) {
  return format("%.1f%s", mbps, spread > kSpreadMark ? "!" : md ? "" : " ");
}

// The bias column: the estimate with its standard error and z when the seeds show a bias, else
// that none was found (SeedBias).
std::string bias_text(const BenchRow& r) {
  if (r.deterministic) return "deterministic";
  if (!r.bias.valid) return "stochastic (use --seeds N)";
  const SeedBias& b = r.bias;
  std::string out;
  if (std::isnan(b.z))
    out = format("bias %.3g (no seed noise)", b.bias);
  else if (b.z >= 3)
    out = format("bias %.3g +- %.2g (z %.0f)", b.bias, b.excess_se / (2 * b.bias), b.z);
  else
    out = format("bias ~0 (z %.1f, within the seeds' noise %.3g)", b.z, b.noise);
  return out + format(", rel L2 %.3g +- %.2g (%u seeds)", r.rel_l2_mean, r.rel_l2_std, r.seeds);
}

}  // namespace

// A Markdown table cell holds '|' as "\|" (a pipeline's text, "max|err|"): a bare one would
// split the cell and the rows would no longer match the header.
std::string md_cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

void print_table(std::FILE* out, const std::vector<BenchRow>& rows, const BenchContext& ctx, bool md) {
  std::string in;
  for (const auto& i : ctx.inputs) in += (in.empty() ? "" : " ") + i;
  std::fprintf(out, "%sgradcodec bench: %zu frame(s) from %s; %u thread(s); median of >= %u runs and >= %.2g s\n\n",
               md ? "" : "", ctx.frames, in.c_str(), ctx.threads, ctx.repeat, ctx.min_time);
  const char* h1 = md ? "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n"
                      : "%-26s %8s %8s %7s %7s %7s %6s %9s %8s %9s %7s %10s %10s %7s\n";
  std::fprintf(out, h1, "pipeline", "ratio", "bits/p", "index", "value", "sc+side", "ovh", "rel L2", "cosine",
               md ? "max\\|err\\|" : "max|err|", "sign%", md ? "enc MB/s" : "enc MB/s ", md ? "dec MB/s" : "dec MB/s ", "runs");
  if (md) std::fprintf(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  bool marked = false;
  for (size_t n = 0; n < rows.size(); ++n) {
    const BenchRow& r = rows[n];
    ordered_json j = row_fields(r);
    const char* f = md ? "| %s | %.2f | %s | %s | %s | %s | %s | %.3g | %.5f | %.3g | %.1f | %s | %s | %s |\n"
                       : "%-26s %8.2f %8s %7s %7s %7s %6s %9.3g %8.5f %9.3g %7.1f %10s %10s %7s\n";
    marked |= r.encode_spread > kSpreadMark || r.decode_spread > kSpreadMark;
    std::fprintf(out, f, name_cell(r, n, md).c_str(), j["ratio"].get<double>(), fig(j["bits_per_param"], "%.4f").c_str(),
                 fig(j["bits_index"], "%.4f").c_str(), fig(j["bits_value"], "%.4f").c_str(),
                 fig(j["bits_scale_side"], "%.4f").c_str(), fig(j["bits_overhead"], "%.4f").c_str(),
                 j["rel_l2"].get<double>(), j["cosine"].get<double>(),
                 j["max_abs_error"].get<double>(), 100.0 * j["sign_agreement"].get<double>(),
                 speed_cell(j["encode_mbps"].get<double>(), r.encode_spread, md).c_str(),
                 speed_cell(j["decode_mbps"].get<double>(), r.decode_spread, md).c_str(),
                 format("%zu/%zu", r.encode_s.size(), r.decode_s.size()).c_str());
  }
  if (marked)
    std::fprintf(out, "! = the row's timed runs spread more than %.0fx (slowest / fastest): the machine was busy; "
                      "the median holds, but rerun to trust it\n", kSpreadMark);
  std::fprintf(out, "\n");
  const char* h2 = md ? "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n"
                      : "%-26s %7s %7s %7s %9s %7s %7s %7s %7s %7s %s\n";
  std::fprintf(out, h2, "pipeline", "kept%", "idx CR", "val CR", "thr MB/s", "xform%", "spars%", "quant%", "index%",
               "lossl%", "bias over seeds / error spread");
  if (md) std::fprintf(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  for (size_t n = 0; n < rows.size(); ++n) {
    const BenchRow& r = rows[n];
    ordered_json j = row_fields(r);
    const char* f = md ? "| %s | %s | %s | %s | %.1f | %.0f | %.0f | %.0f | %.0f | %.0f | %s |\n"
                       : "%-26s %7s %7s %7s %9.1f %7.0f %7.0f %7.0f %7.0f %7.0f %s\n";
    const ordered_json& kf = j["kept_fraction"];
    std::fprintf(out, f, name_cell(r, n, md).c_str(), kf.is_null() ? "-" : format("%.3f", 100.0 * kf.get<double>()).c_str(),
                 fig(j["index_cr"], "%.1f").c_str(), fig(j["value_cr"], "%.1f").c_str(), j["throughput_mbps"].get<double>(),
                 100 * j["time_transform"].get<double>(), 100 * j["time_sparsify"].get<double>(),
                 100 * j["time_quantize"].get<double>(), 100 * j["time_index"].get<double>(),
                 100 * j["time_lossless"].get<double>(), bias_text(r).c_str());
  }
  StageStats names;  // every figure reported by some row, for the legend
  for (const auto& r : rows) merge_stats(names, r.stats);
  if (!names.empty()) {
    std::fprintf(out, "\nstage figures (over every record)\n");
    if (md) std::fprintf(out, "| pipeline | figures |\n|---|---|\n");
    for (const auto& r : rows) {
      if (r.stats.empty()) continue;
      std::string name = full_name(r);  // in full: rows differ late
      if (md) name = md_cell(name);
      std::string figs;
      for (const auto& st : r.stats)
        figs += (figs.empty() ? "" : md ? "; " : "   ") + format("%s %.4g", st.name.c_str(), st.value());
      std::fprintf(out, md ? "| %s | %s |\n" : "%s\n    %s\n", name.c_str(), figs.c_str());
    }
  }
  if (ctx.frames > 1) {
    std::fprintf(out, "\nper frame: ratio (rel L2)\n");
    for (size_t n = 0; n < rows.size(); ++n) {
      std::fprintf(out, md ? "| %s |" : "%-26s", name_cell(rows[n], n, md).c_str());
      for (const auto& f : rows[n].frames)
        std::fprintf(out, md ? " %.2f (%.3g) |" : " %8.2f (%-9.3g)",
                     f.record_bytes ? double(f.input_bytes) / f.record_bytes : 0.0, f.err.rel_l2());
      std::fprintf(out, "\n");
    }
  }
  if (!md) {  // the names the tables cut, in full
    bool header = false;
    for (size_t n = 0; n < rows.size(); ++n) {
      const std::string name = full_name(rows[n]);
      if (name.size() <= kNameColumn) continue;
      if (!header) std::fprintf(out, "\nrows in full\n");
      header = true;
      std::fprintf(out, "#%zu %s\n", n + 1, name.c_str());
    }
  }
  std::fprintf(out,
      "\nratio = input bytes (as stored dtype) / output bytes (whole container);  bits/p = 8 * output bytes / parameters\n"
      "index, value, sc+side (scale and side streams), ovh (container overhead = output - all streams): bits per parameter\n"
      "rel L2 = ||g - g^||2 / ||g||2;  cosine = g.g^ / (||g|| ||g^||);  max|err| = max |g - g^|;  sign%% = share with sign(g) == sign(g^), 0 counted as +\n"
      "MB = 10^6 bytes of input;  enc/dec MB/s = input MB / median seconds of the row's timed runs;  runs = timed encodes/decodes;  "
      "thr = (input bytes - output bytes) / 10^6 / encode seconds (BIRD+'s (a - b)/T)\n"
      "kept%% = values coded / parameters;  idx CR = 32 * kept / index bits;  val CR = 32 * kept / (value + scale bits)  (BIRD+ Fig. 10)\n"
      "xform/spars/quant/index/lossl%% = share of encode time per stage kind (rest: container and I/O)\n"
      "bias = ||E g^ - g|| / ||g|| estimated over the seeds, their noise removed (+- its standard error);  z = bias^2 / its standard "
      "error: an unbiased pipeline reads |z| < 3, 'bias ~0' (see docs/bench.md)\n");
  for (const auto& st : names) std::fprintf(out, "%s = %s\n", st.name.c_str(), st.formula.c_str());
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
  ordered_json arr = ordered_json::array();
  for (const auto& r : rows) {
    ordered_json j = row_fields(r);
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

std::string rows_csv(const std::vector<BenchRow>& rows) {
  std::string out;
  bool header = false;
  for (const auto& r : rows) {
    ordered_json j = row_fields(r);
    if (!header) {
      std::string h;
      for (auto it = j.begin(); it != j.end(); ++it) h += (h.empty() ? "" : ",") + it.key();
      out += h + "\n";
      header = true;
    }
    std::string line;
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      std::string v;
      if (it->is_string()) {
        v = "\"";
        for (char c : it->get<std::string>()) v += c == '"' ? std::string("\"\"") : std::string(1, c);
        v += "\"";
      } else if (it->is_null()) {
        v = "";
      } else {
        v = it->dump();
      }
      line += (first ? "" : ",") + v;
      first = false;
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace gradcodec::cli
