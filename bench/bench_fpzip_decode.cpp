// SPDX-License-Identifier: BSD-3-Clause
// The fpzip stage's decoder (lib/quantize/fpzip_decode.hpp, bounds-checked) against libfpzip 1.3's
// own decoder, on the same streams: 2^20 Gaussian gradient values (σ = 1e-3) coded by libfpzip in
// the stage's chunks of 65536 values, lossless and at 16 bits. Bytes/s of decoded f32 output.
// libfpzip reads from a zero-padded copy, as the stage did before it had its own decoder.
#include <benchmark/benchmark.h>

#include "quantize/fpzip_decode.hpp"
#include "support.hpp"

#include <fpzip.h>

#include <algorithm>
#include <cstring>
#include <map>

namespace {

constexpr size_t kValues = size_t{1} << 20;
constexpr size_t kChunk = 65536;

struct Coded {
  std::vector<std::vector<uint8_t>> chunks;  // padded by 16 bytes a value + 64 for libfpzip
  std::vector<size_t> sizes;                 // each chunk's coded length
};

const Coded& coded(int prec) {
  static std::map<int, Coded> cache;
  auto it = cache.find(prec);
  if (it != cache.end()) return it->second;
  Coded c;
  const auto v = gradcodec::test::gaussian(kValues, 1, 1e-3f);
  for (size_t first = 0; first < kValues; first += kChunk) {
    std::vector<uint8_t> buf(kChunk * 8 + 1024);
    FPZ* fpz = fpzip_write_to_buffer(buf.data(), buf.size());
    fpz->type = FPZIP_TYPE_FLOAT, fpz->prec = prec;
    fpz->nx = static_cast<int>(kChunk), fpz->ny = 1, fpz->nz = 1, fpz->nf = 1;
    const size_t bytes = fpzip_write(fpz, v.data() + first);
    fpzip_write_close(fpz);
    buf.resize(bytes);
    c.sizes.push_back(bytes);
    buf.resize(bytes + 16 * kChunk + 64, 0);
    c.chunks.push_back(std::move(buf));
  }
  return cache.emplace(prec, std::move(c)).first->second;
}

// Decodes every chunk with decode_chunk(chunk index, output) -> bytes read, checked.
template <class DecodeChunk>
void run(benchmark::State& state, const Coded& c, DecodeChunk decode_chunk) {
  std::vector<float> out(kValues);
  for (auto _ : state) {
    for (size_t i = 0; i < c.chunks.size(); ++i)
      if (decode_chunk(i, out.data() + i * kChunk) != c.sizes[i]) state.SkipWithError("fpzip: chunk length mismatch");
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kValues) * 4);
}

void BM_fpzip_decode_ours(benchmark::State& state) {
  const int prec = static_cast<int>(state.range(0));
  const Coded& c = coded(prec);
  run(state, c, [&](size_t i, float* out) {
    return gradcodec::fpzip::decode_floats(std::span<const uint8_t>(c.chunks[i].data(), c.sizes[i]), prec,
                                           std::span<float>(out, kChunk));
  });
}

void BM_fpzip_decode_libfpzip(benchmark::State& state) {
  const int prec = static_cast<int>(state.range(0));
  const Coded& c = coded(prec);
  run(state, c, [&](size_t i, float* out) {
    FPZ* fpz = fpzip_read_from_buffer(c.chunks[i].data());
    fpz->type = FPZIP_TYPE_FLOAT, fpz->prec = prec;
    fpz->nx = static_cast<int>(kChunk), fpz->ny = 1, fpz->nz = 1, fpz->nf = 1;
    const size_t read = fpzip_read(fpz, out);
    fpzip_read_close(fpz);
    return read;
  });
}

}  // namespace

BENCHMARK(BM_fpzip_decode_ours)->Arg(0)->Arg(16)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_fpzip_decode_libfpzip)->Arg(0)->Arg(16)->Unit(benchmark::kMillisecond);
