// SPDX-License-Identifier: BSD-3-Clause
// Work on a pool of threads, results taken in order: the encoder's and the decoder's way of
// using several cores without letting the thread count change what is written or which error
// is reported, and without letting memory grow with the number of tensors.
#pragma once
#include "base/workers.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

namespace gradcodec {

// Runs work(i) for every i in [0, bytes.size()) on `threads` threads, the calling thread one of
// them, and commit(i) for i = 0, 1, 2, … in order, one at a time. A thread commits every
// finished item at the head before it takes an item to work on; with CommitOn::Caller only the
// calling thread commits (so a finished item can wait for the end of the caller's own work(j)),
// with CommitOn::AnyThread the thread that finishes the head item commits it and the finished
// items behind it. Items are started in order. bytes[i] is the memory item i holds while
// work(i) runs; work(i) returns what it still holds from then to the end of commit(i) (a lossy
// encoder's records are far smaller than its tensors; more than bytes[i] counts as bytes[i]).
// Items started and not yet committed hold at most threads × max(bytes) + max(½ × max(bytes),
// min_slack) by that count, and at most 16 × threads of them run or wait at a time — except
// that the next item to commit is always started, so any item can run whatever its size. (The
// bytes are the bound that matters; the count caps the number of items of a few bytes each, and
// of items counted as 0 bytes — the encoder's non-float arrays, whose size their TensorInfo does
// not give. At 4 × threads it bound on a snapshot of conv weights and biases: the items behind a
// record being written were all finished, so a thread slept, and waking it is slow; see
// docs/performance.md, "Helper threads".)
//
// An exception thrown by work(i) is rethrown in order, in place of commit(i): the items before
// i are committed first, no item is started after the failure is seen, and the items already
// running finish (so the error reported is that of the lowest failing index, whatever the
// thread count). An exception from commit(i) stops the pool the same way. The other threads
// are helpers of `workers` (base/workers.hpp: kept between calls, so an encode does not wait for
// new threads to start); one that cannot be had leaves its share to the calling thread and the
// others. Every helper has finished its share when run_ordered returns or throws. With
// threads ≤ 1 (or one item) everything runs on the calling thread: work(0), commit(0), work(1), …
enum class CommitOn {
  Caller,     // commit(i) on the calling thread only (the decoder: the sink runs where it was called)
  AnyThread,  // commit(i) on whichever thread finds item i finished at the head, never two at once
              // (the encoder: a thread that finishes a tensor writes the records that are ready,
              // so no finished record waits for the caller's own tensor)
};
//
// min_slack lets finished items wait for their commit without stopping the other threads when
// the tensors are small against a fixed allowance (the encoder passes 16 MiB: a lossless
// record is nearly its tensor's size, and while one thread writes record i, the finished record
// i+1 and the next items started would not fit in ½ × max(bytes) of slack).
//
// A thread with nothing to do (waiting to commit, or for room to start an item) polls for a
// change for up to `poll` before it sleeps, as waking a sleeping thread is slow
// (docs/performance.md, "Helper threads"). BM_ordered_pool compares the default with 0 (sleep
// at once).
void run_ordered(Workers& workers, std::span<const uint64_t> bytes, unsigned threads,
                 const std::function<uint64_t(size_t)>& work, const std::function<void(size_t)>& commit,
                 CommitOn on = CommitOn::Caller, uint64_t min_slack = 0,
                 std::chrono::microseconds poll = kHelperSpin);

}  // namespace gradcodec
