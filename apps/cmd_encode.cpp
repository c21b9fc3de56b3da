// SPDX-License-Identifier: BSD-3-Clause
// gradcodec encode INPUT... -o OUT.gcz (--pipeline TEXT | --preset NAME) [--seed N] ...
// Several INPUTs form a sequence (one frame each, in the order given).
#include "commands.hpp"
#include "encode_ranks.hpp"
#include "ranks.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <set>
#include <thread>
#include <unistd.h>

namespace gradcodec::cli {

namespace {

struct EncodeArgs {
  std::vector<std::string> inputs;
  std::string output;
  std::string preset, pipeline;
  uint64_t seed = 0;
  unsigned threads = 0;
  uint32_t keyframe_interval = 0;
  std::string format_version = "1.1";
  bool force = false;
  bool force_name = false;
  std::string memory_limit;
  std::string target, target_scope;  // --target, --target-scope (docs/target.md)
  NonFinite nonfinite = NonFinite::Refuse;
  RecordPaths record_paths = RecordPaths::Relative;
  InputOptions in;
};

void print_summary(const std::string& output, const EncodeSummary& s, const std::string& where = "") {
  if (!quiet())
    std::fprintf(stderr, "gradcodec: %s: %llu frame(s), %llu tensor(s), %s -> %s (ratio %.2fx, %s)%s\n",
                 output == "-" ? "<stdout>" : output.c_str(), static_cast<unsigned long long>(s.frames),
                 static_cast<unsigned long long>(s.tensors), human_bytes(s.input_bytes).c_str(),
                 human_bytes(s.output_bytes).c_str(), s.ratio(),
                 s.float_elements ? format("%.3f bits/param", s.bits_per_parameter()).c_str()
                                  : "no floating-point parameters",
                 where.c_str());
}

int run_encode(const EncodeArgs& a) {
  bound_heap_growth();
  // (Under mpirun a rank's stdout is a terminal even when the job's output is redirected.)
  if (ranks::active() && a.output == "-")
    fail(ErrorCode::Usage, "under MPI the container is written to a file: give -o FILE, not -o -");
  if (a.output == "-" && ::isatty(STDOUT_FILENO))
    fail(ErrorCode::Usage, "refusing to write a binary container to a terminal (redirect it or use -o FILE)");
  int stdin_uses = 0;
  for (const auto& i : a.inputs) stdin_uses += i == "-";
  if (stdin_uses > 1) fail(ErrorCode::Usage, "standard input ('-') can be read only once");
  if (stdin_uses) refuse_stdin_across_ranks();
  check_output_path(a.output, a.inputs);
  check_container_name(a.output, a.force_name);
  EncoderOptions eo;
  eo.preset = a.preset;
  // With a target, "topk" alone asks the search for its ratio (docs/target.md).
  eo.pipeline = a.target.empty() ? a.pipeline : target_pipeline(a.pipeline);
  eo.seed = a.seed;
  eo.keyframe_interval = a.keyframe_interval;
  eo.format_minor = a.format_version == "1.0" ? 0 : 1;
  eo.nonfinite = a.nonfinite;
  eo.nonfinite_advice = kCliNonfiniteAdvice;
  eo.threads = a.threads;
  // Under MPI the ranks on one machine share its cores: by default each takes its share.
  if (!a.threads && ranks::active())
    eo.threads = std::max(1u, std::thread::hardware_concurrency() / static_cast<unsigned>(ranks::local_size()));
  eo.overwrite = a.force;
  if (!a.memory_limit.empty()) eo.memory_limit = parse_memory_limit(a.memory_limit);
  canonical_pipeline(eo);  // a bad preset or pipeline is refused before any input is opened
  std::optional<Target> target;
  if (!a.target.empty()) {
    target = parse_target(a.target, a.target_scope);
    if (a.inputs.size() != 1) fail(ErrorCode::Usage, "--target searches one snapshot: give one INPUT");
    if (a.inputs[0] == "-") fail(ErrorCode::Usage, "--target reads the input several times: give a file, not '-'");
    if (ranks::active()) fail(ErrorCode::Usage, "--target is not available across MPI ranks");
  } else if (!a.target_scope.empty()) {
    fail(ErrorCode::Usage, "--target-scope needs --target");
  }
  // Open (and validate) every input before creating the output.
  std::vector<OpenInput> inputs;
  nlohmann::ordered_json desc = nlohmann::ordered_json::array();
  for (const auto& path : a.inputs) {
    inputs.push_back(open_input(path, a.in));
    desc.push_back({{"path", recorded_path(path, a.record_paths)}, {"format", formats::format_name(inputs.back().reader->format())}});
    // The input's own metadata (safetensors __metadata__), kept for decode to restore.
    const auto meta = inputs.back().reader->metadata();
    if (!meta.empty()) {
      nlohmann::ordered_json m = nlohmann::ordered_json::object();
      for (const auto& [k, v] : meta) m[k] = v;
      desc.back()["metadata"] = std::move(m);
    }
    // Its HDF5 attributes (groups' and the encoded datasets', docs/formats.md), for decode to
    // write back; those of datasets left out go with them.
    const std::string attrs = inputs.back().reader->attributes_json();
    if (!attrs.empty()) {
      std::set<std::string> kept;
      for (size_t k : inputs.back().selected) kept.insert(inputs.back().reader->arrays()[k].name);
      nlohmann::ordered_json objects = nlohmann::ordered_json::array();
      for (auto& e : nlohmann::ordered_json::parse(attrs))
        if (!e.contains("tensor") || kept.count(e["tensor"].get<std::string>())) objects.push_back(std::move(e));
      if (!objects.empty()) desc.back()["hdf5_attributes"] = std::move(objects);
    }
  }
  eo.inputs_json = desc.dump();
  if (ranks::active()) {  // one rank of an MPI job (docs/scale-out.md)
    std::vector<std::string> recorded;
    for (const auto& in : inputs) recorded.push_back(recorded_path(in.path, a.record_paths));
    double largest = 0;
    const EncodeSummary s = encode_across_ranks(largest, eo, inputs, recorded, a.output, a.force);
    print_summary(a.output, s, format(" on %d rank(s), the largest share %.1f%% of the bytes", ranks::size(), 100 * largest));
    return 0;
  }
  if (target) {  // the pipeline's parameter chosen on this snapshot, then encoded with it
    FrameSource src = frame_source(inputs[0]);
    src.recorded = recorded_path(inputs[0].path, a.record_paths);
    const TargetResult r = search_target(eo, src, *target);
    eo.preset.clear();
    eo.pipeline = r.pipeline;
    eo.target_json = r.json;  // the header records the target (docs/target.md)
    if (!quiet())
      std::fprintf(stderr, "gradcodec: target %s: %s %s=%s (%.3f bits/param%s; %zu encodes): %s\n", target->text().c_str(),
                   r.stage.c_str(), r.param.c_str(), r.value.c_str(), r.bits_per_parameter,
                   r.has_error ? format(", rel L2 %.4g %s", r.rel_l2,
                                        target->scope == Target::Scope::Tensor ? "worst tensor" : "snapshot").c_str()
                               : "",
                   r.encodes, r.pipeline.c_str());
  }
  // The bar counts the floating tensors' bytes (pass-through arrays are stored as they are).
  uint64_t float_bytes = 0;
  for (const auto& in : inputs) float_bytes += in.float_bytes;
  ProgressBar bar("encode", float_bytes, ProgressBar::Unit::Bytes);
  if (bar.shown())
    eo.progress = [&bar](const TensorInfo& t) {
      if (is_float(t.dtype)) bar.advance(t.elements() * dtype_size(t.dtype), t.name);
    };
  Encoder enc = Encoder::to_path(a.output, eo);
  for (auto& in : inputs) {
    FrameSource src = frame_source(in);
    src.recorded = recorded_path(in.path, a.record_paths);
    enc.add_frame(src);
  }
  const EncodeSummary s = enc.finish();
  bar.finish();
  print_summary(a.output, s);
  return 0;
}

}  // namespace

void setup_encode(CLI::App& app, Runner& run) {
  auto a = std::make_shared<EncodeArgs>();
  CLI::App* sub = app.add_subcommand("encode", "compress gradient snapshots into a .gcz container");
  sub->add_option("INPUT", a->inputs, ".npy, directory of .npy, .npz, .h5/.hdf5, .safetensors, .pt/.pth/.bin (torch.save), "
                                      "a sharded checkpoint's .safetensors.index.json/.bin.index.json, or - (stdin); "
                                      "several inputs form a sequence")
      ->required();
  sub->add_option("-o,--output", a->output, "output container (.gcz), or - for stdout")->required();
  auto* pre = sub->add_option("--preset", a->preset, "a named pipeline (gradcodec list presets); default lossless")
                  ->check(non_empty_text());
  auto* pip = sub->add_option("--pipeline", a->pipeline, "a pipeline text, e.g. \"topk(ratio=0.01) | varint | zstd\"")
                  ->check(non_empty_text());
  pre->excludes(pip);
  sub->add_option("--seed", a->seed, "seed of every random choice (stored in the container)")->check(whole_number());
  sub->add_option("--threads", a->threads, "worker threads, at most one per core (default: all cores, under MPI the rank's share of them); output bytes do not depend on it");
  sub->add_option("--keyframe-interval", a->keyframe_interval,
                  "every K-th frame needs no earlier frame (0: only the first)");
  sub->add_option("--format-version", a->format_version,
                  "container format: 1.1 (compact framing; default) or 1.0 (read by gradcodec before 1.1)")
      ->check(CLI::IsMember({"1.0", "1.1"}));
  sub->add_flag("-f,--force", a->force, "replace OUTPUT if it exists");
  sub->add_flag("--force-name", a->force_name, "accept an OUTPUT named like a snapshot (.npz, .npy, .h5, .safetensors, .pt)");
  sub->add_option("--memory-limit", a->memory_limit,
                  "refuse a tensor whose encoding needs more memory than this (default 8G; e.g. 512M, 32G)");
  sub->add_option("--target", a->target,
                  "search the pipeline's main parameter for bits=B (bits/param) or rel_l2=E (docs/target.md)");
  sub->add_option("--target-scope", a->target_scope,
                  "rel_l2 per tensor (every tensor meets E; default) or over the snapshot: tensor|snapshot");
  add_input_options(*sub, a->in);
  add_record_paths_option(*sub, a->record_paths);
  add_nonfinite_option(*sub, a->nonfinite);
  sub->callback([a, &run] { run = [a] { return run_encode(*a); }; });
}

}  // namespace gradcodec::cli
