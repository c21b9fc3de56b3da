// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — where a lossless stage writes its bytes: the next stage's input, or a stream.
//
// Part of the interface for stage authors (include/gradcodec/plugin/, docs/api.md "Writing a
// stage"): not yet stable, it changes with the engine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace gradcodec {

// Receives bytes front to back. The writer calls begin() once, then hands the bytes over in
// order, each piece either by write() or by filling room() and calling commit(), then end().
// The bytes of a write() are the writer's again when it returns (a receiver that needs them later
// copies them). Any call may throw gradcodec::Error (a stage refusing corrupt input); the writer
// then stops.
class ByteOut {
 public:
  virtual ~ByteOut() = default;
  // Before the first byte: `size` bytes follow when `exact`, else at most `size`.
  virtual void begin(uint64_t size, bool exact) = 0;
  virtual void write(std::span<const uint8_t> bytes) = 0;
  // Up to `want` bytes the writer may fill in place (their content is unspecified), then
  // commit(k) for the first k ≤ size() of them, before any other call. Empty: use write().
  // A short room is not the end: the next call may offer more.
  virtual std::span<uint8_t> room(size_t want) {
    (void)want;
    return {};
  }
  virtual void commit(size_t k) { (void)k; }
  // After the last byte.
  virtual void end() = 0;
};

// Writes `bytes` into `to` by filling its room() (for a stage that gathers its input in a buffer
// of its own); Internal error naming `who` when the room runs out first.
void write_into_room(ByteOut& to, std::span<const uint8_t> bytes, const char* who);

// Appends to a vector (the bytes a stream holds). begin() reserves the size (on huge pages when
// large, docs/performance.md "Figures behind design choices"); room() is offered in steps of at
// most kStep bytes, because a vector zero-fills what it grows by, which costs nothing only while
// the step is in cache. For a size that is only a bound (an encoder's output), pages are mapped
// 1 MiB at a time ahead of the writes, so the bound is address space, not resident memory.
class AppendOut final : public ByteOut {
 public:
  static constexpr size_t kStep = size_t{256} << 10;
  explicit AppendOut(std::vector<uint8_t>& out) : out_(out) {}
  void begin(uint64_t size, bool exact) override;
  void write(std::span<const uint8_t> bytes) override;
  std::span<uint8_t> room(size_t want) override;
  void commit(size_t k) override;
  void end() override {}

 private:
  void map_ahead(size_t end);  // pages up to `end` (a bound's reservation) mapped before writes
  std::vector<uint8_t>& out_;
  size_t base_ = 0;     // out_.size() before the last room()
  bool lazy_ = false;   // reserved for a bound: pages mapped as the writes come
};

}  // namespace gradcodec
