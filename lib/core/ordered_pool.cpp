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
  auto worker = [&] {
    for (;;) {
      size_t i;
      {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] { return stop || next >= count || admit(); });
        if (stop || next >= count) return;
        i = next++;
        in_flight += bytes[i];
      }
      std::exception_ptr error;
      uint64_t keeps = bytes[i];
      try {
        keeps = std::min(work(i), bytes[i]);
      } catch (...) {
        error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lk(mu);
        in_flight -= bytes[i] - keeps;  // what the finished item no longer holds admits the next ones
        held[i] = keeps;
        if (error) stop = true;
        errors[i] = std::move(error);
        done[i] = 1;
      }
      cv.notify_all();
    }
  };
  std::vector<std::thread> pool;
  const size_t workers = std::min<size_t>(threads, count);
  pool.reserve(workers);
  std::exception_ptr failure;
  try {
    for (size_t k = 0; k < workers; ++k) pool.emplace_back(worker);
  } catch (...) {  // a thread that could not be created: stop the ones that were
    failure = std::current_exception();
  }
  for (size_t i = 0; i < count && !failure; ++i) {
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return done[i] != 0; });
      failure = errors[i];
    }
    if (!failure) {
      try {
        commit(i);
      } catch (...) {
        failure = std::current_exception();
      }
    }
    {
      std::lock_guard<std::mutex> lk(mu);
      in_flight -= held[i];
      ++committed;
      if (failure) stop = true;
    }
    cv.notify_all();
  }
  {
    std::lock_guard<std::mutex> lk(mu);
    stop = true;
  }
  cv.notify_all();
  for (auto& th : pool) th.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace gradcodec
