// Lossless stages on f32 gradient-like bytes: input bytes per second.
#include <benchmark/benchmark.h>

#include "support.hpp"

using namespace gradcodec;

static void BM_lossless_preset(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  Tensor t = test::make_tensor("w", {n}, test::gaussian(n, 1, 1e-3f));
  std::string text = Pipeline::preset("lossless").text();
  for (auto _ : state) {
    auto r = test::roundtrip(text, t);
    benchmark::DoNotOptimize(r.stream_bytes);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n) * 4);
}
BENCHMARK(BM_lossless_preset)->Arg(1000)->Arg(1000000);
