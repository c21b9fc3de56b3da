// SPDX-License-Identifier: BSD-3-Clause
// Sparsifier selection speed at d = 1e4 .. 1e7 (×10 steps): input bytes per second and time per
// element (`per_elem`, the inverse rate). Time per element staying flat across d is the linear-time
// check of topk's radix select (docs/stages.md "topk": selection in O(d), never a full sort); the
// `full_sort` row is the O(d log d) reference it replaces.
#include <benchmark/benchmark.h>

#include "sparsify/dgc.hpp"
#include "sparsify/randk.hpp"
#include "sparsify/topk.hpp"
#include "support.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace gradcodec;

namespace {

void report(benchmark::State& state, size_t d) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(d) * 4);
  state.counters["per_elem"] = benchmark::Counter(static_cast<double>(d),
                                                  benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// 8 magnitude levels: every radix bin the select lands in is full of ties.
std::vector<float> eight_levels(size_t d) {
  auto v = test::gaussian(d, 2);
  for (auto& x : v) x = std::round(std::clamp(x, -2.0f, 2.0f) * 2.0f) / 2.0f;
  return v;
}

}  // namespace

// The topk stage's encode (f32 tensor → kept positions + values), ratio 1%.
static void BM_topk_encode(benchmark::State& state) {
  const size_t d = static_cast<size_t>(state.range(0));
  Tensor t = test::make_tensor("w", {d}, test::gaussian(d, 1, 1e-3f));
  auto stage = test::make_stage("topk(ratio=0.01)");
  auto* red = static_cast<Reducer*>(stage.get());
  for (auto _ : state) {
    Payload p;
    p.source = &t;
    p.info = &t.info;
    p.n = d;
    Streams s;
    red->encode(p, s, {});
    benchmark::DoNotOptimize(p.index.data());
  }
  report(state, d);
}
BENCHMARK(BM_topk_encode)->RangeMultiplier(10)->Range(10000, 10000000)->Unit(benchmark::kMicrosecond);

// topk_select alone on tie-heavy data, k = 1% of d.
static void BM_topk_select_ties(benchmark::State& state) {
  const size_t d = static_cast<size_t>(state.range(0));
  auto v = eight_levels(d);
  for (auto _ : state) benchmark::DoNotOptimize(stages::topk_select(v, d / 100).data());
  report(state, d);
}
BENCHMARK(BM_topk_select_ties)->RangeMultiplier(10)->Range(10000, 10000000)->Unit(benchmark::kMicrosecond);

// Reference: the same set by a full sort (what topk must not do).
static void BM_full_sort(benchmark::State& state) {
  const size_t d = static_cast<size_t>(state.range(0));
  auto v = test::gaussian(d, 1, 1e-3f);
  std::vector<uint64_t> order(d);
  for (auto _ : state) {
    std::iota(order.begin(), order.end(), uint64_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](uint64_t a, uint64_t b) { return stages::magnitude_key(v[a]) > stages::magnitude_key(v[b]); });
    std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(d / 100));
    benchmark::DoNotOptimize(order.data());
  }
  report(state, d);
}
BENCHMARK(BM_full_sort)->RangeMultiplier(10)->Range(10000, 10000000)->Unit(benchmark::kMicrosecond);

// randk positions, k = 1% of d (hash-set path) and 25% (bitmap path).
static void BM_randk_positions(benchmark::State& state) {
  const uint64_t d = static_cast<uint64_t>(state.range(0)), k = d / static_cast<uint64_t>(state.range(1));
  uint64_t seed = 0;
  for (auto _ : state) {
    Rng rng(seed++);
    benchmark::DoNotOptimize(stages::random_positions(d, k, rng).data());
  }
  report(state, d);
}
BENCHMARK(BM_randk_positions)
    ->ArgsProduct({{10000, 100000, 1000000, 10000000}, {100, 4}})
    ->Unit(benchmark::kMicrosecond);

// dgc selection at 0.1% (its paper's 99.9% sparsity), sample 1%.
static void BM_dgc_select(benchmark::State& state) {
  const size_t d = static_cast<size_t>(state.range(0));
  auto v = test::gaussian(d, 1, 1e-3f);
  uint64_t seed = 0;
  for (auto _ : state) {
    Rng rng(seed++);
    benchmark::DoNotOptimize(stages::dgc_select(v, std::max<size_t>(1, d / 1000), 0.01, rng).index.data());
  }
  report(state, d);
}
BENCHMARK(BM_dgc_select)->RangeMultiplier(10)->Range(10000, 10000000)->Unit(benchmark::kMicrosecond);
