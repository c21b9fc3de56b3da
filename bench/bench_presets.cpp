// SPDX-License-Identifier: BSD-3-Clause
// Whole presets, encode and decode, through the library's real path: SequenceEncoder into a
// container file and SequenceDecoder out of it (checksums, container, every stage) — what
// `gradcodec encode`/`decode` do minus reading and writing the user's files. One f32 tensor of d
// elements, shape [d/1000, 1000] (a linear layer's weight: bird's blocks are its rows), gradient-
// like values (Gaussian, σ = 10⁻³); d = 10³ … 10⁷ for every preset, 10⁸ for the main ones.
// Bytes/s are of the input (4·d). The container goes to /dev/shm (memory) when it exists.
//
// BM_baseline_* measure in the same run what the machine streams: a sum of |x| (one read pass,
// what an O(d) encoder cannot beat) and a memcpy (read + write), so that results can be quoted
// as a share of them (docs/performance.md).
#include <benchmark/benchmark.h>

#include <gradcodec/codec.hpp>
#include <gradcodec/container.hpp>
#include <gradcodec/file_io.hpp>
#include <gradcodec/plugin/registry.hpp>

#include <gradcodec/detail/pages.hpp>
#include "read_pass.hpp"
#include "support.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace gradcodec;
using gradcodec::bench::abs_sum;

namespace {

// The input tensor of d elements, generated once per size and shared (no copy per run).
const Tensor& input(size_t d) {
  static std::map<size_t, Tensor> cache;
  auto it = cache.find(d);
  if (it == cache.end()) {
    const uint64_t cols = d >= 1000 ? 1000 : d;
    it = cache.emplace(d, test::make_tensor("layer.weight", {d / cols, cols}, test::gaussian(d, 11, 1e-3f))).first;
  }
  return it->second;
}

std::string scratch_path(const std::string& tag) {
  const char* dir = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
  return std::string(dir) + "/gradcodec_bench_" + std::to_string(::getpid()) + "_" + tag + ".gcz";
}

// Encodes `t` with the preset into `path`; returns the container's size.
uint64_t encode_to(const std::string& pipeline, const Tensor& t, const std::string& path) {
  EncodeOptions eo;
  eo.seed = 1;
  SequenceEncoder enc(Pipeline::parse(pipeline), eo);
  ContainerWriter w(path, true, enc.header(R"([{"path":"bench","format":"memory"}])"));
  FrameSource src;
  src.count = 1;
  src.info = [&t](size_t) { return t.info; };
  src.load = [&t](size_t) { return t; };  // shares the bytes
  src.source = "bench";
  enc.encode_frame(src, w);
  w.finish();
  return w.bytes_written();
}

void report(benchmark::State& state, size_t d, uint64_t container_bytes) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(d) * 4);
  state.counters["ratio"] = container_bytes ? 4.0 * static_cast<double>(d) / static_cast<double>(container_bytes) : 0;
}

void preset_encode(benchmark::State& state, const std::string& name, const std::string& pipeline) {
  const size_t d = static_cast<size_t>(state.range(0));
  const Tensor& t = input(d);
  const std::string path = scratch_path("enc_" + std::to_string(d));
  uint64_t bytes = 0;
  for (auto _ : state) bytes = encode_to(pipeline, t, path);
  std::filesystem::remove(path);
  report(state, d, bytes);
  state.SetLabel(name);
}

void preset_decode(benchmark::State& state, const std::string& name, const std::string& pipeline) {
  const size_t d = static_cast<size_t>(state.range(0));
  const Tensor& t = input(d);
  const std::string path = scratch_path("dec_" + std::to_string(d));
  const uint64_t bytes = encode_to(pipeline, t, path);
  // The container is opened in each iteration, as `gradcodec decode` opens it once per run: a
  // reader kept open across iterations would find the file's mapped pages already touched.
  for (auto _ : state) {
    ContainerReader r = ContainerReader::open(path);
    SequenceDecoder dec(r);
    Tensor out = dec.decode(0, 0);
    benchmark::DoNotOptimize(out.data.data());
  }
  std::filesystem::remove(path);
  report(state, d, bytes);
  state.SetLabel(name);
}

void baseline_abs_sum(benchmark::State& state) {
  const size_t d = static_cast<size_t>(state.range(0));
  const float* x = reinterpret_cast<const float*>(input(d).data.data());
  for (auto _ : state) benchmark::DoNotOptimize(abs_sum(x, d));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(d) * 4);
}

// The same read pass on two threads at once, each over its own d floats; bytes/s of both. Its
// ratio to the one-thread pass bounds what `--threads 2` can give a memory-bound encoder.
void baseline_abs_sum_two_threads(benchmark::State& state) {
  const size_t d = static_cast<size_t>(state.range(0));
  const float* x = reinterpret_cast<const float*>(input(d).data.data());
  const std::vector<float> other(x, x + d);
  for (auto _ : state) {
    float a = 0, b = 0;
    std::thread helper([&] { b = abs_sum(other.data(), d); });
    a = abs_sum(x, d);
    helper.join();
    benchmark::DoNotOptimize(a + b);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(d) * 8);
}

void baseline_memcpy(benchmark::State& state) {
  const size_t d = static_cast<size_t>(state.range(0));
  const Tensor& t = input(d);
  std::vector<uint8_t> dst(t.data.size());
  for (auto _ : state) {
    std::memcpy(dst.data(), t.data.data(), t.data.size());
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(d) * 4);
}

// d floats written into freshly allocated memory (huge pages advised, as the decoders' outputs
// are): the floor under any decode that produces a dense tensor, page faults included.
void baseline_fresh_write(benchmark::State& state) {
  const size_t d = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    std::vector<float> v;
    reserve_fresh(v, d);
    v.resize(d, 1.0f);
    benchmark::DoNotOptimize(v.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(d) * 4);
}

// The presets also run at 10⁸ elements (400 MB): the issue's main ones.
bool main_preset(const std::string& name) {
  return name == "bird+" || name == "topk-1pct" || name == "signsgd" || name == "lossless" || name == "qsgd4";
}

[[maybe_unused]] const bool registered = [] {
  benchmark::RegisterBenchmark("BM_baseline/abs_sum", baseline_abs_sum)->RangeMultiplier(10)->Range(1000, 100000000);
  benchmark::RegisterBenchmark("BM_baseline/abs_sum_two_threads", baseline_abs_sum_two_threads)
      ->RangeMultiplier(10)
      ->Range(1000000, 100000000)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_baseline/memcpy", baseline_memcpy)->RangeMultiplier(10)->Range(1000, 100000000);
  benchmark::RegisterBenchmark("BM_baseline/fresh_write", baseline_fresh_write)
      ->RangeMultiplier(10)
      ->Range(1000, 100000000);
  for (const Preset& p : preset_table()) {
    const std::string name = p.name, pipeline = p.pipeline;
    const int64_t top = main_preset(name) ? 100000000 : 10000000;
    for (const char* what : {"encode", "decode"}) {
      auto* b = benchmark::RegisterBenchmark(("BM_preset_" + std::string(what) + "/" + name).c_str(),
                                             std::string(what) == "encode" ? preset_encode : preset_decode, name,
                                             pipeline);
      b->RangeMultiplier(10)->Range(1000, top)->Unit(benchmark::kMicrosecond)->UseRealTime();
    }
  }
  return true;
}();

}  // namespace
