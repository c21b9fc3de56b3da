// SPDX-License-Identifier: BSD-3-Clause
#include "base/checksum.hpp"

#include "base/checksum_avx2.hpp"
#include "base/cpu.hpp"

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

namespace gradcodec {

static_assert(sizeof(XXH3_state_t) <= Xxh3Stream::kStateBytes && alignof(XXH3_state_t) <= 64);

bool xxh3_vectorised() noexcept {
  static const bool yes = cpu_avx2() && xxh3_avx2_state_bytes() <= Xxh3Stream::kStateBytes;
  return yes;
}

uint64_t xxh3(const void* data, size_t n) noexcept {
  return xxh3_vectorised() ? xxh3_avx2(data, n) : XXH3_64bits(data, n);
}

Xxh3Stream::Xxh3Stream() noexcept {
  if (xxh3_vectorised()) xxh3_avx2_reset(state_);
  else XXH3_64bits_reset(reinterpret_cast<XXH3_state_t*>(state_));
}

void Xxh3Stream::update(const void* data, size_t n) noexcept {
  if (n == 0) return;
  if (xxh3_vectorised()) xxh3_avx2_update(state_, data, n);
  else XXH3_64bits_update(reinterpret_cast<XXH3_state_t*>(state_), data, n);
}

uint64_t Xxh3Stream::digest() const noexcept {
  return xxh3_vectorised() ? xxh3_avx2_digest(state_) : XXH3_64bits_digest(reinterpret_cast<const XXH3_state_t*>(state_));
}

}  // namespace gradcodec
