#include "core/checksum.hpp"

#include "core/checksum_avx2.hpp"

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

namespace gradcodec {

bool xxh3_vectorised() noexcept {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

uint64_t xxh3(const void* data, size_t n) noexcept {
  return xxh3_vectorised() ? xxh3_avx2(data, n) : XXH3_64bits(data, n);
}

}  // namespace gradcodec
