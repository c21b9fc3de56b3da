// SPDX-License-Identifier: BSD-3-Clause
// dgc: on the bundled real gradients every tensor with d >= 1000 keeps between 0.8k and 1.3k
// positions at ratio 0.01 and 0.001, and the kept set is always a top set; constant, all-zero,
// tiny (d = 1, 2) and adversarial tensors fall back as documented in lib/sparsify/dgc.hpp.
#include <catch2/catch.hpp>

#include "sparsify/dgc.hpp"
#include "sparsify/topk.hpp"
#include "support.hpp"

#include <gradcodec/formats/snapshot_io.hpp>

#include <algorithm>
#include <cmath>

using namespace gradcodec;
using namespace gradcodec::test;
using stages::DgcPath;

namespace {

uint64_t k_of(double ratio, uint64_t d) { return std::max<uint64_t>(1, std::llround(ratio * double(d))); }

// Every kept magnitude ≥ every dropped one (NaN ranks lowest, as in topk).
bool is_top_set(const std::vector<float>& v, const std::vector<uint64_t>& idx) {
  uint32_t min_kept = UINT32_MAX, max_dropped = 0;
  std::vector<bool> in(v.size(), false);
  for (uint64_t i : idx) in[i] = true;
  for (size_t i = 0; i < v.size(); ++i) {
    const uint32_t key = stages::magnitude_key(v[i]);
    if (in[i]) min_kept = std::min(min_kept, key);
    else max_dropped = std::max(max_dropped, key);
  }
  return idx.empty() || min_kept >= max_dropped;
}

}  // namespace

TEST_CASE("dgc keeps 0.8k..1.3k positions of every real gradient tensor", "[dgc]") {
  auto reader = formats::open_snapshot(std::string(GRADCODEC_SOURCE_DIR) + "/test_data/snapshots/step_001.npz");
  size_t checked = 0, fallbacks = 0;
  for (size_t i = 0; i < reader->arrays().size(); ++i) {
    if (!is_float(reader->arrays()[i].dtype)) continue;
    Tensor t = reader->read(i);
    auto v = values_of(t);
    if (v.size() < 1000) continue;
    for (double ratio : {0.01, 0.001}) {
      const uint64_t k = k_of(ratio, v.size());
      INFO(t.name() << " d = " << v.size() << " ratio " << ratio << " k = " << k);
      Rng rng(11, 0, static_cast<uint32_t>(i), RngPurpose::Sample);
      auto sel = stages::dgc_select(v, k, 0.01, rng);
      CHECK(double(sel.index.size()) >= 0.8 * double(k));
      CHECK(double(sel.index.size()) <= 1.3 * double(k));
      CHECK(std::is_sorted(sel.index.begin(), sel.index.end()));
      CHECK(is_top_set(v, sel.index));
      CHECK(sel.rounds >= 1);
      CHECK(sel.rounds <= 10);
      fallbacks += sel.path == DgcPath::Fallback;
      // The stage, through a pipeline, keeps the same count.
      auto out = values_of(roundtrip("dgc(ratio=" + format_number(ratio, ParamType::Float) + ")", t, 11).decoded);
      size_t nonzero = 0;
      for (size_t j = 0; j < v.size(); ++j) {
        REQUIRE((out[j] == 0.0f || out[j] == v[j]));
        nonzero += out[j] != 0.0f;
      }
      CHECK(double(nonzero) >= 0.8 * double(k) - double(std::count(v.begin(), v.end(), 0.0f)));
      CHECK(double(nonzero) <= 1.3 * double(k));
      ++checked;
    }
  }
  CHECK(checked >= 10);
  CHECK(fallbacks == 0);  // the sampled threshold (lowered at most 9 times) sufficed everywhere
}

TEST_CASE("dgc falls back correctly on constant, all-zero and tiny tensors", "[dgc]") {
  auto run = [](const std::vector<float>& v, double ratio) {
    Rng rng(3, 0, 0, RngPurpose::Sample);
    return stages::dgc_select(v, k_of(ratio, v.size()), 0.01, rng);
  };
  // constant and all-zero: the threshold selects everything, exact top-k keeps 0..k−1
  for (float c : {0.25f, -3.0f, 0.0f}) {
    INFO("constant " << c);
    auto sel = run(std::vector<float>(5000, c), 0.01);
    std::vector<uint64_t> first(50);
    std::iota(first.begin(), first.end(), uint64_t{0});
    CHECK(sel.index == first);
    CHECK(sel.path == DgcPath::ExactOnSelected);
  }
  // d = 1: the element; d = 2: the larger one (the first on a tie), k = 1
  CHECK(run({-4.0f}, 0.001).index == std::vector<uint64_t>{0});
  for (uint64_t seed = 0; seed < 20; ++seed) {
    Rng rng(seed);
    CHECK(stages::dgc_select(std::vector<float>{0.5f, -2.0f}, 1, 0.01, rng).index == std::vector<uint64_t>{1});
    CHECK(stages::dgc_select(std::vector<float>{-2.0f, 0.5f}, 1, 0.01, rng).index == std::vector<uint64_t>{0});
    CHECK(stages::dgc_select(std::vector<float>{1.0f, 1.0f}, 1, 0.01, rng).index == std::vector<uint64_t>{0});
  }
  // empty: nothing
  CHECK(run({}, 0.01).index.empty());
  // through the pipeline, constant and zero tensors decode to exactly what was kept
  Tensor z = make_tensor("z", {4000}, std::vector<float>(4000, 0.0f));
  CHECK(values_of(roundtrip("dgc(ratio=0.001)", z).decoded) == std::vector<float>(4000, 0.0f));
}

TEST_CASE("dgc lowers its threshold, and falls back to exact top-k when that cannot help", "[dgc]") {
  // 79 huge values over a floor of tiny ones, k = 100: a sampled huge value gives c = 79 < 80;
  // lowering ×0.7 nine times (10·0.7⁹ ≈ 0.4) never reaches the floor (≤ 1e-3), so after 10
  // rounds the exact top-k of the tensor is kept. Without a huge value in the sample the first
  // threshold (the sample's largest) is inside the floor: c = 79 + about 1% of the floor, either
  // in [80, 130] (kept as is) or above (exact top-k on the selected set).
  std::vector<float> v(10000);
  Rng fill(1);
  for (auto& x : v) x = static_cast<float>(fill.uniform()) * 1e-3f;
  for (size_t i = 0; i < 79; ++i) v[i * 97] = 10.0f;
  size_t fallback = 0, exact = 0, threshold = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    Rng rng(seed);
    auto sel = stages::dgc_select(v, 100, 0.01, rng);
    INFO("seed " << seed << " path " << int(sel.path));
    REQUIRE(sel.index.size() >= 80);
    REQUIRE(sel.index.size() <= 130);
    REQUIRE(is_top_set(v, sel.index));
    if (sel.path != DgcPath::Threshold) REQUIRE(sel.index == stages::topk_select(v, 100));
    if (sel.path == DgcPath::Fallback) CHECK(sel.rounds == 10);
    fallback += sel.path == DgcPath::Fallback;
    exact += sel.path == DgcPath::ExactOnSelected;
    threshold += sel.path == DgcPath::Threshold;
  }
  CHECK(fallback > 0);
  CHECK(exact + threshold > 0);
  // Threshold lowered until the count is in range: Gaussian data, estimate from a tiny sample.
  auto g = gaussian(100000, 5);
  size_t lowered = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    Rng rng(seed);
    auto sel = stages::dgc_select(g, 1000, 0.001, rng);
    CHECK(sel.index.size() >= 800);
    CHECK(sel.index.size() <= 1300);
    CHECK(is_top_set(g, sel.index));
    lowered += sel.rounds > 1;
  }
  CHECK(lowered > 0);
}

TEST_CASE("dgc needs a ratio and draws from its own generator", "[dgc]") {
  CHECK_THROWS_WITH(Pipeline::parse("dgc"), Catch::Contains("dgc: missing parameter 'ratio'"));
  CHECK_THROWS_WITH(Pipeline::parse("dgc(ratio=0.01, sample=0)"), Catch::Contains("out of range"));
  Tensor t = make_tensor("w", {20000}, gaussian(20000, 6));
  CHECK(values_of(roundtrip("dgc(ratio=0.01)", t, 4).decoded) == values_of(roundtrip("dgc(ratio=0.01)", t, 4).decoded));
}
