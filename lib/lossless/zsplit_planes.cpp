// SPDX-License-Identifier: BSD-3-Clause
#include "lossless/zsplit_planes.hpp"

#include "base/cpu.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GRADCODEC_ZSPLIT_AVX512 1
#endif

namespace gradcodec::stages::zsplit {

namespace {

constexpr unsigned W = 4;  // the element width: f32

bool is_zero(const uint8_t* w) {
  uint32_t v;
  std::memcpy(&v, w, 4);
  return v == 0;
}

// Eight bitmap bytes at a time.
[[gnu::always_inline]] inline uint64_t ones_in(const uint8_t* bits, size_t n) {
  uint64_t ones = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, bits + i, 8);
    ones += static_cast<uint64_t>(std::popcount(w));
  }
  for (; i < n; ++i) ones += static_cast<uint64_t>(std::popcount(bits[i]));
  return ones;
}

}  // namespace

// Zero elements come in runs, so the branch on them is predicted (a branch-free loop was
// measured slower on the real corpus).
size_t split_run(const uint8_t* x, uint64_t m, uint8_t* bits, uint8_t*& high_io, uint8_t* low) noexcept {
  // Locals, not the references: a byte store could alias them and force a reload per element.
  uint8_t* high = high_io;
  uint8_t* const low0 = low;
  for (uint64_t j = 0; j < m; j += 8) {
    unsigned b = 0;
    const uint64_t e = std::min<uint64_t>(8, m - j);
    for (uint64_t t = 0; t < e; ++t) {
      const uint8_t* w = x + W * (j + t);
      if (is_zero(w)) continue;
      b |= 1u << t;
      std::memcpy(low, w, W);
      low += W - 1;
      *high++ = w[W - 1];
    }
    bits[j / 8] = static_cast<uint8_t>(b);
  }
  high_io = high;
  return static_cast<size_t>(low - low0);
}

// Eight elements of one bitmap byte at a time: all zero, all non-zero (while 25 low bytes are
// left: each word one 4-byte load of its low bytes, on little-endian machines), or one by one.
void join_run_portable(const uint8_t* bits, uint64_t m, const uint8_t*& low_io, const uint8_t* low_end,
                       const uint8_t*& high_io, uint8_t* out) noexcept {
  const uint8_t* low = low_io;  // locals, as in split_run
  const uint8_t* high = high_io;
  for (uint64_t j = 0; j < m; j += 8) {
    const unsigned b = bits[j / 8];
    const uint64_t e = std::min<uint64_t>(8, m - j);
    uint8_t* o = out + W * j;
    if (b == 0) {
      std::memset(o, 0, W * e);
      continue;
    }
    if constexpr (std::endian::native == std::endian::little) {
      if (b == 0xff && e == 8 && low_end - low >= 25) {
        for (unsigned t = 0; t < 8; ++t) {
          uint32_t v;
          std::memcpy(&v, low + 3 * t, 4);
          v = (v & 0xffffffu) | static_cast<uint32_t>(high[t]) << 24;
          std::memcpy(o + 4 * t, &v, 4);
        }
        low += 24, high += 8;
        continue;
      }
    }
    for (uint64_t t = 0; t < e; ++t, o += W) {
      if ((b >> t) & 1) {
        std::memcpy(o, low, W - 1);
        o[W - 1] = *high++;
        low += W - 1;
      } else {
        std::memset(o, 0, W);
      }
    }
  }
  low_io = low, high_io = high;
}

#if defined(GRADCODEC_ZSPLIT_AVX512)
namespace {

// Sixteen elements (two bitmap bytes, mask b with k set bits) per step: a masked load of the 3k
// low bytes and one of the k high bytes (nothing past them is read, so no end test), one byte
// permute that builds k packed words (word d: low bytes 3d, 3d + 1, 3d + 2, high byte d), and a
// 32-bit expand that puts word d at the d-th set bit of b and zeros elsewhere. The last m mod 16
// elements go to the portable loop.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void join_avx512(const uint8_t* bits, uint64_t m,
                                                                        const uint8_t*& low_io, const uint8_t* low_end,
                                                                        const uint8_t*& high_io, uint8_t* out) {
  alignas(64) uint8_t order[64];
  for (unsigned d = 0; d < 16; ++d) {
    for (unsigned i = 0; i < 3; ++i) order[4 * d + i] = static_cast<uint8_t>(3 * d + i);
    order[4 * d + 3] = static_cast<uint8_t>(64 + d);  // the second source: the high bytes
  }
  const __m512i index = _mm512_load_si512(order);
  const uint8_t* low = low_io;
  const uint8_t* high = high_io;
  uint64_t j = 0;
  for (; j + 16 <= m; j += 16) {
    uint16_t b;
    std::memcpy(&b, bits + j / 8, 2);
    uint8_t* o = out + W * j;
    if (b == 0) {
      _mm512_storeu_si512(o, _mm512_setzero_si512());
      continue;
    }
    const unsigned k = static_cast<unsigned>(std::popcount(b));
    const __m512i lo = _mm512_maskz_loadu_epi8((uint64_t{1} << (3 * k)) - 1, low);
    const __m512i hi = _mm512_maskz_loadu_epi8((uint64_t{1} << k) - 1, high);
    const __m512i packed = _mm512_permutex2var_epi8(lo, index, hi);
    _mm512_storeu_si512(o, _mm512_maskz_expand_epi32(b, packed));
    low += 3 * k, high += k;
  }
  low_io = low, high_io = high;  // (the loop's pointers are locals whose address is never taken)
  join_run_portable(bits + j / 8, m - j, low_io, low_end, high_io, out + W * j);
}

}  // namespace
#endif

#if defined(GRADCODEC_ZSPLIT_AVX512)
namespace {
__attribute__((target("popcnt"))) uint64_t count_ones_popcnt(const uint8_t* bits, size_t n) {
  return ones_in(bits, n);  // inlined: compiled with the POPCNT instruction
}
}  // namespace
#endif

uint64_t count_ones(const uint8_t* bits, size_t n) noexcept {
#if defined(GRADCODEC_ZSPLIT_AVX512)
  if (cpu_popcnt()) return count_ones_popcnt(bits, n);
#endif
  return ones_in(bits, n);
}
bool join_vectorised() noexcept {
#if defined(GRADCODEC_ZSPLIT_AVX512)
  return cpu_avx512vbmi();
#else
  return false;
#endif
}

void join_run(const uint8_t* bits, uint64_t m, const uint8_t*& low, const uint8_t* low_end, const uint8_t*& high,
              uint8_t* out) noexcept {
#if defined(GRADCODEC_ZSPLIT_AVX512)
  if (join_vectorised()) return join_avx512(bits, m, low, low_end, high, out);
#endif
  join_run_portable(bits, m, low, low_end, high, out);
}

}  // namespace gradcodec::stages::zsplit
