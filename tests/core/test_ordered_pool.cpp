// SPDX-License-Identifier: BSD-3-Clause
// run_ordered (lib/base/ordered_pool.*): commits in order whatever order the work finishes in,
// the lowest failing index's error whatever the thread count, the memory budget kept.
#include <catch2/catch.hpp>

#include "base/ordered_pool.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace gradcodec;

namespace {

// Work whose duration falls with the index, so later items finish before earlier ones.
void busy(size_t i, size_t n) { std::this_thread::sleep_for(std::chrono::microseconds(50 * (n - i))); }

// The helpers of every call here (joined at exit, when no call runs).
Workers helpers;

// Both ways of committing: on the calling thread only (the decoder), on any thread (the encoder).
const CommitOn kModes[] = {CommitOn::Caller, CommitOn::AnyThread};

}  // namespace

TEST_CASE("run_ordered: every item worked once and committed in order, for 1 to 5 threads", "[pool]") {
  for (unsigned threads : {1u, 2u, 3u, 5u})
  for (CommitOn on : kModes) {
    INFO(threads << " threads, commit on " << (on == CommitOn::Caller ? "caller" : "any thread"));
    const size_t n = 40;
    std::atomic<int> committing{0};
    std::vector<uint64_t> bytes(n, 100);
    std::vector<std::atomic<int>> worked(n);
    std::vector<size_t> committed;
    std::mutex mu;
    std::vector<std::thread::id> workers;
    const auto caller = std::this_thread::get_id();
    run_ordered(
        helpers, bytes, threads,
        [&](size_t i) {
          busy(i, n);
          ++worked[i];
          std::lock_guard<std::mutex> lk(mu);
          workers.push_back(std::this_thread::get_id());
          return bytes[i];
        },
        [&](size_t i) {
          CHECK(committing.fetch_add(1) == 0);  // never two commits at once
          CHECK(worked[i] == 1);                // commit(i) only after work(i) returned
          if (on == CommitOn::Caller) CHECK(std::this_thread::get_id() == caller);
          committed.push_back(i);
          committing.fetch_sub(1);
        },
        on);
    for (size_t i = 0; i < n; ++i) CHECK(worked[i] == 1);
    REQUIRE(committed.size() == n);
    for (size_t i = 0; i < n; ++i) CHECK(committed[i] == i);
    // One thread: everything on the caller; more: the work on `threads` threads, the caller one
    // of them (it works when no finished item waits for its commit).
    std::sort(workers.begin(), workers.end());
    const size_t distinct = static_cast<size_t>(std::unique(workers.begin(), workers.end()) - workers.begin());
    CHECK(distinct <= threads);
    if (threads == 1) CHECK(distinct == 1);
  }
}

TEST_CASE("run_ordered: the lowest failing item's error, after every earlier commit, for any thread count",
          "[pool]") {
  for (unsigned threads : {1u, 2u, 3u, 5u})
  for (CommitOn on : kModes) {
    INFO(threads << " threads, commit on " << (on == CommitOn::Caller ? "caller" : "any thread"));
    const size_t n = 30;
    std::vector<uint64_t> bytes(n, 1);
    std::vector<size_t> committed;
    std::atomic<size_t> started_after{0};
    try {
      run_ordered(
          helpers, bytes, threads,
          [&](size_t i) {
            busy(i, n);
            if (i > 20) ++started_after;
            if (i == 7 || i == 9) throw std::runtime_error("item " + std::to_string(i));
            return bytes[i];
          },
          [&](size_t i) { committed.push_back(i); }, on);
      FAIL("no error");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()) == "item 7");
    }
    REQUIRE(committed.size() == 7);
    for (size_t i = 0; i < 7; ++i) CHECK(committed[i] == i);
    // Once the failure is seen no item is started. Equal items: at most `threads` of them are in
    // flight (the byte budget), so nothing past 7 + threads ever starts.
    CHECK(started_after == 0);
  }
}

TEST_CASE("run_ordered: an error from commit stops the pool and is rethrown", "[pool]") {
  for (unsigned threads : {1u, 2u, 4u})
  for (CommitOn on : kModes) {
    INFO(threads << " threads, commit on " << (on == CommitOn::Caller ? "caller" : "any thread"));
    const size_t n = 100;
    std::vector<uint64_t> bytes(n, 1);
    std::atomic<size_t> worked{0};
    std::vector<size_t> committed;
    CHECK_THROWS_WITH(run_ordered(
                          helpers, bytes, threads,
                          [&](size_t i) {
                            ++worked;
                            return bytes[i];
                          },
                          [&](size_t i) {
                            if (i == 3) throw std::runtime_error("sink full");
                            committed.push_back(i);
                          },
                          on),
                      "sink full");
    CHECK(committed == std::vector<size_t>{0, 1, 2});
    CHECK(worked <= 4 + threads);  // 0..3 and what was admitted before the stop: `threads` equal items
  }
}

TEST_CASE("run_ordered: items in flight stay within (threads + 1/2) x the largest, 16 x threads of them",
          "[pool]") {
  // Sizes: many small items between a few large ones. The largest item is always admitted when
  // it is the next to commit, so the pool never stalls.
  std::vector<uint64_t> bytes;
  for (int k = 0; k < 6; ++k) {
    bytes.push_back(1000);
    for (int j = 0; j < 10; ++j) bytes.push_back(10);
    bytes.push_back(600);
  }
  for (unsigned threads : {2u, 3u})
  for (CommitOn on : kModes) {
    INFO(threads << " threads, commit on " << (on == CommitOn::Caller ? "caller" : "any thread"));
    const uint64_t budget = threads * 1000 + 500;
    std::mutex mu;
    uint64_t in_flight = 0, peak_bytes = 0;
    size_t items = 0, peak_items = 0;
    run_ordered(
        helpers, bytes, threads,
        [&](size_t i) {
          {
            std::lock_guard<std::mutex> lk(mu);
            in_flight += bytes[i];
            ++items;
            peak_bytes = std::max(peak_bytes, in_flight);
            peak_items = std::max(peak_items, items);
          }
          busy(i % 12, 12);
          return bytes[i];
        },
        [&](size_t i) {
          std::lock_guard<std::mutex> lk(mu);
          in_flight -= bytes[i];
          --items;
        },
        on);
    CHECK(peak_bytes <= budget);
    CHECK(peak_items <= 16 * threads);
    CHECK(peak_items >= 2);  // and it did run items at once
  }
}

TEST_CASE("run_ordered: what a finished item no longer holds admits the next ones; the count cap stays",
          "[pool]") {
  // Equal items of 100 bytes, two threads: budget 250, so two at a time while each holds its
  // bytes. Items that keep nothing once worked (an encoder's small records) free their share
  // when they finish: while item 0 is still running, items 1, 2, 3, … run one after another on
  // the other thread. Item 0 waits (at most 10 s, never a hang) until item 3 has been worked;
  // counted as held for the whole wait, items 2 and 3 could not start before item 0 commits.
  for (CommitOn on : kModes) {
    INFO("commit on " << (on == CommitOn::Caller ? "caller" : "any thread"));
    const size_t n = 40;
    std::vector<uint64_t> bytes(n, 100);
    std::mutex mu;
    std::condition_variable cv;
    size_t worked_past = 0;  // items > 0 worked
    bool saw_item3 = false;
    size_t waiting = 0, peak_waiting = 0;  // items worked and not yet committed
    uint64_t charged = 0, peak_charged = 0;  // running items' bytes + finished items' holdings
    std::thread::id work0, commit0;
    const auto caller = std::this_thread::get_id();
    run_ordered(
        helpers, bytes, 2,
        [&](size_t i) -> uint64_t {
          std::unique_lock<std::mutex> lk(mu);
          if (i == 0) work0 = std::this_thread::get_id();
          charged += bytes[i];
          peak_charged = std::max(peak_charged, charged);
          if (i == 0) {
            saw_item3 = cv.wait_for(lk, std::chrono::seconds(10), [&] { return worked_past >= 3; });
          } else {
            ++worked_past;
            cv.notify_all();
          }
          const uint64_t keeps = i == 0 ? 100 : (i % 7 == 0 ? 500 : 0);  // more than bytes[i] counts as bytes[i]
          charged -= bytes[i] - std::min(keeps, bytes[i]);
          ++waiting;
          peak_waiting = std::max(peak_waiting, waiting);
          return keeps;
        },
        [&](size_t i) {
          std::lock_guard<std::mutex> lk(mu);
          if (i == 0) commit0 = std::this_thread::get_id();
          charged -= i == 0 ? 100 : (i % 7 == 0 ? 100 : 0);
          --waiting;
        },
        on);
    CHECK(saw_item3);
    CHECK(charged == 0);
    CHECK(peak_charged <= 250);  // the budget, by what the items hold
    CHECK(peak_waiting <= 32);   // 16 × threads items started and not committed
    // Caller: every commit on the calling thread. Any thread: the thread that finishes the head
    // item commits it (and the finished items behind it) at once, whichever thread that is.
    CHECK(commit0 == (on == CommitOn::Caller ? caller : work0));
  }
}

namespace {

// Two threads over n items of 100 bytes; item 0 runs until `behind` items after it have been
// worked (at most 10 s, never a hang), then gives the other thread 50 ms more. Items 1.. keep
// all their bytes until their commit when `hold`, nothing once worked otherwise. Returns how
// many items item 0 saw worked when it finished, or 0 if they never came.
size_t worked_behind_slow_head(size_t n, size_t behind, bool hold, CommitOn on, uint64_t min_slack) {
  std::vector<uint64_t> bytes(n, 100);
  std::mutex mu;
  std::condition_variable cv;
  size_t worked_past = 0, seen = 0;
  bool reached = false;
  run_ordered(
      helpers, bytes, 2,
      [&](size_t i) -> uint64_t {
        std::unique_lock<std::mutex> lk(mu);
        if (i == 0) {
          reached = cv.wait_for(lk, std::chrono::seconds(10), [&] { return worked_past >= behind; });
          cv.wait_for(lk, std::chrono::milliseconds(50), [&] { return worked_past > behind; });
          seen = worked_past;
        } else {
          ++worked_past;
          cv.notify_all();
        }
        return hold ? bytes[i] : 0;
      },
      [&](size_t) {}, on, min_slack);
  CHECK(worked_past == n - 1);
  return reached ? seen : 0;
}

}  // namespace

TEST_CASE("run_ordered: 16 x threads items that hold nothing run behind a slow head item, and no more",
          "[pool]") {
  // Items 1.. keep nothing once worked, so the byte budget never binds: the count does. 16 × 2 =
  // 32 items may be started and not committed, item 0 among them, so exactly 31 are worked
  // before item 0 finishes. (With a cap of 4 × threads, as before, only 7 could be, and the
  // other thread slept: on a snapshot of conv weights and their biases it did, every few
  // tensors.)
  for (CommitOn on : kModes) {
    INFO("commit on " << (on == CommitOn::Caller ? "caller" : "any thread"));
    CHECK(worked_behind_slow_head(60, 31, false, on, 0) == 31);
  }
}

TEST_CASE("run_ordered: min_slack raises the budget above threads x largest + largest / 2", "[pool]") {
  // Items that hold their 100 bytes until their commit: budget 200 + max(50, min_slack). 250
  // admits one item behind item 0 (a min_slack under 50 changes nothing); 650 admits five.
  for (CommitOn on : kModes)
  for (auto [slack, behind] : {std::pair<uint64_t, size_t>{0, 1}, {40, 1}, {450, 5}}) {
    INFO("commit on " << (on == CommitOn::Caller ? "caller" : "any thread") << ", min_slack " << slack);
    CHECK(worked_behind_slow_head(20, behind, true, on, slack) == behind);
  }
}

TEST_CASE("run_ordered: no items, one item", "[pool]") {
  run_ordered(
      helpers, {}, 3,
      [](size_t) -> uint64_t {
        FAIL("no item");
        return 0;
      },
      [](size_t) { FAIL("no item"); });
  std::vector<uint64_t> one = {0};
  std::vector<int> calls;
  run_ordered(
      helpers, one, 4,
      [&](size_t) {
        calls.push_back(1);
        return uint64_t{0};
      },
      [&](size_t) { calls.push_back(2); });
  CHECK(calls == std::vector<int>{1, 2});
}
