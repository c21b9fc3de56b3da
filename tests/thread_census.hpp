// SPDX-License-Identifier: BSD-3-Clause
// Test helpers: how many threads this process has, for the tests that check helper threads are
// started and joined (tests/core/test_workers.cpp, tests/core/test_threads_owned.cpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <thread>

namespace gradcodec::test {

// The threads of this process now (/proc/self/task).
inline size_t thread_count() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// Waits up to 2 s for the process to have `n` threads again (a joined thread leaves
// /proc/self/task a moment after its join returns); true when it has.
inline bool threads_back_to(size_t n) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (thread_count() != n) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace gradcodec::test
