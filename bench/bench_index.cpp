// SPDX-License-Identifier: BSD-3-Clause
// Index coders: encode + decode of a uniformly random position set, per coder and density.
// Name: BM_index/<coder>/<density in ppm>/<d>. Reported: bytes/s = 4·d per iteration (the f32
// tensor the index belongs to, so numbers compare with the other stages' input MB/s),
// items/s = positions, and the counter bits_per_pos = stream bits / k. Every round trip is checked.
#include <benchmark/benchmark.h>

#include "stages/index_support.hpp"

#include <string>

using namespace gradcodec;
using namespace gradcodec::test::ix;

namespace {

void run(benchmark::State& state, const CoderSpec& c, double density, uint64_t d) {
  auto coder = make_coder(c);
  const auto pos = bernoulli(d, density, 42);
  std::vector<uint8_t> bytes;
  for (auto _ : state) {
    bytes = encode(*coder, d, pos);
    Payload q = decode(*coder, d, bytes);
    benchmark::DoNotOptimize(q.index.data());
    if (q.index.size() != pos.size()) state.SkipWithError("round trip lost positions");
  }
  if (decode(*coder, d, bytes).index != pos) state.SkipWithError("round trip changed the positions");
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(d) * 4);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(pos.size()));
  state.counters["bits_per_pos"] =
      pos.empty() ? 0.0 : 8.0 * static_cast<double>(bytes.size()) / static_cast<double>(pos.size());
}

// Registered at static-initialisation time of this translation unit (benchmark's own registry,
// not the stage registry).
const bool registered = [] {
  for (const auto& c : all_coders())
    for (double density : {0.001, 0.01, 0.1})
      for (uint64_t d : {uint64_t{1000}, uint64_t{10'000'000}}) {
        const std::string name = "BM_index/" + c.label() + "/" +
                                 std::to_string(static_cast<int>(density * 1e6)) + "/" + std::to_string(d);
        benchmark::RegisterBenchmark(name.c_str(), [c, density, d](benchmark::State& s) { run(s, c, density, d); })
            ->Unit(benchmark::kMillisecond);
      }
  return true;
}();

}  // namespace
