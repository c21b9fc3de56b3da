// SPDX-License-Identifier: BSD-3-Clause
// The process's helper threads: created on first use and kept, so a call that works on several
// threads does not pay for creating them each time. On the 2-vCPU VM of docs/performance.md a
// new thread started working 0.3–0.9 ms after it was created, and a thread asleep on a
// condition variable 0.1–0.9 ms after it was woken, against an encode of a 110-tensor snapshot
// of ~8 ms on two threads; bird+ started threads twice per encode (its frame plan, then the
// records). A helper that finishes a body keeps polling for the next one for a short while
// (kHelperSpin) before it sleeps, so the second start of one encode finds it awake.
#pragma once
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

// Runs body() on the calling thread and, at the same time, on up to `threads` − 1 helpers, and
// returns when every one of them has returned. The bodies must do the same job whatever number
// of them run (each takes work from a shared queue, say): a helper that cannot be had — a
// thread that cannot be created — is skipped. Helpers idle in the pool serve first; when a call
// needs more (calls nested or on several threads at once) new helpers are created and kept.
// An exception from a body is rethrown once all have returned (the calling thread's first,
// then the helpers' in order). Returns the number of helpers that ran body. A helper keeps the
// CPU affinity of the thread that created it (as any new thread does).
size_t run_with_helpers(unsigned threads, const std::function<void()>& body);

// The helpers the pool holds now, idle or busy (for tests).
size_t helper_threads_created();

}  // namespace gradcodec
