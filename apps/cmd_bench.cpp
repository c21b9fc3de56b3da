// SPDX-License-Identifier: BSD-3-Clause
// gradcodec bench INPUT... (--preset NAME | --pipeline TEXT)... [--sweep STAGE.PARAM=a,b,c]
//                 [--repeat N] [--min-time S] [--seeds N] [--per-tensor] [--json F] [--csv F]
//                 [--markdown] [--threads N] [--force]
//        gradcodec bench --workers GLOB|MANIFEST... [--seeds N] [--json F]   (bench_workers.hpp)
// Compares compressors side by side on the user's gradients. With no INPUT: the bundled
// test_data snapshots; with no --preset/--pipeline: every preset.
#include "bench_collective.hpp"
#include "bench_report.hpp"
#include "bench_workers.hpp"
#include "commands.hpp"
#include "ranks.hpp"
#include "common.hpp"
#include "plot.hpp"
#include "progress.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <initializer_list>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sys/stat.h>
#include <unistd.h>

#ifndef GRADCODEC_DATA_DIR
#define GRADCODEC_DATA_DIR ""
#endif

namespace gradcodec::cli {

namespace {

struct BenchArgs {
  std::vector<std::string> inputs, presets, pipelines, sweeps;
  std::vector<std::string> workers;  // multi-worker mode (bench_workers.hpp)
  unsigned repeat = 3, seeds = 1, threads = 1;
  double min_time = 0.2;
  bool per_tensor = false, markdown = false, force = false;
  bool no_compensation = false;  // --workers: marsit without Marsit's global compensation
  uint32_t full_sync = 0;  // --workers: marsit's full-precision step every K steps (0 = never)
  std::string json, csv;
  NonFinite nonfinite = NonFinite::Refuse;
  InputOptions in;
  std::string link, latency = "10us", collective = "auto";  // the link model (docs/bench.md)
  bool collective_given = false;  // --collective without --link: measured over MPI (bench_collective.hpp)
  std::string aggregates;         // --collective: every row's aggregate as DIR/rowK.gcz
  std::string baseline = "fp32";
  std::string target, target_scope;  // --target, --target-scope (docs/target.md)
  std::string plot;  // --plot FILE: the rate-distortion chart (plot.hpp)  // what the table's ratio is against: the input (fp32) or a 16-bit copy
};

// A unit: the number is multiplied by `mul` and divided by `div` ("10us" is 10 / 10^6, rounded
// once).
struct Unit {
  const char* name;
  double mul, div;
};

// A number followed by a unit from `units`, as "25Gbit/s" or "10us"; Usage error naming the
// option otherwise.
double with_unit(const std::string& option, const std::string& text, std::initializer_list<Unit> units,
                 const char* example) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const std::string unit(end ? end : "");
  if (end != text.c_str() && std::isfinite(v) && v >= 0)
    for (const Unit& u : units)
      if (unit == u.name) return v * u.mul / u.div;
  std::string names;
  for (const Unit& u : units) names += (names.empty() ? "" : ", ") + std::string(u.name);
  fail(ErrorCode::Usage, option + " '" + text + "': expected a number and a unit (" + names + "), e.g. " + example);
}

// --link RATE in bytes per second: bits or bytes per second with a decimal prefix.
double link_rate(const std::string& text) {
  const double v = with_unit("--link", text,
                             {{"bit/s", 1, 8}, {"kbit/s", 1e3, 8}, {"Mbit/s", 1e6, 8}, {"Gbit/s", 1e9, 8},
                              {"Tbit/s", 1e12, 8}, {"B/s", 1, 1}, {"kB/s", 1e3, 1}, {"MB/s", 1e6, 1},
                              {"GB/s", 1e9, 1}, {"TB/s", 1e12, 1}},
                             "25Gbit/s or 10GB/s");
  if (v <= 0) fail(ErrorCode::Usage, "--link '" + text + "': the rate must be above 0");
  return v;
}

// The bundled snapshots: $GRADCODEC_DATA, the source tree, or the installed data directory.
std::vector<std::string> bundled_inputs() {
  std::vector<std::string> roots;
  if (const char* env = std::getenv("GRADCODEC_DATA")) roots.push_back(env);
  roots.push_back(GRADCODEC_DATA_DIR);
  for (const auto& root : roots) {
    if (root.empty()) continue;
    std::filesystem::path dir = std::filesystem::path(root) / "snapshots";
    std::vector<std::string> files;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
      if (e.path().extension() == ".npz") files.push_back(e.path().string());
    if (!files.empty()) {
      std::sort(files.begin(), files.end());
      return files;
    }
  }
  fail(ErrorCode::Input, "no INPUT given and the bundled test_data snapshots were not found "
                         "(set GRADCODEC_DATA to the test_data directory)");
}

// The --json/--csv reports, opened before anything is read or measured: a report path that exists
// (without --force), lies in a missing or read-only directory, or is a directory, is refused at
// once instead of after a run that may take minutes. Each is written to a temporary file next to
// its target and renamed into place at the end, so a failed run leaves neither report behind.
struct Reports {
  std::unique_ptr<AtomicOutput> json, csv;
  bool to_stdout = false;  // `--json -` or `--csv -`: the table must not go to stdout too
};

std::unique_ptr<AtomicOutput> open_report(const std::string& path, bool force) {
  // AtomicOutput would take a directory with --force and fail only at the rename, at the end.
  if (path != "-" && is_directory(path)) fail(ErrorCode::Usage, path + ": is a directory");
  return std::make_unique<AtomicOutput>(path, force);
}

// Whether two paths name one file however they are spelled ("r.json", "./r.json", a symlink).
bool same_file(const std::string& a, const std::string& b) {
  if (a == b) return true;
  std::error_code ea, eb;
  // (weakly_canonical leaves a relative path relative when none of it exists yet)
  auto ca = std::filesystem::weakly_canonical(std::filesystem::absolute(a, ea), ea);
  auto cb = std::filesystem::weakly_canonical(std::filesystem::absolute(b, eb), eb);
  return !ea && !eb && ca == cb;
}

Reports open_reports(const BenchArgs& a) {
  Reports r;
  if (a.json == "-" && a.csv == "-")
    fail(ErrorCode::Usage, "--json - and --csv - would both write to standard output; give a file for one of them");
  // Two outputs renamed onto one path: the second would replace the first (or, without --force,
  // be refused after the whole run).
  const std::pair<const char*, const std::string*> outs[] = {{"--json", &a.json}, {"--csv", &a.csv}, {"--plot", &a.plot}};
  for (size_t i = 0; i < 3; ++i)
    for (size_t k = i + 1; k < 3; ++k) {
      const std::string &x = *outs[i].second, &y = *outs[k].second;
      if (!x.empty() && !y.empty() && x != "-" && y != "-" && same_file(x, y))
        fail(ErrorCode::Usage, std::string(outs[i].first) + " and " + outs[k].first + " name the same file: " + y);
    }
  if (!a.json.empty()) r.json = open_report(a.json, a.force);
  if (!a.csv.empty()) r.csv = open_report(a.csv, a.force);
  r.to_stdout = a.json == "-" || a.csv == "-";
  return r;
}

// --workers writes its report at the end of run_bench_workers (bench_workers.cpp), with
// overwrite: the same refusals up front, by opening the report and dropping it (which removes
// the temporary). A device or FIFO is left alone: opening it would already write to it.
void check_workers_report(const std::string& path, bool force) {
  if (path.empty() || path == "-") return;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) return;
  open_report(path, force);
}

// The report of `rows` rows measured round robin by the ranks (rank r: rows r, r + N, ...), each
// rank's report in `parts`: rank 0's, its rows replaced by all of them in order.
std::string join_rank_reports(const std::vector<std::vector<uint8_t>>& parts, size_t rows) {
  std::vector<nlohmann::ordered_json> reports;
  for (const auto& p : parts) reports.push_back(nlohmann::ordered_json::parse(p.begin(), p.end()));
  nlohmann::ordered_json joined = reports.at(0);
  joined["rows"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < rows; ++i) {
    const auto& from = reports[i % reports.size()]["rows"];
    const size_t k = i / reports.size();
    if (k >= from.size()) fail(ErrorCode::Internal, "bench: a rank's report lacks row " + std::to_string(i));
    joined["rows"].push_back(from[k]);
  }
  return joined.dump(2) + "\n";
}

int run_bench(BenchArgs a) {
  reuse_freed_heap();
  for (const auto& i : a.inputs)
    if (i == "-") refuse_stdin_across_ranks();
  if (a.seeds == 0) fail(ErrorCode::Usage, "--seeds: give at least 1");
  unsigned link_workers = 0;
  if (!a.link.empty()) {
    // With a link model, --workers is the number of workers, not their inputs.
    const std::string n = a.workers.size() == 1 ? a.workers[0] : "";
    if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos || n.size() > 6 || std::stoul(n) < 2)
      fail(ErrorCode::Usage, "--link needs --workers N, the number of workers (an integer from 2 to 999999)");
    link_workers = static_cast<unsigned>(std::stoul(n));
    a.workers.clear();
  }
  if (a.collective_given && a.link.empty()) {
    // The real aggregation over MPI (bench_collective.hpp): one rank per worker.
    if (a.workers.empty())
      fail(ErrorCode::Usage, "--collective applies to the link model (--link RATE --workers N) or, with --workers "
                             "GLOB under mpirun (one worker input per rank), measures the real aggregation");
    if (!a.inputs.empty() || !a.sweeps.empty() || !a.csv.empty() || !a.plot.empty() || a.no_compensation ||
        a.full_sync > 0 || !a.target.empty() || a.nonfinite == NonFinite::Raw)
      fail(ErrorCode::Usage, "--collective with --workers measures the rows on the workers' inputs: give no INPUT, "
                             "--sweep, --csv, --plot, --no-compensation, --full-sync, --target or --nonfinite raw "
                             "with it");
    return run_bench_collective({a.workers, a.presets, a.pipelines, a.collective, a.repeat, a.json, a.aggregates,
                                 a.markdown, a.force, a.in});
  }
  if (!a.aggregates.empty())
    fail(ErrorCode::Usage, "--aggregates applies to --collective with --workers (under mpirun)");
  if (!a.workers.empty()) {
    if (!a.inputs.empty() || !a.presets.empty() || !a.pipelines.empty() || !a.sweeps.empty() || !a.csv.empty() ||
        !a.target.empty() || !a.plot.empty())
      fail(ErrorCode::Usage, "--workers compares the merge methods: give no INPUT, --preset, --pipeline, --sweep, "
                             "--csv, --plot or --target with it");
    if (ranks::active() && ranks::rank() != 0) return 0;  // on rank 0 alone (docs/scale-out.md)
    check_workers_report(a.json, a.force);
    return run_bench_workers({a.workers, a.seeds, a.json, a.markdown, a.in, !a.no_compensation, a.full_sync});
  }
  if (a.no_compensation || a.full_sync > 0)
    fail(ErrorCode::Usage, "--no-compensation and --full-sync apply to --workers (marsit over the steps) only");
  if (a.inputs.empty()) a.inputs = bundled_inputs();
  BenchOptions o;
  o.presets = a.presets;
  o.pipelines = a.pipelines;
  o.sweeps = a.sweeps;
  o.repeat = a.repeat;
  o.min_time = a.min_time;
  o.seeds = a.seeds;
  o.threads = std::max(1u, a.threads);
  o.per_tensor = a.per_tensor;
  o.nonfinite = a.nonfinite;
  o.nonfinite_advice = kCliNonfiniteAdvice;
  o.inputs = a.inputs;
  if (!a.link.empty()) {
    o.link_rate = link_rate(a.link);
    o.link_workers = link_workers;
    o.link_latency = with_unit("--latency", a.latency, {{"s", 1, 1}, {"ms", 1, 1e3}, {"us", 1, 1e6}, {"ns", 1, 1e9}}, "10us");
  } else if (a.latency != "10us") {
    fail(ErrorCode::Usage, "--latency applies to the link model (--link RATE)");
  }
  o.collective = a.collective;
  o.target = a.target;
  o.target_scope = a.target_scope;
  const size_t rows = bench_plan(o).size();  // the rows checked before anything is opened
  // Under MPI the ranks share the rows (round robin) and rank 0 alone writes the report, joined
  // in the rows' order (docs/scale-out.md).
  const bool shared = ranks::active() && ranks::size() > 1;
  const int me = ranks::rank(), size = ranks::size();
  if (shared) o.rows = [me, size](size_t row) { return row % static_cast<size_t>(size) == static_cast<size_t>(me); };

  Reports reports;
  ranks::together([&] {
    if (me != 0) return;
    reports = open_reports(a);
    if (!a.plot.empty()) check_chart_path(a.plot, a.force);
  });

  // Load every frame once (bench measures the codec, not the file reader).
  std::vector<std::vector<Tensor>> frames;
  nlohmann::ordered_json desc = nlohmann::ordered_json::array();
  std::string json;
  ProgressBar bar("bench", rows, ProgressBar::Unit::Items);
  ranks::together([&] {
    for (const auto& path : a.inputs) {
      OpenInput in = open_input(path, a.in);
      desc.push_back({{"path", recorded_path(path, RecordPaths::Relative)}, {"format", formats::format_name(in.reader->format())}});
      o.sources.push_back(recorded_path(path, RecordPaths::Relative));  // as encode records it
      std::vector<Tensor> ts;
      for (size_t k : in.selected) ts.push_back(in.reader->read(k));
      frames.push_back(std::move(ts));
    }
    o.inputs_json = desc.dump();
    if (!shared) o.progress = [&bar](size_t done, size_t total, const std::string& row) { bar.set(done, total, row); };
    json = bench(frames, o);
  });
  if (shared) {
    const std::vector<uint8_t> mine(json.begin(), json.end());
    const auto parts = ranks::all_gather(mine);
    if (me != 0) return 0;
    json = join_rank_reports(parts, rows);
  }
  const nlohmann::ordered_json report = nlohmann::ordered_json::parse(json);
  bar.finish();
  // With a report on stdout, the table goes to stderr (a summary there, so --quiet drops it): a
  // pipe into a JSON or CSV reader gets the report alone.
  const bool baseline16 = a.baseline != "fp32";
  if (!reports.to_stdout) print_table(stdout, report, a.markdown, baseline16);
  else if (!quiet()) print_table(stderr, report, a.markdown, baseline16);
  if (reports.json) {
    reports.json->write(json.data(), json.size());
  }
  if (reports.csv) {
    const std::string text = rows_csv(report);
    reports.csv->write(text.data(), text.size());
  }
  // Both complete (and the chart drawn) before either is renamed into place: a failed write
  // leaves neither.
  for (auto* out : {reports.json.get(), reports.csv.get()})
    if (out) out->seal();
  if (!a.plot.empty()) draw_chart(json, a.plot);
  for (auto* out : {reports.json.get(), reports.csv.get()})
    if (out) out->publish();
  return 0;
}

}  // namespace

void setup_bench(CLI::App& app, Runner& run) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* sub = app.add_subcommand("bench", "compare compressors on your gradients: ratio, bits/param, error, speed");
  sub->add_option("INPUT", a->inputs, "snapshots (several = a sequence); default: the bundled test_data snapshots");
  // Repeatable options take one value per flag, so `bench --preset bird+ FILE` reads FILE as an input.
  sub->add_option("--preset", a->presets, "a preset to compare (repeatable); default: every preset")
      ->allow_extra_args(false)
      ->check(non_empty_text());
  sub->add_option("--pipeline", a->pipelines, "a pipeline text to compare (repeatable)")
      ->allow_extra_args(false)
      ->check(non_empty_text());
  sub->add_option("--workers", a->workers,
                  "with --link: the number of workers N; else the multi-worker mode: one step's worker inputs, a glob ('dir/worker_*.npz') or a manifest "
                  "(.txt/.list, one step per line); repeatable; compares the merge methods (docs/merge.md)");
  sub->add_option("--link", a->link,
                  "predict one aggregation over a link of this rate (25Gbit/s, 10GB/s) with --workers N workers: "
                  "bytes sent, communication and step time, speed-up over fp32 and fp16 all-reduce (docs/bench.md)");
  sub->add_option("--latency", a->latency, "--link: seconds per message, with a unit (s, ms, us, ns; default 10us)");
  CLI::Option* collective = sub->add_option(
      "--collective", a->collective,
      "--link: auto (each pipeline's own), allreduce, allgather or ring (Marsit's one-bit ring); with --workers GLOB "
      "under mpirun (no --link): measure the real aggregation, auto or allgather (docs/scale-out.md)");
  sub->add_option("--aggregates", a->aggregates,
                  "--collective: write every row's aggregate of every step to DIR/rowK.gcz (lossless)");
  sub->add_option("--plot", a->plot,
                  "draw the rate-distortion chart (bits/param against rel L2 and cosine) to FILE.svg, .png or "
                  ".pdf, with matplotlib (python3 -m gradcodec.plot; Debian: python3-matplotlib)");
  sub->add_option("--baseline", a->baseline,
                  "the table's ratio against the input as stored (fp32, default) or a 16-bit copy (fp16, bf16); "
                  "the JSON has both (ratio, ratio_16bit)")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  sub->add_flag("--no-compensation", a->no_compensation,
                "--workers: marsit without its global compensation across steps (Marsit §4.1.3; default: on)");
  sub->add_option("--full-sync", a->full_sync,
                  "--workers: marsit aggregates every K-th step (0, K, 2K, ...) in full precision and resets the "
                  "compensation (Marsit Algorithm 1); 0 = never (default)")
      ->check(whole_number());
  sub->add_option("--target", a->target,
                  "choose each row's main parameter first for bits=B (bits/param) or rel_l2=E, on the first "
                  "frame, as encode --target does (docs/target.md)");
  sub->add_option("--target-scope", a->target_scope,
                  "--target rel_l2: every tensor meets E (tensor, default) or the snapshot does (snapshot)");
  sub->add_option("--sweep", a->sweeps, "STAGE.PARAM=a,b,c: one row per value (repeatable)")->allow_extra_args(false);
  sub->add_option("--repeat", a->repeat, "timed runs per row, at least (default 3)");
  sub->add_option("--min-time", a->min_time, "seconds of timed encoding and of decoding per row, at least (default 0.2)")
      ->check([](const std::string& s) -> std::string {
        // (CLI::NonNegativeNumber printed its range as 0.000000 to a 309-digit number.)
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v) || v < 0)
          return "'" + s + "' is not a number of seconds >= 0";
        return {};
      });
  sub->add_option("--seeds", a->seeds, "stochastic pipelines: runs with N seeds for bias and error spread");
  sub->add_option("--threads", a->threads, "worker threads, at most one per core (default 1)");
  sub->add_flag("--per-tensor", a->per_tensor, "per-tensor figures in the JSON report");
  sub->add_option("--json", a->json,
                  "write the report as JSON to this file, or - for stdout (the table then goes to stderr)");
  sub->add_option("--csv", a->csv,
                  "write the report as CSV to this file, or - for stdout (the table then goes to stderr)");
  sub->add_flag("-f,--force", a->force, "replace the --json/--csv files if they exist");
  sub->add_flag("--markdown", a->markdown, "print the tables as Markdown");
  add_input_options(*sub, a->in);
  add_nonfinite_option(*sub, a->nonfinite);
  sub->callback([a, collective, &run] {
    a->collective_given = collective->count() > 0;
    run = [a] { return run_bench(*a); };
  });
}

}  // namespace gradcodec::cli
