// SPDX-License-Identifier: BSD-3-Clause
#include "quantize/qsgd_levels.hpp"

#include "quantize/codes.hpp"
#include "base/cpu.hpp"

#include <gradcodec/rng.hpp>

#include <cmath>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GRADCODEC_QSGD_AVX512 1
#endif

namespace gradcodec::stages::codes {

uint32_t qsgd_word(uint64_t key, uint64_t i) noexcept {
  const uint64_t w = Rng(key).at(i >> 1);
  return static_cast<uint32_t>(i & 1 ? w >> 32 : w);
}

namespace {
// The partials' combination: 16 → 8 → 4 → 2 → 1, lane k with lane k + half.
double combine(double* p) noexcept {
  for (unsigned half = 8; half >= 1; half /= 2)
    for (unsigned k = 0; k < half; ++k) p[k] += p[k + half];
  return p[0];
}
}  // namespace

double qsgd_sum_squares_portable(const float* x, uint64_t n) noexcept {
  double p[16] = {};
  for (uint64_t i = 0; i < n; ++i) p[i % 16] += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return combine(p);
}

namespace {
// The code of value x given its 32-bit word w: the rule of qsgd_codes.
inline uint32_t code_of(float x, float scale, float s, unsigned level_bits, uint32_t w) noexcept {
  const float r = std::fabs(x) * scale;
  // r ≥ s codes as s (f32 rounding can put r an ulp above s); NaN fails both tests and codes as
  // level 0. Then ⌊r⌋, plus 1 with probability r − ⌊r⌋ (exact in f32).
  const float rc = r < s ? r : (r >= s ? s : 0.0f);
  const auto fl = static_cast<uint32_t>(static_cast<int32_t>(rc));  // 0 ≤ rc ≤ s < 2^24: truncation is ⌊rc⌋
  const float frac = rc - static_cast<float>(fl);
  // w·2⁻³² < frac, compared exactly in double (frac·2³² is exact).
  const bool up = static_cast<double>(w) < static_cast<double>(frac) * 0x1.0p32;
  return (sign_bit(x) ? 1u << level_bits : 0u) | (fl + (up ? 1u : 0u));
}
}  // namespace

// One generator output per pair of values (an odd first value, and an even last one, alone).
void qsgd_codes_portable(const float* x, uint64_t m, float scale, float s, unsigned level_bits, uint64_t key,
                         uint64_t first, uint32_t* code) noexcept {
  uint64_t j = 0;
  if ((first & 1) && m > 0) code[0] = code_of(x[0], scale, s, level_bits, qsgd_word(key, first)), j = 1;
  const Rng rng(key);
  for (; j + 2 <= m; j += 2) {
    const uint64_t w = rng.at((first + j) >> 1);
    code[j] = code_of(x[j], scale, s, level_bits, static_cast<uint32_t>(w));
    code[j + 1] = code_of(x[j + 1], scale, s, level_bits, static_cast<uint32_t>(w >> 32));
  }
  if (j < m) code[j] = code_of(x[j], scale, s, level_bits, qsgd_word(key, first + j));
}

#if defined(GRADCODEC_QSGD_AVX512)
namespace {

#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// Sixteen values per step from an even value index, each operation the portable loop's in an f32
// lane: the generator's eight outputs ⌊i/2⌋ … ⌊i/2⌋ + 7 mixed as Rng::mix does (64-bit
// multiplies: AVX-512DQ), whose 32-bit halves are, in lane order, the words of values i … i + 15;
// w·2⁻³² < frac as the unsigned compare w < ⌈frac·2³²⌉ (frac·2³² exact and at most 2³² − 2⁸,
// converted rounding up); frac = rc − ⌊rc⌋ exactly (vreduceps). The compares are the ordered
// ones of the scalar code (false on NaN), the sign test the unordered not-less-than (true on NaN,
// as sign_bit).
__attribute__((target("avx512f,avx512dq"))) void codes_avx512(const float* x, uint64_t m, float scale, float s,
                                                             unsigned level_bits, uint64_t key, uint64_t first,
                                                             uint32_t* code) noexcept {
  uint64_t j = 0;
  if ((first & 1) && m > 0) {  // the odd value's word is the high half of an output: one value on its own
    qsgd_codes_portable(x, 1, scale, s, level_bits, key, first, code);
    j = 1;
  }
  const __m512 vs = _mm512_set1_ps(s), vscale = _mm512_set1_ps(scale), zero = _mm512_setzero_ps();
  const __m512 two32 = _mm512_set1_ps(0x1.0p32f);
  const __m512i gamma = _mm512_set1_epi64(static_cast<long long>(Rng::kGamma));
  const __m512i c1 = _mm512_set1_epi64(static_cast<long long>(0xbf58476d1ce4e5b9ULL));
  const __m512i c2 = _mm512_set1_epi64(static_cast<long long>(0x94d049bb133111ebULL));
  const __m512i step = _mm512_set1_epi64(static_cast<long long>(Rng::kGamma * 8));
  const __m512i one = _mm512_set1_epi32(1), sign = _mm512_set1_epi32(static_cast<int>(1u << level_bits));
  __m512i z = _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(key + ((first + j) >> 1) * Rng::kGamma)),
                               _mm512_mullo_epi64(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0), gamma));
  for (; j + 16 <= m; j += 16) {
    const __m512 xv = _mm512_loadu_ps(x + j);
    const __m512 r = _mm512_mul_ps(_mm512_abs_ps(xv), vscale);
    __m512i t = z;
    t = _mm512_xor_si512(t, _mm512_srli_epi64(t, 30));
    t = _mm512_mullo_epi64(t, c1);
    t = _mm512_xor_si512(t, _mm512_srli_epi64(t, 27));
    t = _mm512_mullo_epi64(t, c2);
    t = _mm512_xor_si512(t, _mm512_srli_epi64(t, 31));
    z = _mm512_add_epi64(z, step);
    // rc: min(r, s) where r is ordered (r = s gives s either way), 0 where r is NaN.
    const __m512 rc = _mm512_maskz_min_ps(_mm512_cmp_ps_mask(r, r, _CMP_ORD_Q), r, vs);
    const __m512i fl = _mm512_cvttps_epi32(rc);
    const __m512 frac = _mm512_reduce_ps(rc, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);  // rc − ⌊rc⌋, exact
    const __m512i bound = _mm512_cvt_roundps_epu32(_mm512_mul_ps(frac, two32), _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
    const __mmask16 up = _mm512_cmplt_epu32_mask(t, bound);
    const __mmask16 positive = _mm512_cmp_ps_mask(xv, zero, _CMP_NLT_UQ);
    __m512i l = _mm512_mask_add_epi32(fl, up, fl, one);
    l = _mm512_mask_or_epi32(l, positive, l, sign);
    _mm512_storeu_si512(code + j, l);
  }
  qsgd_codes_portable(x + j, m - j, scale, s, level_bits, key, first + j, code + j);
}

// Sixteen values a step into two accumulators of eight double lanes (partials 0–7 and 8–15);
// the squares are exact in double, so the fused multiply-add rounds once as the portable loop's
// add does. The tail (n mod 16 values) goes to its partials through a zero-masked load.
__attribute__((target("avx512f"))) double sum_squares_avx512(const float* x, uint64_t n) noexcept {
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  uint64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __m512d a = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    const __m512d b = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    lo = _mm512_fmadd_pd(a, a, lo);
    hi = _mm512_fmadd_pd(b, b, hi);
  }
  if (i < n) {
    const __m512 v = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << (n - i)) - 1), x + i);
    const __m512d a = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    const __m512d b = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    lo = _mm512_fmadd_pd(a, a, lo);  // +0 in the lanes past the tail: no partial changes
    hi = _mm512_fmadd_pd(b, b, hi);
  }
  alignas(64) double p[16];
  _mm512_store_pd(p, lo);
  _mm512_store_pd(p + 8, hi);
  return combine(p);
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace
#endif

#if defined(GRADCODEC_QSGD_AVX512)
// Where the CPU has AVX2 but not AVX-512: the sixteen partials in four accumulators of four
// double lanes (partials 0–3, 4–7, 8–11, 12–15), a multiply and an add each (the square is
// exact, so the add rounds as the portable loop's does); the tail as the portable loop adds it.
__attribute__((target("avx2"))) double sum_squares_avx2(const float* x, uint64_t n) noexcept {
  __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
  uint64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int q = 0; q < 4; ++q) {
      const __m256d a = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4 * q));
      acc[q] = _mm256_add_pd(acc[q], _mm256_mul_pd(a, a));
    }
  alignas(32) double p[16];
  for (int q = 0; q < 4; ++q) _mm256_store_pd(p + 4 * q, acc[q]);
  for (uint64_t k = 0; i < n; ++i, ++k) p[k] += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return combine(p);
}
#endif

bool qsgd_sums_avx2() noexcept {
#if defined(GRADCODEC_QSGD_AVX512)
  return cpu_avx2();
#else
  return false;
#endif
}

double qsgd_sum_squares_avx2(const float* x, uint64_t n) noexcept {
#if defined(GRADCODEC_QSGD_AVX512)
  if (cpu_avx2()) return sum_squares_avx2(x, n);
#endif
  return qsgd_sum_squares_portable(x, n);
}

double qsgd_sum_squares(const float* x, uint64_t n) noexcept {
#if defined(GRADCODEC_QSGD_AVX512)
  if (cpu_avx512dq()) return sum_squares_avx512(x, n);
  if (cpu_avx2()) return sum_squares_avx2(x, n);
#endif
  return qsgd_sum_squares_portable(x, n);
}

bool qsgd_codes_vectorised() noexcept {
#if defined(GRADCODEC_QSGD_AVX512)
  return cpu_avx512dq();
#else
  return false;
#endif
}

void qsgd_codes(const float* x, uint64_t m, float scale, float s, unsigned level_bits, uint64_t key, uint64_t first,
                uint32_t* code) noexcept {
#if defined(GRADCODEC_QSGD_AVX512)
  if (qsgd_codes_vectorised()) return codes_avx512(x, m, scale, s, level_bits, key, first, code);
#endif
  qsgd_codes_portable(x, m, scale, s, level_bits, key, first, code);
}

}  // namespace gradcodec::stages::codes
