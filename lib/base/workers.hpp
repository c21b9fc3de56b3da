// SPDX-License-Identifier: BSD-3-Clause
// Helper threads that belong to an owner (an encoder, a decoder, or one object an owner shares
// between them): created on first use and kept by their Workers object, so a call that works on
// several threads does not pay for creating them each time, and joined when it is destroyed. A
// helper that finishes a body keeps polling for the next one for a short while (kHelperSpin)
// before it sleeps, so a second call soon after the first (bird+'s frame plan, then its records)
// finds it awake. What starting and waking a thread costs is measured in docs/performance.md
// ("Helper threads").
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <thread>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace gradcodec {

// How long a helper polls for its next body before sleeping, and how long the caller polls for
// the helpers to finish before sleeping.
inline constexpr std::chrono::microseconds kHelperSpin{500};

// Polls ready() until it holds (true) or `limit` has passed (false; with 0, ready() once). It
// gives the CPU away now and then, so a poller does not keep a runnable thread from its CPU
// when there are more threads than CPUs.
template <class Ready>
bool poll_until(Ready ready, std::chrono::microseconds limit = kHelperSpin) {
  if (limit.count() <= 0) return ready();
  const auto until = std::chrono::steady_clock::now() + limit;
  for (unsigned k = 1;; ++k) {
    if (ready()) return true;
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
    if (k % 64 == 0) {
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::yield();
    }
  }
}

// The helper threads of one owner. No thread exists until run_with_helpers needs one; the
// destructor wakes and joins every helper, so none is left once the owner is gone. Calls of
// run_with_helpers on one Workers may be nested or made from several threads at once; none may
// be running when it is destroyed.
//
// fork(): a child has only the thread that called fork(), so the helpers a Workers held in the
// parent do not exist there (and the locks they shared may have been copied held). A Workers
// used in a child leaves that copy alone (its memory stays allocated, its threads are not
// joined) and starts helpers of its own in the child, joined as usual by its destructor.
class Workers {
 public:
  Workers();
  ~Workers();
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;

  // The helpers it holds in this process now, idle or busy (for tests).
  size_t helpers() const;

  struct State;  // the helpers of one process (workers.cpp)

 private:
  friend size_t run_with_helpers(Workers& workers, unsigned threads, const std::function<void()>& body);
  State& state() const;                // this process's, started afresh in a child made by fork()
  mutable std::atomic<State*> state_;  // owned unless it was copied from a parent by fork()
};

// Runs body() on the calling thread and, at the same time, on up to `threads` − 1 of the
// helpers of `workers`, and returns when every one of them has returned. The bodies must do the
// same job whatever number of them run (each takes work from a shared queue, say): a helper that
// cannot be had — a thread that cannot be created — is skipped. Helpers idle in `workers` serve
// first; when a call needs more (calls nested or on several threads at once) new helpers are
// created and kept. An exception from a body is rethrown once all have returned (the calling
// thread's first, then the helpers' in order). Returns the number of helpers that ran body. A
// helper keeps the CPU affinity of the thread that created it (as any new thread does).
size_t run_with_helpers(Workers& workers, unsigned threads, const std::function<void()>& body);

}  // namespace gradcodec
