// SPDX-License-Identifier: BSD-3-Clause
#include "core/helper_threads.hpp"

#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>
#include <pthread.h>

namespace gradcodec {
namespace {

// One call of run_with_helpers, on the caller's stack until every helper has reported.
struct Job {
  const std::function<void()>* body = nullptr;
  std::vector<std::exception_ptr> errors;  // one per helper
  std::atomic<size_t> remaining{0};        // helpers that have not reported
  std::mutex mu;                           // guards errors and the report; the caller takes it last
  std::condition_variable cv;
};

struct Helper {
  std::mutex mu;  // guards the hand-over of a job
  std::condition_variable cv;
  std::atomic<Job*> job{nullptr};
  size_t slot = 0;  // this helper's index in job->errors
};

struct Pool {
  std::mutex mu;
  std::vector<Helper*> idle;  // most recently idle last: the likeliest to be still polling
  size_t created = 0;
};

// Never destroyed: helpers are blocked on their condition variables when the process exits, and
// a destructor joining them would hang an exit() called while a call was running. In a child
// made by fork() none of the parent's helpers exist, so the child starts a pool of its own.
std::atomic<Pool*> g_pool{nullptr};

Pool& pool() {
  static const bool once = [] {
    g_pool.store(new Pool);
    pthread_atfork(nullptr, nullptr, [] { g_pool.store(new Pool); });
    return true;
  }();
  (void)once;
  return *g_pool.load();
}

void helper_main(Helper* h) {
  for (;;) {
    if (!poll_until([&] { return h->job.load(std::memory_order_acquire) != nullptr; })) {
      std::unique_lock<std::mutex> lk(h->mu);
      h->cv.wait(lk, [&] { return h->job.load(std::memory_order_acquire) != nullptr; });
    }
    Job* job = h->job.load(std::memory_order_acquire);
    size_t slot;
    {
      std::lock_guard<std::mutex> lk(h->mu);
      slot = h->slot;
    }
    std::exception_ptr error;
    try {
      (*job->body)();
    } catch (...) {
      error = std::current_exception();
    }
    // Idle again before reporting, so a caller that goes straight on to its next call finds it.
    h->job.store(nullptr, std::memory_order_relaxed);
    {
      Pool& p = pool();
      std::lock_guard<std::mutex> lk(p.mu);
      p.idle.push_back(h);
    }
    std::lock_guard<std::mutex> lk(job->mu);  // the caller takes job->mu before it lets job go
    job->errors[slot] = std::move(error);
    if (job->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) job->cv.notify_one();
  }
}

}  // namespace

size_t run_with_helpers(unsigned threads, const std::function<void()>& body) {
  const size_t want = threads > 1 ? threads - 1 : 0;
  std::vector<Helper*> got;
  got.reserve(want);
  Pool& p = pool();
  {
    std::lock_guard<std::mutex> lk(p.mu);
    while (got.size() < want && !p.idle.empty()) {
      got.push_back(p.idle.back());
      p.idle.pop_back();
    }
  }
  while (got.size() < want) {
    auto* h = new Helper;
    try {
      std::thread(helper_main, h).detach();
    } catch (...) {  // no more threads: the caller and the helpers it has do the work
      delete h;
      break;
    }
    got.push_back(h);
    std::lock_guard<std::mutex> lk(p.mu);
    ++p.created;
  }
  Job job;
  job.body = &body;
  job.errors.resize(got.size());
  job.remaining.store(got.size());
  for (size_t k = 0; k < got.size(); ++k) {
    {
      std::lock_guard<std::mutex> lk(got[k]->mu);
      got[k]->slot = k;
      got[k]->job.store(&job, std::memory_order_release);
    }
    got[k]->cv.notify_one();
  }
  std::exception_ptr error;
  try {
    body();
  } catch (...) {
    error = std::current_exception();
  }
  poll_until([&] { return job.remaining.load(std::memory_order_acquire) == 0; });
  {
    std::unique_lock<std::mutex> lk(job.mu);
    job.cv.wait(lk, [&] { return job.remaining.load(std::memory_order_acquire) == 0; });
  }
  if (!error)
    for (auto& e : job.errors)
      if (e) {
        error = e;
        break;
      }
  if (error) std::rethrow_exception(error);
  return got.size();
}

size_t helper_threads_created() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lk(p.mu);
  return p.created;
}

}  // namespace gradcodec
