// SPDX-License-Identifier: BSD-3-Clause
// Lossless stages on f32 gradient-like bytes: input bytes per second.
#include <benchmark/benchmark.h>

#include "base/checksum.hpp"
#include <gradcodec/detail/pages.hpp>
#include "support.hpp"

#include <gradcodec/plugin/registry.hpp>

#include <cstring>

#include <zstd.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

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

// The lossless stages' decoders alone, on 10^7 gradient-like f32 (40 MB), each next to the
// baseline it replaced, run in the same process: libzstd's one-shot ZSTD_decompress into a
// zero-filled buffer, and an un-chunked plane join into a zero-filled buffer (both on huge pages,
// zeroed_fresh, as the stages were). Bytes/s of output.
namespace {
struct LosslessInput {
  std::vector<uint8_t> raw, shuffled, compressed;  // f32 bytes; shuffle(width=4) of them; zstd(3) of that
  std::vector<uint8_t> runs_compressed;             // zstd(3) of shuffle(block=262144) of them
  std::unique_ptr<Stage> shuffle, zstd, runs;
};
const LosslessInput& lossless_input() {
  static const LosslessInput in = [] {
    LosslessInput r;
    const size_t n = 10000000;
    const auto v = test::gaussian(n, 1, 1e-3f);
    r.raw.resize(n * 4);
    std::memcpy(r.raw.data(), v.data(), r.raw.size());
    for (const char* name : {"shuffle", "zstd", "shuffle(block=262144)"}) {
      const StageSpec s = Pipeline::parse(name).stages().back();
      const std::string text = name;
      (text == "zstd" ? r.zstd : text == "shuffle" ? r.shuffle : r.runs) = find_stage(s.name)->make(s.params, s.version);
    }
    r.shuffled = static_cast<const Lossless&>(*r.shuffle).encode(r.raw, 4);
    r.compressed = static_cast<const Lossless&>(*r.zstd).encode(r.shuffled, 1);
    r.runs_compressed = static_cast<const Lossless&>(*r.zstd).encode(static_cast<const Lossless&>(*r.runs).encode(r.raw, 4), 1);
    return r;
  }();
  return in;
}
}  // namespace

static void BM_decode_zstd_stage(benchmark::State& state) {
  const auto& in = lossless_input();
  for (auto _ : state) {
    auto out = static_cast<const Lossless&>(*in.zstd).decode(in.compressed, in.shuffled.size());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * in.shuffled.size()));
}
static void BM_decode_zstd_baseline_oneshot(benchmark::State& state) {
  const auto& in = lossless_input();
  for (auto _ : state) {
    auto out = zeroed_fresh<uint8_t>(in.shuffled.size());
    const size_t got = ZSTD_decompress(out.data(), out.size(), in.compressed.data(), in.compressed.size());
    if (got != out.size()) state.SkipWithError("zstd baseline failed");
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * in.shuffled.size()));
}
static void BM_decode_shuffle_stage(benchmark::State& state) {
  const auto& in = lossless_input();
  for (auto _ : state) {
    auto out = static_cast<const Lossless&>(*in.shuffle).decode(in.shuffled, in.raw.size());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * in.raw.size()));
}
static void BM_decode_shuffle_baseline_zeroed(benchmark::State& state) {
  const auto& in = lossless_input();
  const size_t n = in.raw.size() / 4;
  for (auto _ : state) {
    auto out = zeroed_fresh<uint8_t>(in.raw.size());
    const uint8_t* p = in.shuffled.data() + 1;
    for (size_t i = 0; i < n; ++i)
      for (unsigned j = 0; j < 4; ++j) out[i * 4 + j] = p[j * n + i];
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * in.raw.size()));
}
BENCHMARK(BM_decode_zstd_stage)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_decode_zstd_baseline_oneshot)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_decode_shuffle_stage)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_decode_shuffle_baseline_zeroed)->Unit(benchmark::kMillisecond);

// Undoing `shuffle | zstd` as the codec does (Lossless::decode_chain): with runs (the lossless
// preset's block=262144), zstd's output is read run by run into a buffer in cache and joined
// from there; without them (before), zstd decodes the whole stream into fresh memory and the join
// reads it from there. Bytes/s of output.
static void BM_decode_shuffle_zstd_runs(benchmark::State& state) {
  const auto& in = lossless_input();
  const auto& runs = static_cast<const Lossless&>(*in.runs);
  const auto& zstd = static_cast<const Lossless&>(*in.zstd);
  for (auto _ : state) {
    const Lossless* chain[] = {&runs, &zstd};
    std::vector<uint8_t> out;
    Lossless::decode_chain(chain, in.runs_compressed.size(), [&](ByteOut& o) { o.write(in.runs_compressed); },
                           in.shuffled.size(), out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * in.raw.size()));
}
static void BM_decode_shuffle_zstd_whole(benchmark::State& state) {
  const auto& in = lossless_input();
  const auto& shuffle = static_cast<const Lossless&>(*in.shuffle);
  const auto& zstd = static_cast<const Lossless&>(*in.zstd);
  for (auto _ : state) {
    const Lossless* chain[] = {&shuffle, &zstd};
    std::vector<uint8_t> out;
    Lossless::decode_chain(chain, in.compressed.size(), [&](ByteOut& o) { o.write(in.compressed); },
                           in.shuffled.size(), out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * in.raw.size()));
}
BENCHMARK(BM_decode_shuffle_zstd_runs)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_decode_shuffle_zstd_whole)->Unit(benchmark::kMillisecond);

// The container's checksum over 40 MB (every stream is hashed when written and when read):
// gradcodec's xxh3() (AVX2 where the CPU has it) and libxxhash's XXH3_64bits (Debian's build,
// SSE2), the same value.
static void BM_checksum_xxh3(benchmark::State& state) {
  const auto& in = lossless_input();
  for (auto _ : state) benchmark::DoNotOptimize(xxh3(in.raw.data(), in.raw.size()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * in.raw.size()));
}
static void BM_checksum_libxxhash(benchmark::State& state) {
  const auto& in = lossless_input();
  for (auto _ : state) benchmark::DoNotOptimize(XXH3_64bits(in.raw.data(), in.raw.size()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * in.raw.size()));
}
BENCHMARK(BM_checksum_xxh3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_checksum_libxxhash)->Unit(benchmark::kMillisecond);
