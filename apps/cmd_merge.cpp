// SPDX-License-Identifier: BSD-3-Clause
// gradcodec merge A.gcz B.gcz ... -o OUT.gcz --method marsit|cascade|majority|mean [--seed N]
//                 [--eta S] [--pipeline TEXT | --preset NAME] [--no-compensation] [--full-sync K]
//                 [--threads N] [--force]
// Aggregates several workers' containers holding the same tensors, frame by frame, in ring order
// (the order given). The library does the work (gradcodec/merge.hpp); see docs/merge.md.
#include "commands.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <unistd.h>

namespace gradcodec::cli {

namespace {

struct MergeArgs {
  std::vector<std::string> inputs;
  std::string output, method, preset, pipeline;
  uint64_t seed = 0;
  std::optional<double> eta;
  unsigned threads = 0;
  bool force = false;
  bool force_name = false;
  RecordPaths record_paths = RecordPaths::Relative;
  bool no_compensation = false;
  uint32_t full_sync = 0;
};

int run_merge(const MergeArgs& a) {
  if (a.output == "-" && ::isatty(STDOUT_FILENO))
    fail(ErrorCode::Usage, "refusing to write a binary container to a terminal (redirect it or use -o FILE)");
  for (const auto& i : a.inputs)
    if (i == "-") fail(ErrorCode::Usage, "merge reads its inputs by name: standard input ('-') is not supported");
  check_output_path(a.output, a.inputs);
  check_container_name(a.output, a.force_name);
  MergeSettings o;
  o.method = a.method;
  o.seed = a.seed;
  o.eta = a.eta;
  o.preset = a.preset;
  o.pipeline = a.pipeline;
  o.compensation = !a.no_compensation;
  o.full_sync = a.full_sync;
  o.threads = a.threads;
  o.overwrite = a.force;
  o.nonfinite_advice = "merge stores no tensor raw; --method mean --preset lossless keeps such values";
  nlohmann::ordered_json desc = nlohmann::ordered_json::array();
  for (const auto& path : a.inputs)
    desc.push_back({{"path", recorded_path(path, a.record_paths)}, {"format", "gcz"}, {"merge", a.method}});
  o.inputs_json = desc.dump();
  ProgressBar bar("merge", 0, ProgressBar::Unit::Percent);
  if (bar.shown()) o.progress = [&bar](uint64_t done, uint64_t total) { bar.set(done, total); };
  const MergeSummary rep = merge(a.inputs, a.output, o);
  bar.finish();
  if (!quiet()) {
    uint64_t hop_total = 0;
    for (uint64_t b : rep.hop_bits) hop_total += b;
    std::fprintf(stderr, "gradcodec: %s: %s of %zu workers, %zu frame(s) x %zu tensor(s), pipeline '%s', %s; "
                         "the ring's %zu %s %s in all\n",
                 a.output == "-" ? "<stdout>" : a.output.c_str(), a.method.c_str(), a.inputs.size(),
                 rep.frames, rep.tensors, rep.pipeline_text.c_str(), human_bytes(rep.bytes_written).c_str(),
                 rep.hop_bits.size(), rep.hop_bits.size() == 1 ? "hop sends" : "hops send",
                 human_bytes((hop_total + 7) / 8).c_str());
  }
  return 0;
}

}  // namespace

void setup_merge(CLI::App& app, Runner& run) {
  auto a = std::make_shared<MergeArgs>();
  CLI::App* sub = app.add_subcommand("merge", "aggregate several workers' containers (same tensors) into one");
  sub->add_option("INPUT", a->inputs, "workers' .gcz containers, in ring order (at least 2)")->required();
  sub->add_option("-o,--output", a->output, "output container (.gcz), or - for stdout")->required();
  sub->add_option("--method", a->method, "marsit | cascade | majority | mean (see docs/merge.md)")->required();
  sub->add_option("--seed", a->seed, "seed of marsit's and cascade's random choices (stored in the container)")
      ->check(whole_number());
  sub->add_option("--eta", a->eta, "marsit/majority: the output scale (default: the mean of the inputs' scales)");
  auto* pre = sub->add_option("--preset", a->preset, "mean: re-encode the average with this preset (default lossless)")
                  ->check(non_empty_text());
  auto* pip = sub->add_option("--pipeline", a->pipeline, "mean: re-encode the average with this pipeline")
                  ->check(non_empty_text());
  pre->excludes(pip);
  sub->add_flag("--no-compensation", a->no_compensation,
                "marsit of full-precision (lossless, raw) workers: no global compensation across frames "
                "(Marsit §4.1.3; default: on)");
  sub->add_option("--full-sync", a->full_sync,
                  "marsit of full-precision workers: frames 0, K, 2K, ... merged in full precision (the mean) and "
                  "the compensation reset (Marsit Algorithm 1); 0 = never (default); the output is then lossless")
      ->check(whole_number());
  sub->add_option("--threads", a->threads, "worker threads, at most one per core (default: all cores); output bytes do not depend on it");
  sub->add_flag("-f,--force", a->force, "replace OUTPUT if it exists");
  sub->add_flag("--force-name", a->force_name, "accept an OUTPUT named like a snapshot (.npz, .npy, .h5, .safetensors, .pt)");
  add_record_paths_option(*sub, a->record_paths);
  sub->callback([a, &run] { run = [a] { return run_merge(*a); }; });
}

}  // namespace gradcodec::cli
