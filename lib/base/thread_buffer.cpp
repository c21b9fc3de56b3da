// SPDX-License-Identifier: BSD-3-Clause
#include "base/thread_buffer.hpp"

#include <gradcodec/detail/pages.hpp>

#include <algorithm>
#include <array>
#include <utility>

namespace gradcodec {
namespace {

// Smaller requests get this much: a kept buffer then serves any later small request.
constexpr size_t kMinBytes = size_t{64} << 10;

struct Kept {
  std::unique_ptr<uint8_t[]> data;
  size_t capacity = 0;
};
// Set when the thread's pool is destroyed (thread exit): a buffer given back after that, by an
// object destroyed later in the same exit, is freed. A trivial thread_local outlives the pool.
thread_local bool pool_gone = false;
struct Pool {
  std::array<Kept, ThreadBuffer::kKeptBuffers> slots;
  ~Pool() { pool_gone = true; }
};
thread_local Pool pool;

}  // namespace

ThreadBuffer::ThreadBuffer(size_t bytes) {
  // The smallest kept buffer that is large enough.
  Kept* best = nullptr;
  if (!pool_gone)
    for (Kept& k : pool.slots)
      if (k.data && k.capacity >= bytes && (!best || k.capacity < best->capacity)) best = &k;
  if (best) {
    data_ = std::move(best->data);
    capacity_ = std::exchange(best->capacity, 0);
    return;
  }
  capacity_ = std::max(bytes, kMinBytes);
  data_ = std::make_unique_for_overwrite<uint8_t[]>(capacity_);
  prepare_written(data_.get(), capacity_);
}

ThreadBuffer::ThreadBuffer(ThreadBuffer&& o) noexcept
    : data_(std::move(o.data_)), capacity_(std::exchange(o.capacity_, 0)) {}

ThreadBuffer& ThreadBuffer::operator=(ThreadBuffer&& o) noexcept {
  if (this != &o) {
    give_back();
    data_ = std::move(o.data_);
    capacity_ = std::exchange(o.capacity_, 0);
  }
  return *this;
}

ThreadBuffer::~ThreadBuffer() { give_back(); }

void ThreadBuffer::give_back() noexcept {
  if (!data_ || capacity_ > kKeptBufferBytes || pool_gone) {
    data_.reset();
    return;
  }
  // An empty slot, else the one holding the smallest buffer, replaced if this one is larger.
  Kept* slot = &pool.slots[0];
  for (Kept& k : pool.slots) {
    if (!k.data) {
      slot = &k;
      break;
    }
    if (k.capacity < slot->capacity) slot = &k;
  }
  if (slot->data && slot->capacity >= capacity_) {
    data_.reset();
    return;
  }
  slot->data = std::move(data_);
  slot->capacity = std::exchange(capacity_, 0);
}

}  // namespace gradcodec
