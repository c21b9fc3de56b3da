// SPDX-License-Identifier: BSD-3-Clause
#include "base/workers.hpp"

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>
#include <unistd.h>

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
  std::mutex mu;  // guards the hand-over of a job, and quit
  std::condition_variable cv;
  std::atomic<Job*> job{nullptr};
  std::atomic<bool> quit{false};  // set by ~Workers while the helper is idle: it returns
  size_t slot = 0;                // this helper's index in job->errors
  std::thread thread;
};

}  // namespace

struct Workers::State {
  pid_t pid = ::getpid();  // the process whose threads `all` are
  std::mutex mu;           // guards idle and all
  std::vector<Helper*> idle;  // most recently idle last: the likeliest to be still polling
  std::vector<std::unique_ptr<Helper>> all;
  // The state fork() copied from the parent, left as it was (its helpers do not exist here and
  // its mutexes may be held): never used, joined or freed.
  State* parent = nullptr;
};

namespace {

void helper_main(Workers::State* s, Helper* h) {
  auto ready = [h] {
    return h->job.load(std::memory_order_acquire) != nullptr || h->quit.load(std::memory_order_acquire);
  };
  for (;;) {
    if (!poll_until(ready)) {
      std::unique_lock<std::mutex> lk(h->mu);
      h->cv.wait(lk, ready);
    }
    if (h->quit.load(std::memory_order_acquire)) return;
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
      std::lock_guard<std::mutex> lk(s->mu);
      s->idle.push_back(h);
    }
    std::lock_guard<std::mutex> lk(job->mu);  // the caller takes job->mu before it lets job go
    job->errors[slot] = std::move(error);
    if (job->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) job->cv.notify_one();
  }
}

}  // namespace

Workers::Workers() : state_(new State) {}

Workers::~Workers() {
  State* s = state_.load(std::memory_order_acquire);
  if (s->pid != ::getpid()) return;  // copied from the parent by fork(): its threads are not ours
  // No call is running, so every helper is idle (or about to poll again).
  for (auto& h : s->all) {
    {
      std::lock_guard<std::mutex> lk(h->mu);
      h->quit.store(true, std::memory_order_release);
    }
    h->cv.notify_one();
  }
  for (auto& h : s->all) h->thread.join();
  delete s;
}

Workers::State& Workers::state() const {
  State* s = state_.load(std::memory_order_acquire);
  const pid_t pid = ::getpid();
  if (s->pid == pid) return *s;
  // A child made by fork(): helpers of its own. When threads of the child race here, one state
  // wins and the others use it.
  auto fresh = std::make_unique<State>();
  fresh->parent = s;
  if (state_.compare_exchange_strong(s, fresh.get(), std::memory_order_acq_rel)) return *fresh.release();
  return *s;
}

std::shared_ptr<Workers> make_workers() { return std::make_shared<Workers>(); }

size_t Workers::helpers() const {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  return s.all.size();
}

size_t run_with_helpers(Workers& workers, unsigned threads, const std::function<void()>& body) {
  const size_t want = threads > 1 ? threads - 1 : 0;
  if (want == 0) {
    body();
    return 0;
  }
  Workers::State& s = workers.state();
  std::vector<Helper*> got;
  got.reserve(want);
  {
    std::lock_guard<std::mutex> lk(s.mu);
    while (got.size() < want && !s.idle.empty()) {
      got.push_back(s.idle.back());
      s.idle.pop_back();
    }
  }
  while (got.size() < want) {
    auto h = std::make_unique<Helper>();
    try {
      h->thread = std::thread(helper_main, &s, h.get());
    } catch (...) {  // no more threads: the caller and the helpers it has do the work
      break;
    }
    got.push_back(h.get());
    std::lock_guard<std::mutex> lk(s.mu);
    s.all.push_back(std::move(h));
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

}  // namespace gradcodec
