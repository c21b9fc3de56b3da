// SPDX-License-Identifier: BSD-3-Clause
#include "base/ordered_pool.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace gradcodec {

void run_ordered(Workers& workers, std::span<const uint64_t> bytes, unsigned threads,
                 const std::function<uint64_t(size_t)>& work, const std::function<void(size_t)>& commit,
                 CommitOn on, uint64_t min_slack, std::chrono::microseconds poll) {
  const size_t count = bytes.size();
  if (threads <= 1 || count <= 1) {
    for (size_t i = 0; i < count; ++i) {
      work(i);
      commit(i);
    }
    return;
  }
  // A byte budget rather than a count keeps small items (biases) from stalling the pool, and no
  // more big items are in flight than there are threads.
  const uint64_t largest = *std::max_element(bytes.begin(), bytes.end());
  const uint64_t budget = threads * largest + std::max(largest / 2, min_slack);
  const size_t most = 16 * static_cast<size_t>(threads);
  std::vector<char> done(count, 0);
  std::vector<uint64_t> held(bytes.begin(), bytes.end());  // what each item is counted for in in_flight
  std::vector<std::exception_ptr> errors(count);
  std::mutex mu;
  std::condition_variable cv;
  // Counts the wake-ups (each under mu): a thread with nothing to do polls it for up to `poll`
  // before it sleeps on cv.
  std::atomic<uint64_t> changes{0};
  auto wake = [&] {
    changes.fetch_add(1, std::memory_order_release);
    cv.notify_all();
  };
  size_t next = 0, committed = 0;
  uint64_t in_flight = 0;  // bytes held by the items started and not yet committed, as counted in held
  bool stop = false;
  auto admit = [&] {
    return next == committed || (next < committed + most && in_flight + bytes[next] <= budget);
  };
  // Starts item next (lk held), runs it without the lock and records how it ended.
  auto run_next = [&](std::unique_lock<std::mutex>& lk) {
    const size_t i = next++;
    in_flight += bytes[i];
    lk.unlock();
    std::exception_ptr error;
    uint64_t keeps = bytes[i];
    try {
      keeps = std::min(work(i), bytes[i]);
    } catch (...) {
      error = std::current_exception();
    }
    lk.lock();
    in_flight -= bytes[i] - keeps;  // what the finished item no longer holds admits the next ones
    held[i] = keeps;
    if (error) stop = true;
    errors[i] = std::move(error);
    done[i] = 1;
  };
  std::exception_ptr failure;  // the lowest failing item's error, or a commit's
  bool committing = false;     // a thread is committing the head items
  // Commits the finished items at the head, in order (lk held; released around each commit).
  auto commit_head = [&](std::unique_lock<std::mutex>& lk) {
    committing = true;
    while (!failure && committed < count && done[committed]) {
      const size_t i = committed;
      if (errors[i]) {
        failure = errors[i];
        break;
      }
      lk.unlock();
      std::exception_ptr error;
      try {
        commit(i);
      } catch (...) {
        error = std::current_exception();
      }
      lk.lock();
      in_flight -= held[i];  // what item i held admits the next ones
      ++committed;
      if (error) failure = error;
      wake();
    }
    if (failure) stop = true;
    committing = false;
  };
  // Every thread, the caller included: commit the head items when this thread may and no other
  // is, else start the next item when it is admitted, else wait. A worker leaves when no item is
  // left to start (the threads still working commit what they finish); the caller stays until
  // every item is committed or one has failed.
  auto loop = [&](bool caller) {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      if ((caller || on == CommitOn::AnyThread) && !committing && !failure && committed < count && done[committed]) {
        commit_head(lk);
        wake();  // a failure ends the caller's wait
        continue;
      }
      if (failure || committed == count) return;
      if (!stop && next < count && admit()) {
        run_next(lk);
        wake();
        continue;
      }
      if (!caller && (stop || next >= count)) return;
      const uint64_t seen = changes.load(std::memory_order_relaxed);
      if (poll.count() > 0) {
        lk.unlock();
        poll_until([&] { return changes.load(std::memory_order_acquire) != seen; }, poll);
        lk.lock();
      }
      if (changes.load(std::memory_order_relaxed) == seen) cv.wait(lk);  // nothing changed while it polled
    }
  };
  // The calling thread runs loop(true), the helpers loop(false); a helper that cannot be had
  // leaves its share to the others.
  const std::thread::id caller = std::this_thread::get_id();
  run_with_helpers(workers, static_cast<unsigned>(std::min<size_t>(threads, count)), [&] {
    if (std::this_thread::get_id() != caller) return loop(false);
    loop(true);
    {
      std::lock_guard<std::mutex> lk(mu);
      stop = true;
      wake();
    }
  });
  if (failure) std::rethrow_exception(failure);
}

}  // namespace gradcodec
