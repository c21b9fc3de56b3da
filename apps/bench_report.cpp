// SPDX-License-Identifier: BSD-3-Clause
#include "bench_report.hpp"
#include "figures.hpp"

#include <cmath>
#include <cstdio>

namespace gradcodec::cli {

std::string md_cell(const std::string& s);

namespace {

using nlohmann::ordered_json;

// Rows whose runs spread more than this (slowest / fastest) are marked '!' in the table.
constexpr double kSpreadMark = 2.0;
constexpr size_t kNameColumn = 26;

// A figure of the report; NaN where it holds null (JSON has no Inf or NaN: a non-finite figure is
// written as null, and the tables show it as "-").
double num(const ordered_json& v) { return v.is_null() ? std::nan("") : v.get<double>(); }

std::string full_name(const ordered_json& r) {
  std::string name = r["label"] == "pipeline" ? r["pipeline"].get<std::string>() : r["label"].get<std::string>();
  const std::string sweep = r["sweep"].get<std::string>();
  if (!sweep.empty()) name += " [" + sweep + "]";
  return name;
}

// The first column of the text tables: the name when it fits, else "#N " and its start, N the
// row's number in the list of names in full printed below the tables (two rows differing only
// past the column's width must not look the same).
std::string name_cell(const ordered_json& r, size_t index, bool md) {
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
// that none was found (docs/bench.md). The report's bias is null when the seeds could not
// measure one (a single seed), its z null when the seeds showed no noise at all.
std::string bias_text(const ordered_json& r) {
  if (r["deterministic"].get<bool>()) return "deterministic";
  if (r["bias"].is_null()) return "stochastic (use --seeds N)";
  const double bias = num(r["bias"]);
  std::string out;
  if (r["bias_z"].is_null())
    out = format("bias %.3g (no seed noise)", bias);
  else if (num(r["bias_z"]) >= 3)
    out = format("bias %.3g +- %.2g (z %.0f)", bias, num(r["bias_sq_se"]) / (2 * bias), num(r["bias_z"]));
  else
    out = format("bias ~0 (z %.1f, within the seeds' noise %.3g)", num(r["bias_z"]), num(r["bias_noise"]));
  return out + format(", rel L2 %.3g +- %.2g (%u seeds)", num(r["rel_l2_mean"]), num(r["rel_l2_std"]),
                      r["seeds"].get<unsigned>());
}

// Milliseconds, or "-" for a null figure.
std::string ms(const ordered_json& v) { return v.is_null() ? std::string("-") : format("%.3f", 1e3 * num(v)); }

// The link model's table (docs/bench.md, "Link model") and its formulas.
void print_link_table(std::FILE* out, const ordered_json& report, bool md) {
  const ordered_json& link = report["link"];
  std::fprintf(out, "\nlink model: %s/s, %u workers, latency %.3g us, collective %s\n",
               human_bytes(static_cast<uint64_t>(num(link["rate_bytes_per_second"]))).c_str(),
               link["workers"].get<unsigned>(), 1e6 * num(link["latency_seconds"]),
               link["collective"].get<std::string>().c_str());
  const char* h = md ? "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n"
                     : "%-26s %-9s %12s %10s %9s %9s %10s %8s %8s\n";
  std::fprintf(out, h, "pipeline", "collect.", "sent/worker", "comm ms", "enc ms", "dec ms", "step ms", "x fp32",
               "x fp16");
  if (md) std::fprintf(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  const ordered_json& rows = report["rows"];
  for (size_t n = 0; n < rows.size(); ++n) {
    const ordered_json& j = rows[n];
    const char* f = md ? "| %s | %s | %s | %s | %s | %s | %s | %.2f | %.2f |\n"
                       : "%-26s %-9s %12s %10s %9s %9s %10s %8.2f %8.2f\n";
    std::fprintf(out, f, name_cell(j, n, md).c_str(), j["link_collective"].get<std::string>().c_str(),
                 human_bytes(static_cast<uint64_t>(num(j["link_sent_bytes"]) + 0.5)).c_str(),
                 ms(j["link_comm_seconds"]).c_str(), ms(j["link_encode_seconds"]).c_str(),
                 ms(j["link_decode_seconds"]).c_str(), ms(j["link_step_seconds"]).c_str(),
                 num(j["link_speedup_fp32"]), num(j["link_speedup_fp16"]));
  }
  for (auto it = link["formulas"].begin(); it != link["formulas"].end(); ++it)
    std::fprintf(out, "%s: %s\n", it.key().c_str(), it->get<std::string>().c_str());
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

// bench --target: what each row's search chose on the first frame (docs/target.md).
void print_targets(std::FILE* out, const ordered_json& report, bool md) {
  std::fprintf(out, "\ntarget %s, searched on the first frame (as encode --target)\n",
               report["target"].get<std::string>().c_str());
  if (md) std::fprintf(out, "| pipeline | chosen |\n|---|---|\n");
  for (const auto& r : report["rows"]) {
    if (!r.contains("target")) continue;
    const ordered_json& t = r["target"];
    std::string chosen;
    if (t["status"] == "met") {
      chosen = format("%s %s=%s (%.4g bits/param", t["stage"].get<std::string>().c_str(),
                      t["param"].get<std::string>().c_str(), t["value"].get<std::string>().c_str(),
                      num(t["bits_per_param"]));
      if (!t["rel_l2"].is_null()) chosen += format(", rel L2 %.4g", num(t["rel_l2"]));
      chosen += format("; %zu encodes)", t["encodes"].get<size_t>());
    } else {
      chosen = std::string(t["status"] == "none" ? "as given: " : "not met, as given: ") + t["reason"].get<std::string>();
    }
    std::string name = full_name(r);
    if (md) name = md_cell(name), chosen = md_cell(chosen);
    std::fprintf(out, md ? "| %s | %s |\n" : "%s\n    %s\n", name.c_str(), chosen.c_str());
  }
}

void print_table(std::FILE* out, const ordered_json& report, bool md, bool baseline16) {
  const ordered_json& rows = report["rows"];
  std::string in;
  for (const auto& i : report["inputs"]) in += (in.empty() ? "" : " ") + i.get<std::string>();
  const size_t frames = report["frames"].get<size_t>();
  std::fprintf(out, "%sgradcodec bench: %zu frame(s) from %s; %u thread(s); median of >= %u runs and >= %.2g s\n\n",
               md ? "" : "", frames, in.c_str(), report["threads"].get<unsigned>(), report["repeat"].get<unsigned>(),
               num(report["min_time"]));
  const char* h1 = md ? "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n"
                      : "%-26s %8s %8s %7s %7s %7s %6s %9s %8s %9s %7s %10s %10s %7s\n";
  std::fprintf(out, h1, "pipeline", baseline16 ? "ratio/16b" : "ratio", "bits/p", "index", "value", "sc+side", "ovh", "rel L2", "cosine",
               md ? "max\\|err\\|" : "max|err|", "sign%", md ? "enc MB/s" : "enc MB/s ", md ? "dec MB/s" : "dec MB/s ", "runs");
  if (md) std::fprintf(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  bool marked = false;
  for (size_t n = 0; n < rows.size(); ++n) {
    const ordered_json& j = rows[n];
    const double enc_spread = num(j["encode_spread"]), dec_spread = num(j["decode_spread"]);
    const char* f = md ? "| %s | %.2f | %s | %s | %s | %s | %s | %s | %s | %s | %.1f | %s | %s | %s |\n"
                       : "%-26s %8.2f %8s %7s %7s %7s %6s %9s %8s %9s %7.1f %10s %10s %7s\n";
    marked |= enc_spread > kSpreadMark || dec_spread > kSpreadMark;
    std::fprintf(out, f, name_cell(j, n, md).c_str(), num(j[baseline16 ? "ratio_16bit" : "ratio"]), fig(j["bits_per_param"], "%.4f").c_str(),
                 fig(j["bits_index"], "%.4f").c_str(), fig(j["bits_value"], "%.4f").c_str(),
                 fig(j["bits_scale_side"], "%.4f").c_str(), fig(j["bits_overhead"], "%.4f").c_str(),
                 fig(j["rel_l2"], "%.3g").c_str(), fig(j["cosine"], "%.5f").c_str(),
                 fig(j["max_abs_error"], "%.3g").c_str(), 100.0 * num(j["sign_agreement"]),
                 speed_cell(num(j["encode_mbps"]), enc_spread, md).c_str(),
                 speed_cell(num(j["decode_mbps"]), dec_spread, md).c_str(),
                 format("%zu/%zu", j["runs"].get<size_t>(), j["decode_runs"].get<size_t>()).c_str());
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
    const ordered_json& j = rows[n];
    const char* f = md ? "| %s | %s | %s | %s | %.1f | %.0f | %.0f | %.0f | %.0f | %.0f | %s |\n"
                       : "%-26s %7s %7s %7s %9.1f %7.0f %7.0f %7.0f %7.0f %7.0f %s\n";
    const ordered_json& kf = j["kept_fraction"];
    std::fprintf(out, f, name_cell(j, n, md).c_str(), kf.is_null() ? "-" : format("%.3f", 100.0 * kf.get<double>()).c_str(),
                 fig(j["index_cr"], "%.1f").c_str(), fig(j["value_cr"], "%.1f").c_str(), num(j["throughput_mbps"]),
                 100 * num(j["time_transform"]), 100 * num(j["time_sparsify"]),
                 100 * num(j["time_quantize"]), 100 * num(j["time_index"]),
                 100 * num(j["time_lossless"]), bias_text(j).c_str());
  }
  if (report.contains("link")) print_link_table(out, report, md);
  if (report.contains("target")) print_targets(out, report, md);
  // Every figure reported by some row, with its formula, for the legend (in order of appearance).
  ordered_json names = ordered_json::object();
  for (const auto& r : rows)
    for (auto it = r["stage_stats"].begin(); it != r["stage_stats"].end(); ++it)
      if (!names.contains(it.key())) names[it.key()] = (*it)["formula"];
  if (!names.empty()) {
    std::fprintf(out, "\nstage figures (over every record)\n");
    if (md) std::fprintf(out, "| pipeline | figures |\n|---|---|\n");
    for (const auto& r : rows) {
      if (r["stage_stats"].empty()) continue;
      std::string name = full_name(r);  // in full: rows differ late
      if (md) name = md_cell(name);
      std::string figs;
      for (auto it = r["stage_stats"].begin(); it != r["stage_stats"].end(); ++it)
        figs += (figs.empty() ? "" : md ? "; " : "   ") + format("%s %.4g", it.key().c_str(), num((*it)["value"]));
      std::fprintf(out, md ? "| %s | %s |\n" : "%s\n    %s\n", name.c_str(), figs.c_str());
    }
  }
  if (frames > 1) {
    std::fprintf(out, "\nper frame: ratio (rel L2)\n");
    for (size_t n = 0; n < rows.size(); ++n) {
      std::fprintf(out, md ? "| %s |" : "%-26s", name_cell(rows[n], n, md).c_str());
      for (const auto& f : rows[n]["per_frame"])
        std::fprintf(out, md ? " %.2f (%.3g) |" : " %8.2f (%-9.3g)", num(f["ratio"]), num(f["rel_l2"]));
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
  std::fprintf(out, "\n%s;  bits/p = 8 * output bytes / parameters\n",
               baseline16 ? "ratio/16b = 2 * parameters / output bytes (whole container): against a 16-bit (fp16/bf16) copy"
                          : "ratio = input bytes (as stored dtype) / output bytes (whole container)");
  std::fprintf(out,
      "index, value, sc+side (scale and side streams), ovh (container overhead = output - all streams): bits per parameter\n"
      "rel L2 = ||g - g^||2 / ||g||2;  cosine = g.g^ / (||g|| ||g^||);  max|err| = max |g - g^|;  sign%% = share with sign(g) == sign(g^), 0 counted as +\n"
      "MB = 10^6 bytes of input;  enc/dec MB/s = input MB / median seconds of the row's timed runs;  runs = timed encodes/decodes;  "
      "thr = (input bytes - output bytes) / 10^6 / encode seconds (BIRD+'s (a - b)/T)\n"
      "kept%% = values coded / parameters;  idx CR = 32 * kept / index bits;  val CR = 32 * kept / (value + scale bits)  (BIRD+ Fig. 10)\n"
      "xform/spars/quant/index/lossl%% = share of encode time per stage kind (rest: container and I/O)\n"
      "bias = ||E g^ - g|| / ||g|| estimated over the seeds, their noise removed (+- its standard error);  z = bias^2 / its standard "
      "error: an unbiased pipeline reads |z| < 3, 'bias ~0' (see docs/bench.md)\n");
  for (auto it = names.begin(); it != names.end(); ++it)
    std::fprintf(out, "%s = %s\n", it.key().c_str(), it->get<std::string>().c_str());
}

std::string rows_csv(const ordered_json& report) {
  std::string out;
  bool header = false;
  for (ordered_json j : report["rows"]) {
    for (const char* nested : {"per_frame", "stage_stats", "per_tensor"}) j.erase(nested);
    if (!header) {
      std::string h;
      for (auto it = j.begin(); it != j.end(); ++it) h += (h.empty() ? "" : ",") + it.key();
      out += h + "\n";
      header = true;
    }
    std::string line;
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      // Text, and an object or array (--target's `target`) as its JSON text, is one quoted field.
      std::string v;
      if (it->is_string() || it->is_structured()) {
        v = "\"";
        for (char c : it->is_string() ? it->get<std::string>() : it->dump()) v += c == '"' ? std::string("\"\"") : std::string(1, c);
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
