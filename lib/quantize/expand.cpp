// SPDX-License-Identifier: BSD-3-Clause
#include "quantize/expand.hpp"

#include "base/cpu.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GRADCODEC_EXPAND_AVX512 1
#endif

namespace gradcodec::stages::codes {

void expand_codes_portable(const uint8_t* in, uint64_t count, unsigned width, const float* table,
                           float* out) noexcept {
  const unsigned per = 8 / width, mask = (1u << width) - 1;
  uint64_t i = 0;
  for (; i + per <= count; i += per, ++in)
    for (unsigned k = 0; k < per; ++k) out[i + k] = table[(*in >> (8 - width * (k + 1))) & mask];
  for (unsigned k = 0; i < count; ++i, ++k) out[i] = table[(*in >> (8 - width * (k + 1))) & mask];
}

void scale_codes8_portable(const uint8_t* in, uint64_t count, double step, const double* signed_level,
                           float* out) noexcept {
  for (uint64_t i = 0; i < count; ++i) out[i] = static_cast<float>(step * signed_level[in[i]]);
}

#if defined(GRADCODEC_EXPAND_AVX512)
namespace {

// GCC 12 reports the intrinsics' own _mm512_undefined_*() placeholders as "maybe uninitialized".
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// Sixteen codes per step: the 16/per source bytes, each repeated per times (shuffle), widened to
// 32-bit lanes and shifted right so that lane k's code is in its low bits; vpermps reads the low
// four bits of each index lane (masked to the width for 2-bit codes). The permute copies table
// entries: the same bits as the portable loop.
__attribute__((target("avx512f"))) void expand_avx512(const uint8_t* in, uint64_t count, unsigned width,
                                                       const float* table, float* out) noexcept {
  float padded[16] = {};
  for (unsigned c = 0; c < (1u << width); ++c) padded[c] = table[c];
  const __m512 t = _mm512_loadu_ps(padded);
  uint64_t i = 0;
  if (width == 4) {
    for (; i + 16 <= count; i += 16, in += 8) {
      const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(in));
      const __m512i lanes = _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(bytes, bytes));
      const __m512i idx = _mm512_mask_srli_epi32(lanes, static_cast<__mmask16>(0x5555), lanes, 4);
      _mm512_storeu_ps(out + i, _mm512_permutexvar_ps(idx, t));
    }
  } else {  // width 2
    const __m128i spread = _mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m512i shifts = _mm512_setr_epi32(6, 4, 2, 0, 6, 4, 2, 0, 6, 4, 2, 0, 6, 4, 2, 0);
    const __m512i three = _mm512_set1_epi32(3);
    for (; i + 16 <= count; i += 16, in += 4) {
      int32_t word;
      __builtin_memcpy(&word, in, 4);
      const __m128i bytes = _mm_shuffle_epi8(_mm_cvtsi32_si128(word), spread);
      const __m512i idx = _mm512_and_si512(_mm512_srlv_epi32(_mm512_cvtepu8_epi32(bytes), shifts), three);
      _mm512_storeu_ps(out + i, _mm512_permutexvar_ps(idx, t));
    }
  }
  expand_codes_portable(in, count - i, width, table, out + i);
}

// Eight codes per step: l = c & 127 and the sign bit c >> 7 in 32-bit lanes; l converted to
// double (exact) and multiplied by −1 where the sign bit is 0 (so 0 gives −0, as signed_level
// has it), then by step, then rounded to f32: the portable loop's IEEE operations lane by lane.
__attribute__((target("avx512f,avx512vl"))) void scale8_avx512(const uint8_t* in, uint64_t count, double step,
                                                                const double* signed_level, float* out) noexcept {
  const __m256i low7 = _mm256_set1_epi32(127), top = _mm256_set1_epi32(128);
  const __m512d s = _mm512_set1_pd(step), minus_one = _mm512_set1_pd(-1.0);
  uint64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + i)));
    const __mmask8 negative = _mm256_testn_epi32_mask(c, top);
    __m512d l = _mm512_cvtepi32_pd(_mm256_and_si256(c, low7));
    l = _mm512_mask_mul_pd(l, negative, l, minus_one);
    _mm256_storeu_ps(out + i, _mm512_cvtpd_ps(_mm512_mul_pd(s, l)));
  }
  scale_codes8_portable(in + i, count - i, step, signed_level, out + i);
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace
#endif

bool expand_vectorised() noexcept {
#if defined(GRADCODEC_EXPAND_AVX512)
  return cpu_avx512vl();
#else
  return false;
#endif
}

void expand_codes(const uint8_t* in, uint64_t count, unsigned width, const float* table, float* out) noexcept {
#if defined(GRADCODEC_EXPAND_AVX512)
  if (cpu_avx512vl()) return expand_avx512(in, count, width, table, out);
#endif
  expand_codes_portable(in, count, width, table, out);
}

void scale_codes8(const uint8_t* in, uint64_t count, double step, const double* signed_level, float* out) noexcept {
#if defined(GRADCODEC_EXPAND_AVX512)
  if (cpu_avx512vl()) return scale8_avx512(in, count, step, signed_level, out);
#endif
  scale_codes8_portable(in, count, step, signed_level, out);
}

}  // namespace gradcodec::stages::codes
