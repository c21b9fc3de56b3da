// SPDX-License-Identifier: BSD-3-Clause
// What a second thread can add on this machine, whatever the code: three loops that touch no
// memory, each run on one thread and then on two threads at once (each thread doing the same
// amount of work as the one), the two alternated within each iteration.
//
//   BM_two_threads/latency_bound     one chain of dependent integer multiply-adds: each step
//                                    waits for the last, so a core's execution units stay
//                                    mostly idle.
//   BM_two_threads/scalar_throughput eight independent integer chains: the core's integer units
//                                    kept busy.
//   BM_two_threads/vector_throughput twelve independent chains of 8-float AVX2 fused
//                                    multiply-adds (skipped on a CPU without AVX2 and FMA).
//
// Counter `speedup`: the median over the iterations of 2 × (one-thread time) ÷ (two-thread
// time), the work done per second by two threads against one. Two cores of their own give 2
// for all three; two hardware threads of one core (as a hypervisor may hand out vCPUs) give
// about 2 for the latency-bound loop only, and less the more a loop keeps the core busy. An
// encoder bound by arithmetic cannot gain more from `--threads 2` than these loops do.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;

__attribute__((noinline)) uint64_t latency_bound(int64_t n) {
  uint64_t a = 1;
  for (int64_t i = 0; i < n; ++i) {
    a = a * 6364136223846793005ULL + static_cast<uint64_t>(i);
    asm volatile("" : "+r"(a));
  }
  return a;
}

__attribute__((noinline)) uint64_t scalar_throughput(int64_t n) {
  uint64_t a0 = 1, a1 = 2, a2 = 3, a3 = 4, a4 = 5, a5 = 6, a6 = 7, a7 = 8;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t u = static_cast<uint64_t>(i);
    a0 = a0 * 3 + u, a1 = a1 * 5 + u, a2 = a2 * 7 + u, a3 = a3 * 9 + u;
    a4 = a4 * 11 + u, a5 = a5 * 13 + u, a6 = a6 * 15 + u, a7 = a7 * 17 + u;
    asm volatile("" : "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3), "+r"(a4), "+r"(a5), "+r"(a6), "+r"(a7));
  }
  return a0 ^ a1 ^ a2 ^ a3 ^ a4 ^ a5 ^ a6 ^ a7;
}

#if defined(__x86_64__)
__attribute__((noinline, target("avx2,fma"))) uint64_t vector_throughput(int64_t n) {
  __m256 a[12];
  for (int k = 0; k < 12; ++k) a[k] = _mm256_set1_ps(1.0f + 1e-3f * static_cast<float>(k));
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < n; ++i)
    for (int k = 0; k < 12; ++k) a[k] = _mm256_fmadd_ps(a[k], m, c);
  __m256 s = a[0];
  for (int k = 1; k < 12; ++k) s = _mm256_add_ps(s, a[k]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return static_cast<uint64_t>(out[0]);
}
bool has_avx2_fma() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
#endif

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

void two_threads(benchmark::State& state, uint64_t (*loop)(int64_t), int64_t n) {
  if (!loop) {
    state.SkipWithError("needs AVX2 and FMA");
    return;
  }
  std::vector<double> ratio;
  uint64_t sink = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    sink += loop(n);
    const auto t1 = Clock::now();
    uint64_t other = 0;
    std::thread helper([&] { other = loop(n); });
    sink += loop(n);
    helper.join();
    sink += other;
    const auto t2 = Clock::now();
    state.SetIterationTime(seconds(t1, t2));
    ratio.push_back(2 * seconds(t0, t1) / seconds(t1, t2));
  }
  benchmark::DoNotOptimize(sink);
  std::sort(ratio.begin(), ratio.end());
  state.counters["speedup"] = ratio.empty() ? 0 : ratio[ratio.size() / 2];
}

// Loop lengths: one loop run long enough to time with the steady clock, short enough for 15
// iterations of the one- and two-thread runs (a run's time: docs/performance.md, "Figures behind
// design choices").
const bool registered = [] {
  auto add = [](const char* name, uint64_t (*loop)(int64_t), int64_t n) {
    benchmark::RegisterBenchmark(name, two_threads, loop, n)->Iterations(15)->UseManualTime()->Unit(benchmark::kMillisecond);
  };
  add("BM_two_threads/latency_bound", latency_bound, 40000000);
  add("BM_two_threads/scalar_throughput", scalar_throughput, 24000000);
#if defined(__x86_64__)
  add("BM_two_threads/vector_throughput", has_avx2_fma() ? vector_throughput : nullptr, 12000000);
#else
  add("BM_two_threads/vector_throughput", nullptr, 0);
#endif
  return true;
}();

}  // namespace
