// xxhash's own XXH3 inlined into this file, which alone is compiled with -mavx2 (xxhash picks
// its AVX2 accumulator from __AVX2__). Nothing else is included: every function here is
// xxhash's static inline code, so no AVX2 instruction reaches code shared with other files.
#include "core/checksum_avx2.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace gradcodec {
uint64_t xxh3_avx2(const void* data, size_t n) noexcept { return XXH3_64bits(data, n); }
}  // namespace gradcodec
