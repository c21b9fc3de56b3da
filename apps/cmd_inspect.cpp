// SPDX-License-Identifier: BSD-3-Clause
// gradcodec inspect IN.gcz [--json] [--tensors] [--no-decode]
// The record is the library's (gradcodec::inspect, lib/api/inspect.cpp): --json prints it, the
// tables are read from it. --no-decode (and --tensors) skip the decoding and its figures.
#include "commands.hpp"
#include "figures.hpp"

#include <nlohmann/json.hpp>

namespace gradcodec::cli {

namespace {

using nlohmann::ordered_json;

struct InspectArgs {
  std::string input;
  bool json = false;
  bool names_only = false;
  bool no_decode = false;
};

int run_inspect(const InspectArgs& a) {
  const ordered_json out = ordered_json::parse(inspect(a.input, {.decode = !a.no_decode && !a.names_only}));
  if (a.json) {
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  const ordered_json& totals = out["totals"];
  const ordered_json& br = totals["bits_per_param_breakdown"];
  const bool decode = totals.contains("kept");
  const uint64_t file = totals["container_bytes"].get<uint64_t>();
  std::printf("container  %s (%s, %s)\n", a.input.c_str(), human_bytes(file).c_str(),
              out["tool"].get<std::string>().c_str());
  std::printf("pipeline   %s\n", out["pipeline"].get<std::string>().c_str());
  std::printf("seed       %llu    frames %llu    keyframe interval %llu\n", out["seed"].get<unsigned long long>(),
              totals["frames"].get<unsigned long long>(), out["keyframe_interval"].get<unsigned long long>());
  for (const auto& fr : out["frames"]) {
    const std::string source = fr["source"].get<std::string>();
    std::printf("\nframe %llu%s  %s\n", fr["frame"].get<unsigned long long>(),
                fr["keyframe"].get<bool>() ? " (keyframe)" : "", source == "-" ? "<stdin>" : source.c_str());
    if (a.names_only) {
      for (const auto& t : fr["tensors"])
        std::printf("  %s %s %s\n", pad_right(t["name"].get<std::string>(), 40).c_str(),
                    pad_right(t["shape"].dump(), 16).c_str(), t["dtype"].get<std::string>().c_str());
      continue;
    }
    std::printf("  %-36s %-16s %-5s %10s %10s %8s %8s  %s\n", "tensor", "shape", "dtype", "in bytes", "bytes", "ratio",
                "bits/p", "stages");
    for (const auto& t : fr["tensors"])
      std::printf("  %s %s %s %10llu %10llu %8.2f %8s  %s\n", pad_right(t["name"].get<std::string>(), 36).c_str(),
                  pad_right(t["shape"].dump(), 16).c_str(), pad_right(t["dtype"].get<std::string>(), 5).c_str(),
                  t["input_bytes"].get<unsigned long long>(), t["bytes"].get<unsigned long long>(),
                  t["ratio"].get<double>(), fig(t["bits_per_param"], "%.3f").c_str(),
                  t["stages"].get<std::string>().c_str());
  }
  if (a.names_only) return 0;  // names, shapes and dtypes only
  std::printf("\ntotal  %llu tensor(s), %llu parameters: %s -> %s  ratio %.3f  %s bits/param\n",
              totals["tensors"].get<unsigned long long>(), totals["parameters"].get<unsigned long long>(),
              human_bytes(totals["input_bytes"].get<uint64_t>()).c_str(), human_bytes(file).c_str(),
              totals["ratio"].get<double>(),
              fig(totals["bits_per_param"], "%.4f").c_str());
  std::printf("bits/param by part: index %s  value %s  scale %s  side %s  container overhead %s\n",
              fig(br["index"], "%.4f").c_str(), fig(br["value"], "%.4f").c_str(), fig(br["scale"], "%.4f").c_str(),
              fig(br["side"], "%.4f").c_str(), fig(br["overhead"], "%.4f").c_str());
  if (decode) {
    const ordered_json& kf = totals["kept_fraction"];
    std::printf("kept %llu values (%s%% of parameters)  index CR %s  value CR %s  overall CR %s\n",
                totals["kept"].get<unsigned long long>(),
                kf.is_null() ? "-" : format("%.4f", 100.0 * kf.get<double>()).c_str(),
                fig(totals["index_cr"], "%.2f").c_str(), fig(totals["value_cr"], "%.2f").c_str(),
                fig(totals["overall_cr"], "%.2f").c_str());
  }
  for (const auto& [name, x] : totals["stage_stats"].items())
    std::printf("%s %.4g  (%.6g / %.6g over every record)\n", name.c_str(), x["value"].get<double>(),
                x["num"].get<double>(), x["den"].get<double>());
  std::printf("\nratio = input bytes (as stored dtype) / bytes (whole record; totals: whole container)\n"
              "bits/param = 8 * bytes / floating-point parameters;  kB/MB = 10^3/10^6 bytes\n");
  if (decode)
    std::printf("kept = values sent (decoded values the value codec coded; all of a raw record's);  index CR = 32 * "
                "kept / index bits;\nvalue CR = 32 * kept / (value + scale bits);  overall CR = 64 * kept / (all "
                "stream bits)  (BIRD+ Fig. 10; as bench)\n");
  for (const auto& [name, x] : totals["stage_stats"].items())
    std::printf("%s = %s\n", name.c_str(), x["formula"].get<std::string>().c_str());
  return 0;
}

}  // namespace

void setup_inspect(CLI::App& app, Runner& run) {
  auto a = std::make_shared<InspectArgs>();
  CLI::App* sub = app.add_subcommand("inspect", "describe a .gcz container: tensors, stages, sizes, ratios");
  sub->add_option("IN", a->input, "the .gcz container, or - for stdin")->required();
  sub->add_flag("--json", a->json, "machine-readable output");
  sub->add_flag("--tensors", a->names_only, "list tensor names, shapes and dtypes only");
  sub->add_flag("--no-decode", a->no_decode,
                "do not decode the records (faster; omits kept values and the index/value/overall CR)");
  sub->callback([a, &run] { run = [a] { return run_inspect(*a); }; });
}

}  // namespace gradcodec::cli
