// SPDX-License-Identifier: BSD-3-Clause
// The public API's bench() (gradcodec.hpp, docs/api.md "bench"): on tensors held in memory it
// measures every row and returns the report `gradcodec bench --json` prints. Each row's output
// bytes are those of the container an Encoder writes of the same frames, pipeline and seed; a
// lossless row returns its input exactly (rel L2 0); the rows follow presets, then pipelines,
// each swept; bad options are refused before anything is measured; progress counts the rows.
#include <gradcodec/gradcodec.hpp>

#include "gradient_frames.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

using namespace gradcodec;
using nlohmann::json;

namespace {

std::vector<std::vector<TensorView>> views_of(const std::vector<test::GradFrame>& frames) {
  std::vector<std::vector<TensorView>> out;
  for (const auto& f : frames) out.push_back(f.views());
  return out;
}

// The size of the container an Encoder writes of `frames` (no input description, no sources).
uint64_t container_size(const std::vector<std::vector<TensorView>>& frames, const std::string& preset,
                        const std::string& pipeline) {
  std::vector<uint8_t> bytes;
  VectorSink sink(bytes);
  EncoderOptions o;
  o.preset = preset;
  o.pipeline = pipeline;
  Encoder e = Encoder::to_sink(sink, o);
  for (const auto& views : frames) e.add_frame(views);
  e.finish();
  return bytes.size();
}

BenchOptions quick() {
  BenchOptions o;
  o.repeat = 1;
  o.min_time = 0;
  return o;
}

}  // namespace

TEST_CASE("api bench: rows measure what an Encoder writes, lossless exactly, in the report's schema") {
  const auto grads = test::make_grad_frames(2, 7);
  const auto frames = views_of(grads);
  BenchOptions o = quick();
  o.presets = {"lossless", "topk-1pct"};
  o.pipelines = {"ef | topk(ratio=0.05) | varint"};
  const json report = json::parse(bench(frames, o));
  CHECK(report["schema"] == "gradcodec-bench/2");
  CHECK(report["frames"] == 2);
  REQUIRE(report["rows"].size() == 3);
  const json& lossless = report["rows"][0];
  CHECK(lossless["label"] == "lossless");
  CHECK(lossless["lossless"] == true);
  CHECK(lossless["rel_l2"] == 0.0);
  CHECK(lossless["runs"].get<unsigned>() >= 1);
  const json& text = report["rows"][2];
  CHECK(text["label"] == "pipeline");
  EncoderOptions text_options;
  text_options.pipeline = "ef | topk(ratio=0.05) | varint";
  CHECK(text["pipeline"] == canonical_pipeline(text_options));
  CHECK(text["rel_l2"].get<double>() > 0.1);
  // 3,072 + 48 + 480 floating parameters in each frame (the integer array is not one).
  for (const auto& row : report["rows"]) CHECK(row["parameters"] == 2 * (64 * 48 + 48 + 10 * 48));
  CHECK(lossless["output_bytes"] == container_size(frames, "lossless", ""));
  CHECK(report["rows"][1]["output_bytes"] == container_size(frames, "topk-1pct", ""));
  CHECK(text["output_bytes"] == container_size(frames, "", "ef | topk(ratio=0.05) | varint"));
  CHECK(report["rows"][1]["per_frame"].size() == 2);
}

TEST_CASE("api bench: the plan, sweeps, per-tensor figures and progress") {
  const auto grads = test::make_grad_frames(1, 3);
  const auto frames = views_of(grads);
  BenchOptions o = quick();
  o.presets = {"topk-1pct", "qsgd4"};
  o.sweeps = {"topk.ratio=0.1,0.2"};
  o.per_tensor = true;
  const std::vector<std::string> plan = bench_plan(o);
  REQUIRE(plan.size() == 3);
  CHECK(plan[0] == "topk-1pct [topk.ratio=0.1]");
  CHECK(plan[1] == "topk-1pct [topk.ratio=0.2]");
  CHECK(plan[2] == "qsgd4");
  std::vector<std::pair<size_t, size_t>> calls;
  o.progress = [&](size_t done, size_t total, const std::string&) { calls.emplace_back(done, total); };
  const json report = json::parse(bench(frames, o));
  REQUIRE(report["rows"].size() == 3);
  CHECK(report["rows"][0]["sweep"] == "topk.ratio=0.1");
  CHECK(report["rows"][1]["kept"].get<uint64_t>() > report["rows"][0]["kept"].get<uint64_t>());
  CHECK(report["rows"][0]["per_tensor"].size() == 4);
  CHECK(report["rows"][0]["per_tensor"][0]["name"] == "layer.weight");
  const std::vector<std::pair<size_t, size_t>> want = {{0, 3}, {1, 3}, {2, 3}, {3, 3}};
  CHECK(calls == want);

  // Some of the rows (as a rank of an MPI job measures them): those alone, with the figures the
  // whole run gives them.
  o.progress = nullptr;
  o.rows = [](size_t row) { return row != 1; };
  const json some = json::parse(bench(frames, o));
  REQUIRE(some["rows"].size() == 2);
  for (const auto& [a, b] : {std::pair{0, 0}, std::pair{1, 2}}) {
    CHECK(some["rows"][a]["label"] == report["rows"][b]["label"]);
    CHECK(some["rows"][a]["sweep"] == report["rows"][b]["sweep"]);
    CHECK(some["rows"][a]["output_bytes"] == report["rows"][b]["output_bytes"]);
    CHECK(some["rows"][a]["rel_l2"] == report["rows"][b]["rel_l2"]);
  }
}

TEST_CASE("api bench: bad options are refused before anything is measured") {
  const auto grads = test::make_grad_frames(1, 3);
  const auto frames = views_of(grads);
  // The error's code, none when bench() ran.
  auto code_of = [&](BenchOptions o) -> std::optional<ErrorCode> {
    size_t calls = 0;
    o.progress = [&](size_t, size_t, const std::string&) { ++calls; };
    try {
      bench(frames, o);
    } catch (const Error& e) {
      CHECK(calls == 0);
      return e.code();
    }
    return std::nullopt;
  };
  BenchOptions o = quick();
  o.presets = {"no-such-preset"};
  CHECK(code_of(o) == ErrorCode::Usage);
  o = quick();
  o.presets = {"qsgd4"};
  o.sweeps = {"topk.ratio=0.1"};  // no row has topk
  CHECK(code_of(o) == ErrorCode::Usage);
  o.sweeps = {"qsgd.levels"};
  CHECK(code_of(o) == ErrorCode::Usage);
  o = quick();
  o.sources = {"a.npz", "b.npz"};  // two sources for one frame
  CHECK(code_of(o) == ErrorCode::Usage);
  CHECK(code_of(quick()) == std::nullopt);  // no preset or pipeline: every preset, each runs
}
