// SPDX-License-Identifier: BSD-3-Clause
// ThreadBuffer: a buffer given back is handed out again to the same thread (the point: its pages
// stay mapped), best fit first; at most kKeptBuffers of at most kKeptBufferBytes are kept; one
// thread's buffers never reach another. Each case runs in a thread of its own, so that buffers
// kept by earlier tests do not count; the checks run on the test's thread after the join.
#include <catch2/catch.hpp>

#include "base/thread_buffer.hpp"

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

using namespace gradcodec;

namespace {
template <class F>
void in_fresh_thread(F&& f) {
  std::thread t(std::forward<F>(f));
  t.join();
}
constexpr size_t KiB = 1024, MiB = 1024 * KiB;
}  // namespace

TEST_CASE("ThreadBuffer hands a buffer given back to the same thread again, smallest fit first", "[thread_buffer]") {
  const uint8_t *first = nullptr, *again = nullptr, *larger = nullptr, *small = nullptr, *fit = nullptr;
  size_t first_cap = 0, larger_cap = 0, tiny_cap = 0;
  in_fresh_thread([&] {
    {
      ThreadBuffer b(300 * KiB);
      first = b.data();
      first_cap = b.capacity();
      std::memset(b.data(), 7, 300 * KiB);  // writable over its whole size
    }
    {
      ThreadBuffer b(200 * KiB);  // fits the kept one
      again = b.data();
    }
    {
      ThreadBuffer b(2 * MiB);  // does not fit: a new one
      larger = b.data();
      larger_cap = b.capacity();
      ThreadBuffer c(10);  // the 300 KiB one is the only fit
      small = c.data();
    }
    // Kept now: 300 KiB and 2 MiB. 301 KiB gets the 2 MiB one; 1 KiB the 300 KiB one.
    ThreadBuffer x(301 * KiB), y(1 * KiB);
    fit = x.data();
    CHECK(y.data() == first);
    ThreadBuffer z(1);  // none kept is free now: a new one of the minimum size
    tiny_cap = z.capacity();
  });
  CHECK(first_cap >= 300 * KiB);
  CHECK(again == first);
  CHECK(larger != first);
  CHECK(larger_cap >= 2 * MiB);
  CHECK(small == first);
  CHECK(fit == larger);
  CHECK(tiny_cap >= 1);
}

TEST_CASE("ThreadBuffer keeps at most kKeptBuffers buffers, the largest, none larger than kKeptBufferBytes",
          "[thread_buffer]") {
  static_assert(ThreadBuffer::kKeptBuffers == 4, "the expected sizes below assume four");
  std::vector<size_t> capacities;
  size_t after_huge = 0;
  in_fresh_thread([&] {
    {
      // Given back in order 128, 256, ..., 768 KiB: the first four fill the slots, the next two
      // replace the smallest kept (128, then 256 KiB).
      std::vector<ThreadBuffer> held;
      for (size_t i = 1; i <= 6; ++i) held.emplace_back(i * 128 * KiB);
    }
    std::vector<ThreadBuffer> held;
    for (size_t i = 0; i < 6; ++i) held.emplace_back(1);  // kept ones first, smallest first
    for (const auto& b : held) capacities.push_back(b.capacity());
  });
  in_fresh_thread([&] {
    { ThreadBuffer h(ThreadBuffer::kKeptBufferBytes + 1); }
    ThreadBuffer s(64 * KiB);  // a kept huge buffer would be the only fit and come back
    after_huge = s.capacity();
  });
  const std::vector<size_t> expected = {384 * KiB, 512 * KiB, 640 * KiB, 768 * KiB, 64 * KiB, 64 * KiB};
  CHECK(capacities == expected);
  CHECK(after_huge == 64 * KiB);
}

TEST_CASE("ThreadBuffer: one thread's kept buffers are not handed to another", "[thread_buffer]") {
  const uint8_t *a = nullptr, *b_first = nullptr, *a_again = nullptr;
  // Thread A keeps one buffer and stays alive while thread B asks for one of the same size.
  std::thread ta([&] {
    { ThreadBuffer x(128 * KiB); a = x.data(); }
    std::thread tb([&] {
      ThreadBuffer y(128 * KiB);
      b_first = y.data();
    });
    tb.join();
    ThreadBuffer z(128 * KiB);
    a_again = z.data();
  });
  ta.join();
  CHECK(b_first != a);
  CHECK(a_again == a);
}

namespace {
// A thread_local made before the thread's pool, so destroyed after it at thread exit, whose
// destructor takes and gives back a buffer: that one must be freed, not put into the pool that
// no longer exists (under LeakSanitizer a buffer stored there would be reported as a leak).
struct UsesBufferAtExit {
  bool* ran = nullptr;
  ~UsesBufferAtExit() {
    ThreadBuffer late(100 * KiB);
    late.data()[0] = 1;
    if (ran) *ran = true;
  }
};
thread_local UsesBufferAtExit uses_buffer_at_exit;
}  // namespace

TEST_CASE("ThreadBuffer: a buffer given back during thread exit, after the pool, is freed", "[thread_buffer]") {
  bool ran = false;
  in_fresh_thread([&] {
    uses_buffer_at_exit.ran = &ran;  // constructed now, before the pool below
    ThreadBuffer b(64 * KiB);        // the pool is made here: destroyed first at exit
  });
  CHECK(ran);
}
