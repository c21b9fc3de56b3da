// SPDX-License-Identifier: BSD-3-Clause
// bird+ encode cost against exact top-k at the same kept fraction (BIRD+'s central claim, Wu et al.
// 2023: bi-random block sampling is O(d) and cheaper than top-k), on a VGG16-sized snapshot built
// here: the 13 conv layers of VGG16 (CIFAR variant, 3×3 kernels), three 512-wide classifier
// layers and all biases — 15.2M f32 parameters. Values are gradient-like: per-layer scale (deeper
// layers smaller), a log-normal scale per kernel/row (σ = 0.7) and heavy-tailed elements
// (N(0,1)·exp(0.5·N(0,1))).
//
//   BM_vgg16_select/<name>     the sparsifier alone (Reducer::plan_frame + encode of every
//                              tensor: selection and kept values), one thread; the payloads'
//                              f32 copies of the tensors are made outside the timed region.
//   BM_vgg16_reducer/<name>    the same in the codec's order: each tensor's f32 copy made
//                              right before its encode, and timed.
//   BM_vgg16_pipeline/<name>   the whole per-tensor encode (PipelineStages::encode), the same
//                              back end for both: the presets' sign | plain | lzma(stream=index),
//                              and sign | varint.
// topk gets, per tensor, k = the number of elements bird+(gamma=1.4) keeps on that tensor with
// seed 1 (block-sampled elements; vectors count what bird+ sends of them), so both keep the
// same number of values per tensor. Counters: kept (fraction of parameters), per_param (ns).
//   BM_bird_plus_select/<d>    bird_select on one conv tensor [d/576, 64, 3, 3]: time per
//                              element flat in d is the O(d) check.
//   BM_bird_norms/<m>          the per-block norms alone over 10⁷ f32 in blocks of m (1 = 1×1
//                              conv, 9 = 3×3, 25 = 5×5, 49 = 7×7), to set against BM_baseline/abs_sum;
//   BM_bird_norms_without_avx2/<m>  the same 3×3 and 5×5 norms on the SSE2 paths, in the same process.
//   BM_bird_stage1/<vec>       stage 1's keep decisions alone over the norms of 10⁶ 3×3 blocks
//                              (vec 1: the loop bird_stage1 picks on this CPU; 0: the portable
//                              loop); bytes/s of the 9·10⁶ f32 the blocks stand for.
#include <benchmark/benchmark.h>

#include "sparsify/bird.hpp"
#include "sparsify/bird_sample.hpp"
#include "sparsify/bird_split.hpp"
#include "sparsify/bird_stage1.hpp"
#include "sparsify/topk.hpp"
#include "support.hpp"

#include <cmath>
#include <string>
#include <vector>

using namespace gradcodec;

namespace {

struct Layer {
  std::string name;
  std::vector<uint64_t> shape;
  double scale;
};

std::vector<Layer> vgg16_layers() {
  const uint64_t conv[13][2] = {{64, 3},    {64, 64},   {128, 64},  {128, 128}, {256, 128}, {256, 256}, {256, 256},
                                {512, 256}, {512, 512}, {512, 512}, {512, 512}, {512, 512}, {512, 512}};
  std::vector<Layer> out;
  for (int i = 0; i < 13; ++i) {
    const std::string n = "features." + std::to_string(i);
    const double s = 1e-3 * std::pow(0.8, i);
    out.push_back({n + ".weight", {conv[i][0], conv[i][1], 3, 3}, s});
    out.push_back({n + ".bias", {conv[i][0]}, s});
  }
  const uint64_t fc[3][2] = {{512, 512}, {512, 512}, {10, 512}};
  for (int i = 0; i < 3; ++i) {
    const std::string n = "classifier." + std::to_string(i);
    out.push_back({n + ".weight", {fc[i][0], fc[i][1]}, 2e-3});
    out.push_back({n + ".bias", {fc[i][0]}, 2e-3});
  }
  return out;
}

std::vector<float> gradient_like(const std::vector<uint64_t>& shape, double scale, uint64_t seed) {
  const auto s = stages::bird_split(shape);
  const uint64_t n = shape_elements(shape), m = s.vector ? n : s.block;
  Rng r(seed);
  std::vector<float> v(n);
  for (uint64_t b = 0; b < n / m; ++b) {
    const double bs = scale * std::exp(0.7 * r.normal());
    for (uint64_t k = 0; k < m; ++k) v[b * m + k] = static_cast<float>(bs * r.normal() * std::exp(0.5 * r.normal()));
  }
  return v;
}

struct Snapshot16 {
  std::vector<Tensor> tensors;
  uint64_t params = 0;
  std::vector<uint64_t> bird_kept;  // per tensor: values bird+(gamma=1.4) keeps with seed 1
  uint64_t bird_total = 0;
};

FrameView view_of(const std::vector<Tensor>& ts) {
  FrameView v;
  v.count = ts.size();
  v.info = [&ts](size_t i) { return ts[i].info; };
  v.load = [&ts](size_t i) { return ts[i]; };
  return v;
}

// The payloads the codec hands a reducer: the tensor's f32 values already materialised (the
// codec calls Payload::dense_f32 before any reducer; that copy is not the sparsifier's work).
std::vector<Payload> payloads(const std::vector<Tensor>& ts) {
  std::vector<Payload> out(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    out[i].source = &ts[i];
    out[i].info = &ts[i].info;
    out[i].n = ts[i].elements();
    out[i].dense_f32();
  }
  return out;
}

// Runs a reducer over a frame as the codec does (plan, then each tensor's payload).
template <class Sink>
void run_frame(Reducer& red, const std::vector<Tensor>& ts, std::vector<Payload>& ps, uint64_t seed, Sink&& sink) {
  StageContext base;
  base.seed = seed;
  auto plan = red.plan_frame(view_of(ts), base);
  for (size_t i = 0; i < ts.size(); ++i) {
    Streams s;
    StageContext c = base;
    c.tensor = static_cast<uint32_t>(i);
    c.info = &ts[i].info;
    c.frame_plan = plan.get();
    red.encode(ps[i], s, c);
    sink(i, ps[i], s);
  }
}

const Snapshot16& vgg16() {
  static const Snapshot16 snap = [] {
    Snapshot16 s;
    uint64_t seed = 100;
    for (const auto& l : vgg16_layers()) {
      s.tensors.push_back(test::make_tensor(l.name, l.shape, gradient_like(l.shape, l.scale, seed++)));
      s.params += s.tensors.back().elements();
    }
    auto bird = test::make_stage("bird+(gamma=1.4)");
    s.bird_kept.assign(s.tensors.size(), 0);
    auto ps = payloads(s.tensors);
    run_frame(*static_cast<Reducer*>(bird.get()), s.tensors, ps, 1, [&](size_t i, const Payload& p, const Streams& st) {
      uint64_t kept = p.value_count();
      if (const Stream* side = st.find(kSideStream)) {  // vectors: entries sent (fp32)
        const uint64_t nb = (p.n + 7) / 8;
        kept += (side->bytes.size() - nb) / 4;
      }
      s.bird_kept[i] = kept;
      s.bird_total += kept;
    });
    return s;
  }();
  return snap;
}

void counters(benchmark::State& state, const Snapshot16& s, uint64_t kept) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(s.params) * 4);
  state.counters["kept"] = static_cast<double>(kept) / static_cast<double>(s.params);
  state.counters["per_param"] = benchmark::Counter(static_cast<double>(s.params),
                                                   benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// The reducers compared: bird+ (gamma 1.4), bird, and exact topk with bird+'s per-tensor k.
enum class Which { BirdPlus, Bird, Topk };

std::vector<std::unique_ptr<Stage>> reducers(Which w, const Snapshot16& s) {
  std::vector<std::unique_ptr<Stage>> out;
  if (w == Which::BirdPlus) out.push_back(test::make_stage("bird+(gamma=1.4)"));
  if (w == Which::Bird) out.push_back(test::make_stage("bird"));
  if (w == Which::Topk)
    for (uint64_t k : s.bird_kept) out.push_back(test::make_stage("topk(k=" + std::to_string(std::max<uint64_t>(1, k)) + ")"));
  return out;
}

// codec_order = true: each tensor's f32 copy is made right before its encode and timed (what
// the codec does: the copy leaves the tensor in cache for the reducer). false: the copies are
// made before the timed region, so only the reducer's own work is timed (tensors cold).
void vgg16_reduce(benchmark::State& state, Which w, bool codec_order) {
  const Snapshot16& s = vgg16();
  auto stages_ = reducers(w, s);
  uint64_t seed = 1, kept = 0;
  for (auto _ : state) {
    std::vector<Payload> ps;
    if (!codec_order) {
      state.PauseTiming();
      ps = payloads(s.tensors);
      state.ResumeTiming();
    } else {
      ps.resize(s.tensors.size());
    }
    StageContext base;
    base.seed = seed++;
    auto* first = static_cast<Reducer*>(stages_[0].get());
    auto plan = first->plan_frame(view_of(s.tensors), base);
    kept = 0;
    for (size_t i = 0; i < s.tensors.size(); ++i) {
      Payload& p = ps[i];
      if (codec_order) {
        p.source = &s.tensors[i];
        p.info = &s.tensors[i].info;
        p.n = s.tensors[i].elements();
        p.dense_f32();
      }
      Streams st;
      StageContext c = base;
      c.tensor = static_cast<uint32_t>(i);
      c.info = &s.tensors[i].info;
      c.frame_plan = plan.get();
      static_cast<Reducer*>(stages_[w == Which::Topk ? i : 0].get())->encode(p, st, c);
      kept += p.value_count();
      benchmark::DoNotOptimize(p.values.data());
    }
  }
  counters(state, s, w == Which::Bird ? kept : s.bird_total);
}

}  // namespace

BENCHMARK_CAPTURE(vgg16_reduce, bird+, Which::BirdPlus, false)->Name("BM_vgg16_select/bird+")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(vgg16_reduce, bird, Which::Bird, false)->Name("BM_vgg16_select/bird")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(vgg16_reduce, topk, Which::Topk, false)->Name("BM_vgg16_select/topk_same_k")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(vgg16_reduce, bird+, Which::BirdPlus, true)->Name("BM_vgg16_reducer/bird+")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(vgg16_reduce, bird, Which::Bird, true)->Name("BM_vgg16_reducer/bird")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(vgg16_reduce, topk, Which::Topk, true)->Name("BM_vgg16_reducer/topk_same_k")->Unit(benchmark::kMillisecond);

namespace {

// Whole per-tensor encode through PipelineStages (no container, no threads).
void vgg16_pipeline(benchmark::State& state, bool bird, const std::string& back) {
  const Snapshot16& s = vgg16();
  std::vector<std::unique_ptr<PipelineStages>> stages;
  if (bird) {
    stages.push_back(std::make_unique<PipelineStages>(Pipeline::parse("bird+(gamma=1.4)" + back)));
  } else {
    for (uint64_t k : s.bird_kept)
      stages.push_back(std::make_unique<PipelineStages>(
          Pipeline::parse("topk(k=" + std::to_string(std::max<uint64_t>(1, k)) + ")" + back)));
  }
  uint64_t seed = 1, bytes = 0;
  for (auto _ : state) {
    StageContext base;
    base.seed = seed++;
    auto plan = stages[0]->plan_frame(view_of(s.tensors), base);
    bytes = 0;
    for (size_t i = 0; i < s.tensors.size(); ++i) {
      StageContext c = base;
      c.tensor = static_cast<uint32_t>(i);
      c.info = &s.tensors[i].info;
      c.frame_plan = plan.get();
      PipelineStages::TensorState st;
      auto enc = stages[bird ? 0 : i]->encode(s.tensors[i], c, st);
      bytes += enc.streams.total_bytes();
    }
  }
  counters(state, s, s.bird_total);
  state.counters["ratio"] = static_cast<double>(s.params) * 4.0 / static_cast<double>(bytes);
}
}  // namespace

// The paper's wire (LZMA on u32 block indices), and the same without LZMA (varint gaps).
const char* const kLzma = " | sign | plain | lzma(stream=index)";
const char* const kVarint = " | sign | varint";
BENCHMARK_CAPTURE(vgg16_pipeline, bird+, true, kLzma)->Name("BM_vgg16_pipeline/bird+ | sign | plain | lzma")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(vgg16_pipeline, topk, false, kLzma)->Name("BM_vgg16_pipeline/topk_same_k | sign | plain | lzma")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(vgg16_pipeline, bird+, true, kVarint)->Name("BM_vgg16_pipeline/bird+ | sign | varint")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(vgg16_pipeline, topk, false, kVarint)->Name("BM_vgg16_pipeline/topk_same_k | sign | varint")->Unit(benchmark::kMillisecond);

// One conv tensor of d elements: bird+'s selection (norms, both stages) per element across d —
// the linear-time check. The values are given as a span: no copy, no payload.
static void BM_bird_plus_select(benchmark::State& state) {
  const uint64_t d = static_cast<uint64_t>(state.range(0));
  const std::vector<uint64_t> shape = {std::max<uint64_t>(1, d / 576), 64, 3, 3};
  const auto v = gradient_like(shape, 1e-3, 7);
  const auto split = stages::bird_split(shape);
  stages::BirdRule rule;
  rule.plus = true;
  rule.gamma = 1.4;
  uint64_t seed = 0;
  for (auto _ : state) {
    StageContext c;
    c.seed = seed++;
    benchmark::DoNotOptimize(stages::bird_select(v, split.blocks, split.block, rule, c).blocks.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(v.size()) * 4);
  state.counters["per_elem"] = benchmark::Counter(static_cast<double>(v.size()),
                                                  benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_bird_plus_select)->RangeMultiplier(10)->Range(10000, 10000000)->Unit(benchmark::kMicrosecond);

// The norms alone: one read pass over 10⁷ f32 (memory-resident, not cache-resident) in blocks
// of m; bytes/s of input, comparable with BM_baseline/abs_sum/10000000.
template <bool kWide>
static void norms_bench(benchmark::State& state) {
  const uint64_t m = static_cast<uint64_t>(state.range(0)), n = 10000000 / m * m;
  const auto v = gradient_like({n / m, 1, 1, m}, 1e-3, 11);
  std::vector<float> l1, linf;
  stages::bird_norms(v, m, l1, linf);  // the outputs' pages mapped before timing, as a worker's reused buffers are
  for (auto _ : state) {
    if constexpr (kWide)
      stages::bird_norms(v, m, l1, linf);
    else
      stages::bird_norms_without_avx2(v, m, l1, linf);
    benchmark::DoNotOptimize(l1.data());
    benchmark::DoNotOptimize(linf.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n) * 4);
  state.SetLabel(kWide && stages::bird_norms_avx2() ? "avx2" : "sse2");
}
BENCHMARK_TEMPLATE(norms_bench, true)->Name("BM_bird_norms")->Arg(1)->Arg(9)->Arg(25)->Arg(49)->Arg(768)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(norms_bench, false)->Name("BM_bird_norms_without_avx2")->Arg(9)->Arg(25)->Unit(benchmark::kMicrosecond);

// Stage 1 alone on the norms of 10⁶ 3×3 blocks (cache-resident-sized: 4 MB of norms), with the
// kept list reused as the sampler reuses it. Bytes/s count the tensor the blocks stand for.
static void BM_bird_stage1(benchmark::State& state) {
  const bool vec = state.range(0) != 0;
  const uint64_t blocks = 1000000, m = 9;
  const auto v = gradient_like({blocks, 1, 1, m}, 1e-3, 13);
  std::vector<float> l1, linf;
  const auto summary = stages::bird_norms(v, m, l1, linf);
  const double inv1 = 1.0 / static_cast<double>(summary.l1_max);
  std::vector<uint64_t> kept(blocks);
  size_t count = 0;
  uint64_t seed = 0;
  for (auto _ : state) {
    const Rng r(seed++, 0, 0, RngPurpose::Stage1);
    if (vec)
      count = stages::bird_stage1(l1, summary.l1_max, inv1, r, kept.data());
    else
      count = stages::bird_stage1_portable(l1, summary.l1_max, inv1, r, kept.data());
    benchmark::DoNotOptimize(kept.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(blocks * m) * 4);
  state.counters["kept"] = static_cast<double>(count) / static_cast<double>(blocks);
  state.SetLabel(vec && stages::bird_stage1_vectorised() ? "avx512" : "portable");
}
BENCHMARK(BM_bird_stage1)->Arg(1)->Arg(0)->Unit(benchmark::kMicrosecond);
