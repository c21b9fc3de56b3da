// SPDX-License-Identifier: BSD-3-Clause
// Working buffers kept per thread between tensors. A decode reads each tensor through a few
// buffers of up to 1 MiB (a chunk of the container file, a run of shuffle's planes); fresh ones
// would cost their pages' first touch for every tensor (docs/performance.md, "Figures behind
// design choices"), a kept one has them mapped. The library stays free of global
// state visible to callers: a buffer's bytes are unspecified when taken, as new[]'s are.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace gradcodec {

// A buffer of at least `bytes` bytes (contents unspecified) for the calling thread. Destroying
// it gives it back to the thread that destroys it; each thread keeps up to kKeptBuffers buffers
// of at most kKeptBufferBytes, the rest are freed.
class ThreadBuffer {
 public:
  static constexpr size_t kKeptBuffers = 4;
  static constexpr size_t kKeptBufferBytes = size_t{4} << 20;

  explicit ThreadBuffer(size_t bytes);
  ThreadBuffer(ThreadBuffer&& o) noexcept;
  ThreadBuffer& operator=(ThreadBuffer&& o) noexcept;
  ThreadBuffer(const ThreadBuffer&) = delete;
  ThreadBuffer& operator=(const ThreadBuffer&) = delete;
  ~ThreadBuffer();

  uint8_t* data() const noexcept { return data_.get(); }
  size_t capacity() const noexcept { return capacity_; }

 private:
  void give_back() noexcept;
  std::unique_ptr<uint8_t[]> data_;
  size_t capacity_ = 0;
};

}  // namespace gradcodec
