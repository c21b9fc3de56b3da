// SPDX-License-Identifier: BSD-3-Clause
// What it costs to get another thread working, in the same process, alternated within each
// iteration.
//
// Starting a second thread: a new std::thread per call (the encoder before the helper pool)
// against run_with_helpers on one Workers (lib/base/workers.*). The body does nothing, so a
// call's time is the time until the second thread has started and finished an empty body.
//
//   BM_thread_start/back_to_back  one call straight after another: the helper is still polling
//                                 (bird+ encodes its frame plan and then its records so).
//   BM_thread_start/after_sleep   each call after 5 ms of sleep, untimed: the helper is asleep,
//                                 as at the start of an encode (and the other CPU may be idle).
//   Counters: new_thread_us, helpers_us (medians over the iterations) and speedup, the median of
//   each iteration's new-thread time ÷ helper time.
//
// Waking a waiting thread: run_ordered (lib/base/ordered_pool.*) on 2 threads, committing on any
// thread, over 256 items of 20,000 steps of arithmetic each whose commit takes 5,000; each item
// holds its bytes until its commit, so the memory budget lets ~2 run at a time and a thread often
// waits for a commit (as lossless's encode waits on its records).
//
//   BM_ordered_pool               its threads poll before they sleep (the default) against
//                                 sleep at once (poll 0).
//   Counters: sleep_us, poll_us (medians) and speedup, the median of each iteration's sleep
//   time ÷ poll time.
#include <benchmark/benchmark.h>

#include "base/ordered_pool.hpp"
#include "base/workers.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

void thread_start(benchmark::State& state, bool sleep_first) {
  const auto body = [] { benchmark::ClobberMemory(); };
  std::vector<double> fresh, helpers, ratio;
  gradcodec::Workers workers;
  gradcodec::run_with_helpers(workers, 2, body);  // the helper exists before the first timing
  for (auto _ : state) {
    if (sleep_first) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    auto start = Clock::now();
    std::thread t(body);
    body();
    t.join();
    fresh.push_back(seconds_since(start));
    if (sleep_first) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    start = Clock::now();
    gradcodec::run_with_helpers(workers, 2, body);
    helpers.push_back(seconds_since(start));
    ratio.push_back(fresh.back() / helpers.back());
    state.SetIterationTime(helpers.back());
  }
  state.counters["new_thread_us"] = median(fresh) * 1e6;
  state.counters["helpers_us"] = median(helpers) * 1e6;
  state.counters["speedup"] = median(ratio);
}

// `steps` dependent multiply-adds: work that takes the same time whatever the memory does.
uint64_t arithmetic(uint64_t seed, int steps) {
  for (int k = 0; k < steps; ++k) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    benchmark::DoNotOptimize(seed);
  }
  return seed;
}

double ordered_seconds(gradcodec::Workers& workers, std::chrono::microseconds poll, std::vector<uint64_t>& sums) {
  const size_t n = sums.size();
  const std::vector<uint64_t> bytes(n, 1 << 20);
  const auto start = Clock::now();
  gradcodec::run_ordered(
      workers, bytes, 2, [&](size_t i) -> uint64_t {
        sums[i] = arithmetic(i, 20000);
        return bytes[i];
      },
      [&](size_t i) { sums[i] = arithmetic(sums[i], 5000); }, gradcodec::CommitOn::AnyThread, 0, poll);
  return seconds_since(start);
}

void ordered_pool(benchmark::State& state) {
  std::vector<uint64_t> sums(256);
  std::vector<double> sleep, poll, ratio;
  gradcodec::Workers workers;
  ordered_seconds(workers, gradcodec::kHelperSpin, sums);  // the helper exists before the first timing
  for (auto _ : state) {
    sleep.push_back(ordered_seconds(workers, std::chrono::microseconds(0), sums));
    poll.push_back(ordered_seconds(workers, gradcodec::kHelperSpin, sums));
    ratio.push_back(sleep.back() / poll.back());
    state.SetIterationTime(poll.back());
  }
  benchmark::DoNotOptimize(sums.data());
  state.counters["sleep_us"] = median(sleep) * 1e6;
  state.counters["poll_us"] = median(poll) * 1e6;
  state.counters["speedup"] = median(ratio);
}

}  // namespace

BENCHMARK(ordered_pool)->Name("BM_ordered_pool")->Iterations(50)->UseManualTime();
BENCHMARK_CAPTURE(thread_start, back_to_back, false)->Name("BM_thread_start/back_to_back")->Iterations(2000)->UseManualTime();
BENCHMARK_CAPTURE(thread_start, after_sleep, true)->Name("BM_thread_start/after_sleep")->Iterations(100)->UseManualTime();
