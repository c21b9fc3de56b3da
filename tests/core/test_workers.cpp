// SPDX-License-Identifier: BSD-3-Clause
// run_with_helpers on a Workers (lib/base/workers.*): the body runs on the asked number of
// threads at once, the helpers are the same threads from one call to the next, nested and
// concurrent calls each get their threads, errors come back after every body has returned, the
// helpers are joined when their Workers is destroyed, and a Workers works in a child of fork().
#include <catch2/catch.hpp>

#include "thread_census.hpp"

#include "base/workers.hpp"

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
#include <sys/wait.h>
#include <unistd.h>

using namespace gradcodec;
using gradcodec::test::thread_count;
using gradcodec::test::threads_back_to;

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
  Workers workers;
  for (unsigned threads : {1u, 2u, 3u, 5u}) {
    INFO(threads << " threads");
    std::atomic<unsigned> arrived{0}, met{0};
    std::mutex mu;
    std::set<std::thread::id> ids;
    const size_t helpers = run_with_helpers(workers, threads, [&] {
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
  Workers workers;
  auto call = [&] {
    std::mutex mu;
    std::vector<unsigned> counts;
    run_with_helpers(workers, 3, [&] {
      const unsigned c = ++t_bodies_run;
      std::lock_guard<std::mutex> lk(mu);
      counts.push_back(c);
    });
    return counts;
  };
  call();  // `workers` now has 2 helpers, idle
  const size_t created = workers.helpers();
  CHECK(created == 2);
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
  CHECK(workers.helpers() == created);
}

TEST_CASE("run_with_helpers: nested and concurrent calls each get their threads", "[helpers]") {
  Workers workers;
  SECTION("nested: each body of a 2-thread call makes a 3-thread call") {
    std::atomic<unsigned> inner_met{0}, runs{0};
    run_with_helpers(workers, 2, [&] {
      std::atomic<unsigned> arrived{0};
      run_with_helpers(workers, 3, [&] {
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
        run_with_helpers(workers, 3, [&] {
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
  Workers workers;
  const auto caller = std::this_thread::get_id();
  SECTION("from a helper: the caller's body still runs to its end") {
    std::atomic<bool> caller_done{false};
    std::atomic<unsigned> helpers_done{0};
    try {
      run_with_helpers(workers, 3, [&] {
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
      run_with_helpers(workers, 3, [&] {
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
  CHECK(run_with_helpers(workers, 3, [&] {
          if (all_arrive(arrived, 3)) ++met;
        }) == 2);
  CHECK(met == 3);
}


TEST_CASE("Workers: its helpers are joined when it is destroyed, awake or asleep", "[helpers]") {
  const size_t before = thread_count();
  for (bool asleep : {false, true}) {
    INFO((asleep ? "helpers asleep" : "helpers still polling"));
    {
      Workers workers;
      std::atomic<unsigned> arrived{0}, met{0};
      run_with_helpers(workers, 4, [&] {
        if (all_arrive(arrived, 4)) ++met;
      });
      CHECK(met == 4);
      CHECK(workers.helpers() == 3);
      CHECK(thread_count() == before + 3);
      if (asleep) std::this_thread::sleep_for(20 * kHelperSpin);
    }
    CHECK(threads_back_to(before));
  }
}

TEST_CASE("Workers: used in a child of fork(), it starts helpers of its own there", "[helpers][fork]") {
  Workers workers;
  std::atomic<unsigned> arrived{0};
  run_with_helpers(workers, 3, [&] { all_arrive(arrived, 3); });  // two helpers in the parent
  REQUIRE(workers.helpers() == 2);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // no Catch2 here: the exit status says what went wrong
    int status = 0;
    if (workers.helpers() != 0) status |= 1;  // the parent's helpers are not this process's
    std::atomic<unsigned> in_child{0}, met{0};
    const size_t got = run_with_helpers(workers, 3, [&] {
      if (all_arrive(in_child, 3)) ++met;
    });
    if (got != 2 || met != 3) status |= 2;  // three threads at once in the child
    if (workers.helpers() != 2 || thread_count() != 3) status |= 4;
    ::_exit(status);
  }
  // The child runs in well under a second; a child stuck waiting for the parent's helpers is
  // killed after 10 s.
  int status = -1;
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (::waitpid(child, &status, WNOHANG) == 0) {
    if (Clock::now() > until) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      FAIL("the child did not finish in 10 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // The parent's helpers are untouched by the child.
  std::atomic<unsigned> again{0}, met{0};
  CHECK(run_with_helpers(workers, 3, [&] {
          if (all_arrive(again, 3)) ++met;
        }) == 2);
  CHECK(met == 3);
  CHECK(workers.helpers() == 2);
}
