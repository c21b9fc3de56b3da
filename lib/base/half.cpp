// SPDX-License-Identifier: BSD-3-Clause
#include <gradcodec/half.hpp>

#include "base/cpu.hpp"

#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GRADCODEC_HALF_F16C 1
#endif

namespace gradcodec {

float f16_to_f32(uint16_t h) noexcept {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);  // Inf, or NaN with its payload kept
  } else if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      u = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | ((man & 0x3ffu) << 13);
    }
  } else {
    u = sign | (exp + 112) << 23 | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

void f16_to_f32_n(const uint8_t* src, uint64_t n, float* dst) noexcept {
  // Every binary16 value's f32, made by f16_to_f32 itself (256 KiB, built once, thread-safe):
  // a load per value instead of branches per value.
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t h = 0; h < 65536; ++h) t[h] = f16_to_f32(static_cast<uint16_t>(h));
    return t;
  }();
  const float* t = table.data();
  for (uint64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = t[h];
  }
}

uint16_t f32_to_f16(float f) noexcept {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t exp = (u >> 23) & 0xffu;
  uint32_t man = u & 0x7fffffu;
  if (exp == 0xff) {  // Inf / NaN: keep the top payload bits, force quiet if they vanish
    if (man == 0) return sign | 0x7c00u;
    uint16_t m = static_cast<uint16_t>(man >> 13);
    return sign | 0x7c00u | (m ? m : 0x200u);
  }
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00u;  // overflow → Inf
  if (e <= 0) {                          // subnormal or zero in f16
    if (e < -10) return sign;
    man |= 0x800000u;
    int shift = 14 - e;
    uint32_t half = 1u << (shift - 1);
    uint32_t rest = man & ((1u << shift) - 1);
    uint32_t m = man >> shift;
    if (rest > half || (rest == half && (m & 1u))) ++m;
    return sign | static_cast<uint16_t>(m);
  }
  uint32_t m = man >> 13;
  uint32_t rest = man & 0x1fffu;
  uint32_t r = (static_cast<uint32_t>(e) << 10) | m;
  if (rest > 0x1000u || (rest == 0x1000u && (m & 1u))) ++r;  // may carry into exponent: correct
  return sign | static_cast<uint16_t>(r);
}

void f32_to_f16_n_portable(const float* src, uint64_t n, uint8_t* dst) noexcept {
  for (uint64_t i = 0; i < n; ++i) {
    const uint16_t h = f32_to_f16(src[i]);
    std::memcpy(dst + 2 * i, &h, 2);
  }
}

#if defined(GRADCODEC_HALF_F16C)
namespace {
// vcvtps2ph with round-to-nearest-even is IEEE's conversion, the rule above, for every non-NaN
// value (subnormal results and overflow to ±Inf included). A NaN's result differs (the CPU sets
// the quiet bit), so a group of eight holding one goes through the scalar rule.
__attribute__((target("f16c,avx"))) void f32_to_f16_f16c(const float* src, uint64_t n, uint8_t* dst) noexcept {
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(src + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)) != 0) {
      f32_to_f16_n_portable(src + i, 8, dst + 2 * i);
      continue;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
  }
  f32_to_f16_n_portable(src + i, n - i, dst + 2 * i);
}
}  // namespace
#endif

void f32_to_f16_n(const float* src, uint64_t n, uint8_t* dst) noexcept {
#if defined(GRADCODEC_HALF_F16C)
  if (cpu_f16c()) return f32_to_f16_f16c(src, n, dst);
#endif
  f32_to_f16_n_portable(src, n, dst);
}

uint16_t f32_to_bf16(float f) noexcept {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu)) {
    return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN, sign and top payload kept
  }
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace gradcodec
