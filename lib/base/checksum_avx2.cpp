// SPDX-License-Identifier: BSD-3-Clause
// xxhash's own XXH3 inlined into this file, which alone is compiled with -mavx2 (xxhash picks
// its AVX2 accumulator from __AVX2__). Nothing else is included: every function here is
// xxhash's static inline code, so no AVX2 instruction reaches code shared with other files.
#include "base/checksum_avx2.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace gradcodec {
uint64_t xxh3_avx2(const void* data, size_t n) noexcept { return XXH3_64bits(data, n); }
size_t xxh3_avx2_state_bytes() noexcept { return sizeof(XXH3_state_t); }
void xxh3_avx2_reset(void* state) noexcept { XXH3_64bits_reset(static_cast<XXH3_state_t*>(state)); }
void xxh3_avx2_update(void* state, const void* data, size_t n) noexcept {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state), data, n);
}
uint64_t xxh3_avx2_digest(const void* state) noexcept {
  return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(state));
}
}  // namespace gradcodec
