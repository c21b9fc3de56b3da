// SPDX-License-Identifier: BSD-3-Clause
// run_with_helpers (lib/core/helper_threads.*): the body runs on the asked number of threads at
// once, the helpers are the same threads from one call to the next, nested and concurrent
// calls each get their threads, and errors come back after every body has returned.
#include <catch2/catch.hpp>

#include "core/helper_threads.hpp"

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace gradcodec;

namespace {

using Clock = std::chrono::steady_clock;

// Waits until `count` has reached `n` (every body of a call has arrived) or 10 s have passed;
// true when all arrived. Bodies that did not run at the same time would never all arrive.
bool all_arrive(std::atomic<unsigned>& count, unsigned n) {
  ++count;
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (count.load() < n)
    if (Clock::now() > until) return false;
    else std::this_thread::yield();
  return true;
}

thread_local unsigned t_bodies_run = 0;  // how many bodies this thread has run, over all calls

}  // namespace

TEST_CASE("run_with_helpers: the body runs on the calling thread and threads − 1 helpers at once", "[helpers]") {
  for (unsigned threads : {1u, 2u, 3u, 5u}) {
    INFO(threads << " threads");
    std::atomic<unsigned> arrived{0}, met{0};
    std::mutex mu;
    std::set<std::thread::id> ids;
    const size_t helpers = run_with_helpers(threads, [&] {
      if (all_arrive(arrived, threads)) ++met;
      std::lock_guard<std::mutex> lk(mu);
      ids.insert(std::this_thread::get_id());
    });
    CHECK(helpers == threads - 1);
    CHECK(met == threads);
    CHECK(ids.size() == threads);
    CHECK(ids.count(std::this_thread::get_id()) == 1);
  }
}

TEST_CASE("run_with_helpers: the helpers are kept from one call to the next, awake or asleep", "[helpers]") {
  // A thread-local count survives only in a thread that is still the same thread: fresh threads
  // per call would each start at 0.
  auto call = [] {
    std::mutex mu;
    std::vector<unsigned> counts;
    run_with_helpers(3, [&] {
      const unsigned c = ++t_bodies_run;
      std::lock_guard<std::mutex> lk(mu);
      counts.push_back(c);
    });
    return counts;
  };
  call();  // the pool now has at least 2 helpers, idle
  const size_t created = helper_threads_created();
  const unsigned caller_before = t_bodies_run;
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    // Round 0 follows straight on (the helpers still polling), later rounds after a sleep much
    // longer than kHelperSpin (the helpers asleep on their condition variables).
    if (round > 0) std::this_thread::sleep_for(20 * kHelperSpin);
    const std::vector<unsigned> counts = call();
    REQUIRE(counts.size() == 3);
    for (unsigned c : counts) CHECK(c >= 2);  // every thread had run a body before
  }
  CHECK(t_bodies_run == caller_before + 3);
  CHECK(helper_threads_created() == created);
}

TEST_CASE("run_with_helpers: nested and concurrent calls each get their threads", "[helpers]") {
  SECTION("nested: each body of a 2-thread call makes a 3-thread call") {
    std::atomic<unsigned> inner_met{0}, runs{0};
    run_with_helpers(2, [&] {
      std::atomic<unsigned> arrived{0};
      run_with_helpers(3, [&] {
        ++runs;
        if (all_arrive(arrived, 3)) ++inner_met;
      });
    });
    CHECK(runs == 6);
    CHECK(inner_met == 6);
  }
  SECTION("four threads call at once, 3 threads each") {
    std::atomic<unsigned> met{0}, runs{0};
    std::vector<std::thread> callers;
    for (int k = 0; k < 4; ++k)
      callers.emplace_back([&] {
        std::atomic<unsigned> arrived{0};
        run_with_helpers(3, [&] {
          ++runs;
          if (all_arrive(arrived, 3)) ++met;
        });
      });
    for (auto& t : callers) t.join();
    CHECK(runs == 12);
    CHECK(met == 12);
  }
}

TEST_CASE("run_with_helpers: an error is rethrown once every body has returned", "[helpers]") {
  const auto caller = std::this_thread::get_id();
  SECTION("from a helper: the caller's body still runs to its end") {
    std::atomic<bool> caller_done{false};
    std::atomic<unsigned> helpers_done{0};
    try {
      run_with_helpers(3, [&] {
        if (std::this_thread::get_id() == caller) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          caller_done = true;
          return;
        }
        if (helpers_done++ == 0) throw std::runtime_error("from a helper");
      });
      FAIL("no exception");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()) == "from a helper");
    }
    CHECK(caller_done);
    CHECK(helpers_done == 2);
  }
  SECTION("from the caller and a helper: the caller's") {
    std::atomic<unsigned> helpers_done{0};
    try {
      run_with_helpers(3, [&] {
        if (std::this_thread::get_id() == caller) throw std::runtime_error("from the caller");
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        ++helpers_done;
        throw std::runtime_error("from a helper");
      });
      FAIL("no exception");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()) == "from the caller");
    }
    CHECK(helpers_done == 2);  // both helpers had finished when the call returned
  }
  // The helpers that threw are back in the pool and work.
  std::atomic<unsigned> arrived{0}, met{0};
  CHECK(run_with_helpers(3, [&] {
          if (all_arrive(arrived, 3)) ++met;
        }) == 2);
  CHECK(met == 3);
}
