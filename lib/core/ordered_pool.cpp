#include "core/ordered_pool.hpp"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace gradcodec {

void run_ordered(std::span<const uint64_t> bytes, unsigned threads, const std::function<uint64_t(size_t)>& work,
                 const std::function<void(size_t)>& commit) {
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
  const uint64_t budget = threads * largest + largest / 2;
  const size_t most = 4 * static_cast<size_t>(threads);
  std::vector<char> done(count, 0);
  std::vector<uint64_t> held(bytes.begin(), bytes.end());  // what each item is counted for in in_flight
  std::vector<std::exception_ptr> errors(count);
  std::mutex mu;
  std::condition_variable cv;
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
  auto worker = [&] {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      cv.wait(lk, [&] { return stop || next >= count || admit(); });
      if (stop || next >= count) return;
      run_next(lk);
      cv.notify_all();
    }
  };
  // The calling thread is one of the `threads`: it commits every finished item at the head,
  // works on the next item when there is none, and waits only when it can do neither. (With a
  // committing thread of its own beside `threads` workers, two vCPUs ran three threads, and every
  // item finished woke the committer.)
  std::vector<std::thread> pool;
  pool.reserve(std::min<size_t>(threads, count) - 1);
  try {
    for (size_t k = 1; k < std::min<size_t>(threads, count); ++k) pool.emplace_back(worker);
  } catch (...) {  // a thread that could not be created: the calling thread and those that were do the work
  }
  std::exception_ptr failure;
  {
    std::unique_lock<std::mutex> lk(mu);
    while (committed < count && !failure) {
      if (done[committed]) {
        const size_t i = committed;
        failure = errors[i];
        if (failure) break;
        lk.unlock();
        try {
          commit(i);
        } catch (...) {
          failure = std::current_exception();
        }
        lk.lock();
        in_flight -= held[i];
        ++committed;
        cv.notify_all();  // what item i held admits the next ones
      } else if (!stop && next < count && admit()) {
        run_next(lk);
      } else {
        cv.wait(lk);  // a worker finishes an item
      }
    }
    stop = true;
  }
  cv.notify_all();
  for (auto& th : pool) th.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace gradcodec
