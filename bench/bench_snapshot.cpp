// SPDX-License-Identifier: BSD-3-Clause
// A preset's encode of a whole snapshot set against a read pass over the same tensors, in the
// same process and the same memory, the two alternated within each iteration: the like-for-like
// form of the issue 10 ratios (bird+ against the read pass; 2 threads against 1).
//
//   BM_snapshot/<preset>   GRADCODEC_BENCH_SNAPSHOT names the snapshot (any format the CLI
//                          reads; bench/run_performance.py passes make_vgg16.py's files). Each
//                          iteration runs, in this order: the read pass and the encode on one
//                          thread (on each CPU in turn), the read pass on two threads, the encode
//                          on two threads. The encode is `gradcodec bench`'s: SequenceEncoder into a
//                          new container in /dev/shm (the last one deleted before the clock
//                          starts), seed 0, with the heap settings the CLI's bench uses (freed
//                          memory kept). The read pass is BM_baseline/abs_sum's loop
//                          over each tensor where the reader left it (a safetensors or NPY file
//                          is memory-mapped, as for the encoder); on two threads, each takes the
//                          next tensor as it finishes one, as the encoder's workers do.
//
// The one-thread read pass and encode run once on each CPU the process may use (at most 4,
// spread over them), pinned to it (the vCPUs of docs/performance.md's VM differ in speed); the
// two-thread runs are not pinned.
//
// Counters, medians over the iterations (GB/s = 10⁹ bytes of input per second):
//   read_GBps, enc_GBps            one thread, the faster CPU of each iteration
//   read2_GBps, enc2_GBps          two threads
//   enc_per_read                   median of each one-thread encode speed ÷ the read speed on its CPU
//   enc_speedup, read_speedup      median of each iteration's faster 1-thread time ÷ 2-thread time
//   enc1_cpu_spread                median of each iteration's slower ÷ faster 1-thread encode time
//   enc_speedup_model              median over the iterations of 1 ÷ (f ÷ read speed-up + (1 − f) ÷ 2),
//                                  f = 1-thread read time ÷ 1-thread encode time: the speed-up of an
//                                  encoder that reads its input at the read pass's speed and then
//                                  computes, its reading sped up by two threads as the read pass
//                                  was and the rest halved. Where the read pass gains little (memory
//                                  bandwidth), an encoder that reads near its speed cannot gain much
//                                  more.
//   cpus                           the CPUs the one-thread runs were pinned to
// The reported time is the one-thread encode's. Every encode must write the same number of
// bytes (one seed, any thread count): otherwise the benchmark stops with an error.
#include <benchmark/benchmark.h>

#include <gradcodec/codec.hpp>
#include <gradcodec/container.hpp>
#include <gradcodec/formats/snapshot_io.hpp>
#include <gradcodec/plugin/registry.hpp>

#include "read_pass.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <vector>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

using namespace gradcodec;

namespace {

using Clock = std::chrono::steady_clock;

struct Loaded {
  std::vector<Tensor> tensors;  // the floating-point ones, in file order
  uint64_t bytes = 0;
  std::string error;
};

const Loaded& snapshot() {
  static const Loaded s = [] {
    Loaded l;
    const char* path = std::getenv("GRADCODEC_BENCH_SNAPSHOT");
    if (!path || !*path) {
      l.error = "set GRADCODEC_BENCH_SNAPSHOT to a snapshot file";
      return l;
    }
    try {
      auto r = formats::open_snapshot(path);
      for (size_t i = 0; i < r->arrays().size(); ++i) {
        if (r->arrays()[i].dtype != DType::F32) continue;
        l.tensors.push_back(r->read(i));
        l.bytes += l.tensors.back().data.size();
      }
      if (l.tensors.empty()) l.error = std::string(path) + ": no f32 tensor";
    } catch (const std::exception& e) {
      l.error = e.what();
    }
    return l;
  }();
  return s;
}

// One read pass over every tensor, on `threads` threads sharing a queue of tensors.
double read_seconds(const std::vector<Tensor>& ts, unsigned threads) {
  std::atomic<size_t> next{0};
  std::vector<float> sums(threads, 0.0f);
  auto work = [&](unsigned w) {
    for (size_t i; (i = next.fetch_add(1)) < ts.size();)
      sums[w] += bench::abs_sum(reinterpret_cast<const float*>(ts[i].data.data()), ts[i].data.size() / 4);
  };
  const auto start = Clock::now();
  std::vector<std::thread> helpers;
  for (unsigned w = 1; w < threads; ++w) helpers.emplace_back(work, w);
  work(0);
  for (auto& h : helpers) h.join();
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  benchmark::DoNotOptimize(sums.data());
  return s;
}

// `gradcodec bench`'s timed encode: a fresh encoder and container per run; returns seconds.
double encode_seconds(const Pipeline& p, const std::vector<Tensor>& ts, unsigned threads, const std::string& path,
                      uint64_t& bytes) {
  std::error_code ec;
  std::filesystem::remove(path, ec);  // as `gradcodec bench`: the last run's container goes before the clock starts
  const auto start = Clock::now();
  EncodeOptions eo;
  eo.seed = 0;
  eo.threads = threads;
  SequenceEncoder enc(p, eo);
  ContainerWriter w(path, true, enc.header(R"([{"path":"bench","format":"memory"}])"));
  FrameSource src;
  src.count = ts.size();
  src.info = [&ts](size_t i) { return ts[i].info; };
  src.load = [&ts](size_t i) { return ts[i]; };  // shares the bytes
  enc.encode_frame(src, w);
  w.finish();
  bytes = w.bytes_written();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The most CPUs the one-thread runs are pinned to, each in turn.
constexpr size_t kMostPinned = 4;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void snapshot_encode(benchmark::State& state, const std::string& pipeline) {
  const Loaded& s = snapshot();
  if (!s.error.empty()) {
    state.SkipWithError(s.error.c_str());
    return;
  }
#if defined(__GLIBC__)
  // As `gradcodec bench` (reuse_freed_heap): freed memory stays with the process.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
  const Pipeline p = Pipeline::parse(pipeline);
  const char* dir = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
  const std::string path = std::string(dir) + "/gradcodec_bench_snapshot_" + std::to_string(::getpid()) + ".gcz";
  const double gb = static_cast<double>(s.bytes) / 1e9;
  uint64_t first = 0, bytes = 0;
  encode_seconds(p, s.tensors, 1, path, first);  // warm-up: maps the file's pages
  // The one-thread runs are pinned to each allowed CPU in turn: the vCPUs of the VM in
  // docs/performance.md differ in speed (by up to ~30% on one loop), so an unpinned one-thread
  // run measures whichever one it landed on, and a speed-up over the slower one overstates what
  // the second thread adds. The speed-up counted is against the faster CPU of each iteration.
  cpu_set_t all;
  CPU_ZERO(&all);
  std::vector<int> cpus;
  if (pthread_getaffinity_np(pthread_self(), sizeof all, &all) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &all)) cpus.push_back(c);
  auto pin = [&](int c) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c, &one);
    return pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
  };
  // Threads inherit the affinity of the thread that creates them: each two-thread encode's
  // encoder creates its helper (and joins it when destroyed, after the clock stops), after
  // unpin().
  auto unpin = [&] { pthread_setaffinity_np(pthread_self(), sizeof all, &all); };
  if (cpus.empty()) cpus.push_back(-1);
  if (cpus.size() > kMostPinned) {  // a machine with many CPUs: a few spread over them
    std::vector<int> some;
    for (size_t k = 0; k < kMostPinned; ++k) some.push_back(cpus[k * cpus.size() / kMostPinned]);
    cpus = std::move(some);
  }
  std::vector<double> r1, e1, r2, e2, per_read, spread;
  for (auto _ : state) {
    double best_r = 1e300, best_e = 1e300, worst_e = 0;
    bool same = true;
    for (int c : cpus) {
      if (c >= 0 && !pin(c)) {
        unpin();
        state.SkipWithError("cannot pin the one-thread run to a CPU");
        return;
      }
      const double r = read_seconds(s.tensors, 1);
      const double e = encode_seconds(p, s.tensors, 1, path, bytes);
      same = same && bytes == first;
      per_read.push_back(r / e);
      best_r = std::min(best_r, r);
      best_e = std::min(best_e, e);
      worst_e = std::max(worst_e, e);
    }
    unpin();
    r1.push_back(best_r);
    e1.push_back(best_e);
    spread.push_back(worst_e / best_e);
    r2.push_back(read_seconds(s.tensors, 2));
    e2.push_back(encode_seconds(p, s.tensors, 2, path, bytes));
    if (!same || bytes != first) {
      state.SkipWithError("the encodes wrote different sizes for one seed");
      break;
    }
    state.SetIterationTime(e1.back());
  }
  std::filesystem::remove(path);
  std::vector<double> enc_up, read_up, model;
  for (size_t i = 0; i < e1.size(); ++i) {
    enc_up.push_back(e1[i] / e2[i]);
    read_up.push_back(r1[i] / r2[i]);
    const double f = std::min(1.0, r1[i] / e1[i]);
    model.push_back(1 / (f / read_up.back() + (1 - f) / 2));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(s.bytes));
  state.counters["read_GBps"] = gb / median(r1);
  state.counters["enc_GBps"] = gb / median(e1);
  state.counters["read2_GBps"] = gb / median(r2);
  state.counters["enc2_GBps"] = gb / median(e2);
  state.counters["enc_per_read"] = median(per_read);
  state.counters["enc_speedup"] = median(enc_up);
  state.counters["read_speedup"] = median(read_up);
  state.counters["enc_speedup_model"] = median(model);
  state.counters["cpus"] = static_cast<double>(cpus.size());
  state.counters["enc1_cpu_spread"] = median(spread);
  state.counters["ratio"] = static_cast<double>(s.bytes) / static_cast<double>(first);
}

const bool registered = [] {
  for (const char* name : {"bird+", "topk-1pct", "signsgd", "qsgd4", "lossless"}) {
    const Preset* pr = find_preset(name);
    if (!pr) continue;
    benchmark::RegisterBenchmark((std::string("BM_snapshot/") + name).c_str(), snapshot_encode, std::string(pr->pipeline))
        ->Iterations(15)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  return true;
}();

}  // namespace
