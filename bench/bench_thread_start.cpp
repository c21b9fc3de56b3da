// What it costs to get a second thread working: a new std::thread per call (the encoder before
// the helper pool) against run_with_helpers (lib/core/helper_threads.*), in the same process,
// alternated within each iteration. The body does nothing, so a call's time is the time until
// the second thread has started and finished an empty body.
//
//   BM_thread_start/back_to_back  one call straight after another: the helper is still polling
//                                 (bird+ encodes its frame plan and then its records so).
//   BM_thread_start/after_sleep   each call after 5 ms of sleep, untimed: the helper is asleep,
//                                 as at the start of an encode (and the other CPU may be idle).
//
// Counters: new_thread_us, helpers_us (medians over the iterations) and speedup, the median of
// each iteration's new-thread time ÷ helper time.
#include <benchmark/benchmark.h>

#include "core/helper_threads.hpp"

#include <algorithm>
#include <chrono>
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
  gradcodec::run_with_helpers(2, body);  // the pool's helper exists before the first timing
  for (auto _ : state) {
    if (sleep_first) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    auto start = Clock::now();
    std::thread t(body);
    body();
    t.join();
    fresh.push_back(seconds_since(start));
    if (sleep_first) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    start = Clock::now();
    gradcodec::run_with_helpers(2, body);
    helpers.push_back(seconds_since(start));
    ratio.push_back(fresh.back() / helpers.back());
    state.SetIterationTime(helpers.back());
  }
  state.counters["new_thread_us"] = median(fresh) * 1e6;
  state.counters["helpers_us"] = median(helpers) * 1e6;
  state.counters["speedup"] = median(ratio);
}

}  // namespace

BENCHMARK_CAPTURE(thread_start, back_to_back, false)->Name("BM_thread_start/back_to_back")->Iterations(2000)->UseManualTime();
BENCHMARK_CAPTURE(thread_start, after_sleep, true)->Name("BM_thread_start/after_sleep")->Iterations(100)->UseManualTime();
