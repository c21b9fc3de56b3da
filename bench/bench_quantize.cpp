// SPDX-License-Identifier: BSD-3-Clause
// Quantizer encode and decode speed on a dense f32 tensor of 1e6 values (and 1e3 for the smoke
// run): input bytes (4 per value) per second, and the coded size in bits per value
// (`bits/value` = all of the quantizer's streams, scales included).
#include <benchmark/benchmark.h>

#include "stages/quantize_support.hpp"

#include <string>
#include <vector>

using namespace gradcodec;

namespace {

const std::vector<std::string>& quantizer_texts() {
  static const std::vector<std::string> texts = {
      "qsgd(levels=127, bucket=512)", "qsgd(levels=7, bucket=512)", "qsgd(levels=1, bucket=512)",
      "qsgd(levels=7, bucket=512, coding=elias)", "terngrad", "sign", "sign(scale=none)", "onebit",
      "onebit(per=tensor)", "ssdm", "sbc", "intN(bits=8)", "fractional(P=16)"};
  return texts;
}

// A [1000, n/1000] gradient-like matrix (a column view for onebit), or a vector when n < 1000.
Tensor input(size_t n) {
  std::vector<uint64_t> shape = n >= 1000 ? std::vector<uint64_t>{1000, n / 1000} : std::vector<uint64_t>{n};
  return test::make_tensor("w", shape, test::gaussian(n, 1, 1e-3f));
}

void finish(benchmark::State& state, size_t n, const Streams& s) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n) * 4);
  state.counters["bits/value"] = 8.0 * static_cast<double>(s.total_bytes()) / static_cast<double>(n);
}

void encode(benchmark::State& state, const std::string& text) {
  const size_t n = static_cast<size_t>(state.range(0));
  Tensor t = input(n);
  auto q = test::make_quantizer(text);
  Streams last;
  for (auto _ : state) {
    Payload p;
    p.source = &t, p.info = &t.info, p.n = n, p.exact = false;
    Streams s;
    q->encode(p, s, test::quant_ctx(t.info, 1));
    benchmark::DoNotOptimize(s.all().data());
    last = std::move(s);
  }
  finish(state, n, last);
}

void decode(benchmark::State& state, const std::string& text) {
  const size_t n = static_cast<size_t>(state.range(0));
  Tensor t = input(n);
  auto q = test::make_quantizer(text);
  Payload p;
  p.source = &t, p.info = &t.info, p.n = n, p.exact = false;
  Streams s;
  q->encode(p, s, test::quant_ctx(t.info, 1));
  for (auto _ : state) {
    Payload d;
    d.info = &t.info, d.n = n, d.exact = false;
    q->decode(d, s, test::quant_ctx(t.info, 1));
    benchmark::DoNotOptimize(d.values.data());
  }
  finish(state, n, s);
}

// Registers encode/decode of every quantizer text at 1e3 (smoke) and 1e6 values.
[[maybe_unused]] const bool registered = [] {
  for (const auto& text : quantizer_texts()) {
    benchmark::RegisterBenchmark(("BM_quantize_encode/" + text).c_str(), encode, text)->Arg(1000)->Arg(1000000);
    benchmark::RegisterBenchmark(("BM_quantize_decode/" + text).c_str(), decode, text)->Arg(1000)->Arg(1000000);
  }
  return true;
}();

}  // namespace
