// SPDX-License-Identifier: BSD-3-Clause
// The facade's reading of a thread count.
#pragma once

#include <algorithm>
#include <thread>

namespace gradcodec::api {

// `requested` threads, at most one per core (more cannot speed the work up and would only hold
// more tensors in memory at once); 0: one per core.
inline unsigned thread_count(unsigned requested) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return requested ? std::min(requested, cores) : cores;
}

}  // namespace gradcodec::api
