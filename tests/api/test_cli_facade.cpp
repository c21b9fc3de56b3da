// SPDX-License-Identifier: BSD-3-Clause
// The facade functions the CLI is built on (docs/api.md "The catalogue, the collective and bench
// --workers"): the stage and preset catalogue, the collective's traits, mean and Marsit ring
// (equal to merge's, bit for bit), and WorkersBench's figures.
#include <gradcodec/gradcodec.hpp>
#include <gradcodec/merge.hpp>  // the reference the facade must equal

#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>

#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

using namespace gradcodec;

namespace {

std::optional<ErrorCode> code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return std::nullopt;
}

std::vector<float> values(size_t n, float scale, float shift) {
  std::vector<float> v(n);
  for (size_t j = 0; j < n; ++j) v[j] = scale * static_cast<float>((j * 37) % 101) / 50.0f - shift;
  return v;
}

}  // namespace

TEST_CASE("facade catalogue: every stage and preset, as the registry holds them") {
  const auto stages = stage_catalogue();
  REQUIRE(stages.size() > 20);
  std::set<std::string> names;
  const std::set<std::string> kinds = {"transform", "sparsifier", "lowrank", "quantizer", "index coder", "lossless"};
  for (const auto& s : stages) {
    CHECK(names.insert(s.name).second);
    CHECK(kinds.count(s.kind) == 1);
    CHECK(s.version >= 1);
    CHECK(!s.example.empty());
  }
  const auto topk = std::find_if(stages.begin(), stages.end(), [](const StageRecord& s) { return s.name == "topk"; });
  REQUIRE(topk != stages.end());
  const auto ratio = std::find_if(topk->params.begin(), topk->params.end(), [](const ParamRecord& p) { return p.name == "ratio"; });
  REQUIRE(ratio != topk->params.end());
  CHECK(ratio->type == "float");
  CHECK(ratio->max <= 1.0);

  const auto presets = preset_catalogue();
  REQUIRE(!presets.empty());
  CHECK(presets[0].name == "lossless");
  for (const auto& p : presets) {
    EncoderOptions o;
    o.preset = p.name;
    CHECK(p.pipeline == canonical_pipeline(o));
    CHECK(p.encode_memory > 0);
  }
}

TEST_CASE("facade collective: traits, the workers' mean and Marsit's ring equal merge's") {
  CHECK(collective_traits("fp16", "").cast == DType::F16);
  CHECK(collective_traits("", "ef | bf16").cast == DType::BF16);
  CHECK(!collective_traits("", "raw | zstd").cast);
  CHECK(!collective_traits("topk-1pct", "").cast);
  CHECK(collective_traits("signsgd", "").signs);
  CHECK(!collective_traits("qsgd4", "").signs);
  CHECK(collective_traits("", "topk(ratio=0.01)").pipeline == "topk(ratio=0.01) | raw | varint");
  CHECK(code_of([] { collective_traits("no-such-preset", ""); }) == ErrorCode::Usage);

  const size_t M = 3, n = 1000;
  std::vector<std::vector<float>> w;
  for (size_t m = 0; m < M; ++m) w.push_back(values(n, 1.0f + static_cast<float>(m), 0.7f * static_cast<float>(m)));
  const std::vector<std::span<const float>> spans(w.begin(), w.end());
  CHECK(workers_mean(spans) == merge_values(MergeMethod::Mean, spans, MergeKey{}).values);
  CHECK(code_of([&] { workers_mean({spans[0]}); }) == ErrorCode::Usage);

  // The ring one hop at a time: the last worker's bits and eta are merge's marsit output.
  const MergeKey key{0, 2, 5};
  std::vector<uint8_t> running = ring_sign_bits(w[0]);
  double sum = ring_scale(w[0]);
  for (uint32_t m = 2; m <= M; ++m) {
    ring_hop(running, ring_sign_bits(w[m - 1]), m, M, key.seed, key.frame, key.tensor);
    sum += ring_scale(w[m - 1]);
  }
  const std::vector<float> marsit = merge_values(MergeMethod::Marsit, spans, key).values;
  const float eta = static_cast<float>(sum / static_cast<double>(M));
  REQUIRE(marsit.size() == n);
  for (size_t j = 0; j < n; ++j) REQUIRE(marsit[j] == (running[j] ? eta : -eta));
  CHECK(code_of([&] { ring_hop(running, running, 1, M, 0, 0, 0); }) == ErrorCode::Usage);
}

TEST_CASE("facade WorkersBench: figures per method over steps") {
  WorkersBenchOptions o;
  o.workers = 2;
  o.seeds = 2;
  WorkersBench bench(o);
  const std::vector<float> a = values(500, 1.0f, 0.5f), b = values(500, 2.0f, 0.9f);
  std::vector<float> mean(a.size());
  for (size_t j = 0; j < a.size(); ++j) mean[j] = static_cast<float>((double(a[j]) + double(b[j])) / 2);
  const std::vector<WorkersBenchTensor> step = {{"w", {a, b}, mean}};
  bench.add_step(step);
  bench.add_step(step);
  const auto rows = bench.rows();
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].method == "marsit");
  CHECK(rows[3].method == "mean");
  CHECK(rows[0].match.size() == 2);  // stochastic: per seed
  CHECK(rows[3].match.size() == 1);
  CHECK(rows[3].rel[0] < 1e-6);
  CHECK(rows[3].hop_bits == std::vector<uint64_t>{2 * 32 * 500});
  for (const auto& r : rows) {
    CHECK(r.acc_err.size() == r.seeds);
    CHECK(r.match[0] > 0.5);
  }
  const std::vector<WorkersBenchTensor> shorter = {{"w", {std::span(a).first(10), std::span(b).first(10)}, std::span(mean).first(10)}};
  CHECK(code_of([&] { bench.add_step(shorter); }) == ErrorCode::Input);
  CHECK(code_of([] { WorkersBench({.workers = 1}); }) == ErrorCode::Usage);
}
