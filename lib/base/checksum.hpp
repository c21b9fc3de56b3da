// SPDX-License-Identifier: BSD-3-Clause
// XXH3-64 over byte ranges (the container's section and stream checksums).
#pragma once
#include <cstddef>
#include <cstdint>

namespace gradcodec {
// The same value on every CPU; with AVX2 the bulk of a long input is hashed 32 bytes at a time
// (Debian's libxxhash is built for SSE2; every stream is hashed once when written and once
// when read, and a dense decode's checksum is read at the speed of this pass).
uint64_t xxh3(const void* data, size_t n) noexcept;
// Whether xxh3() runs the AVX2 code on this CPU (for the tests).
bool xxh3_vectorised() noexcept;

// xxh3() of bytes that arrive in pieces: update() with each piece in order, then digest()
// equals xxh3() of all of them. Same code choice as xxh3().
class Xxh3Stream {
 public:
  Xxh3Stream() noexcept;
  void update(const void* data, size_t n) noexcept;
  uint64_t digest() const noexcept;
  // xxhash's XXH3_state_t (576 bytes with xxhash 0.8; checked in checksum.cpp), kept here so
  // the header needs no xxhash.
  static constexpr size_t kStateBytes = 640;

 private:
  alignas(64) unsigned char state_[kStateBytes];
};
}  // namespace gradcodec
