// SPDX-License-Identifier: BSD-3-Clause
// Sequence codecs, one frame of one tensor as the codec runs it (encode, the mirror decode that
// updates the shared state, the encoder's error-memory update): tcs at d = 1e3 .. 1e7 (time per
// element flat = linear time; the frame is not a keyframe, so the global mask is rebuilt from the
// previous decoded frame), and powersgd on ResNet-18's largest matrix [512, 4608] at ranks 1, 2,
// 4 (warm-started; cost ∝ rank).
#include <benchmark/benchmark.h>

#include "support.hpp"

using namespace gradcodec;

namespace {

// Runs frame 0 once, then frame 1 of `t` on every iteration.
void run_frames(benchmark::State& state, const std::string& pipeline, const Tensor& t) {
  PipelineStages stages(Pipeline::parse(pipeline));
  PipelineStages::TensorState st;
  auto frame = [&](uint32_t f) {
    StageContext ctx;
    ctx.seed = 1;
    ctx.frame = f;
    ctx.keyframe = f == 0;
    ctx.info = &t.info;
    auto enc = stages.encode(t, ctx, st);
    std::vector<float> recon;
    stages.decode(t.info, enc.plain, false, ctx, st, &recon);
    stages.after_encode(recon, ctx, st);
    return enc.streams.total_bytes();
  };
  frame(0);
  for (auto _ : state) benchmark::DoNotOptimize(frame(1));
  const auto d = static_cast<double>(t.elements());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(t.elements()) * 4);
  state.counters["per_elem"] =
      benchmark::Counter(d, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

}  // namespace

static void BM_tcs_frame(benchmark::State& state) {
  const auto d = static_cast<uint64_t>(state.range(0));
  const Tensor t = test::make_tensor("w", {d}, test::gaussian(d, 1));
  run_frames(state, "tcs(global=0.01, local=0.001)", t);
}
BENCHMARK(BM_tcs_frame)->RangeMultiplier(10)->Range(1000, 10000000)->Unit(benchmark::kMicrosecond);

static void BM_powersgd_frame(benchmark::State& state) {
  const Tensor t = test::make_tensor("w", {512, 512, 3, 3}, test::gaussian(512 * 4608, 2));
  run_frames(state, "powersgd(rank=" + std::to_string(state.range(0)) + ")", t);
}
BENCHMARK(BM_powersgd_frame)->Arg(1)->Arg(2)->Arg(4)->Unit(benchmark::kMillisecond);
