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

void qsgd_codes_portable(const float* x, uint64_t m, double scale, double s, unsigned level_bits, uint64_t key,
                         uint64_t first, uint32_t* code) noexcept {
  const Rng rng(key);
  for (uint64_t j = 0; j < m; ++j) {
    const double r = std::fabs(static_cast<double>(x[j])) * scale;
    const double u = rng.uniform_at(first + j);
    // r ≥ s codes as s (f32 rounding of the norm can put r an ulp above s); NaN fails both tests
    // and codes as level 0. Then ⌊r⌋, plus 1 with probability r − ⌊r⌋.
    const double rc = r < s ? r : (r >= s ? s : 0.0);
    const int64_t fl = static_cast<int64_t>(rc);  // 0 ≤ rc ≤ s < 2^24: truncation is ⌊rc⌋
    const uint32_t l = static_cast<uint32_t>(fl) + (u < rc - static_cast<double>(fl) ? 1u : 0u);
    code[j] = (sign_bit(x[j]) ? 1u << level_bits : 0u) | l;
  }
}

#if defined(GRADCODEC_QSGD_AVX512)
namespace {

#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// Eight values per step, each operation the portable loop's in a double (or 64-bit) lane:
// the generator's outputs key + n·γ for n = first + j … first + j + 7, mixed as Rng::mix does
// (64-bit multiplies: AVX-512DQ), u = (z >> 11)·2⁻⁵³ converted exactly (< 2^53); the compares
// are the ordered ones of the scalar code (false on NaN), the sign test the unordered
// not-less-than (true on NaN, as sign_bit).
__attribute__((target("avx512f,avx512dq,avx512vl"))) void codes_avx512(const float* x, uint64_t m, double scale, double s,
                                                              unsigned level_bits, uint64_t key, uint64_t first,
                                                              uint32_t* code) noexcept {
  const __m512d vs = _mm512_set1_pd(s), vscale = _mm512_set1_pd(scale), zero = _mm512_setzero_pd();
  const __m512d two_m53 = _mm512_set1_pd(0x1.0p-53);
  const __m512i gamma = _mm512_set1_epi64(static_cast<long long>(Rng::kGamma));
  const __m512i c1 = _mm512_set1_epi64(static_cast<long long>(0xbf58476d1ce4e5b9ULL));
  const __m512i c2 = _mm512_set1_epi64(static_cast<long long>(0x94d049bb133111ebULL));
  const __m512i step = _mm512_set1_epi64(static_cast<long long>(Rng::kGamma * 8));
  const __m256i one = _mm256_set1_epi32(1), sign = _mm256_set1_epi32(static_cast<int>(1u << level_bits));
  __m512i z = _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(key + first * Rng::kGamma)),
                               _mm512_mullo_epi64(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0), gamma));
  uint64_t j = 0;
  for (; j + 8 <= m; j += 8) {
    const __m512d xd = _mm512_cvtps_pd(_mm256_loadu_ps(x + j));
    const __m512d r = _mm512_mul_pd(_mm512_abs_pd(xd), vscale);
    __m512i t = z;
    t = _mm512_xor_si512(t, _mm512_srli_epi64(t, 30));
    t = _mm512_mullo_epi64(t, c1);
    t = _mm512_xor_si512(t, _mm512_srli_epi64(t, 27));
    t = _mm512_mullo_epi64(t, c2);
    t = _mm512_xor_si512(t, _mm512_srli_epi64(t, 31));
    const __m512d u = _mm512_mul_pd(_mm512_cvtepi64_pd(_mm512_srli_epi64(t, 11)), two_m53);
    z = _mm512_add_epi64(z, step);
    // rc: min(r, s) where r is ordered (r = s gives s either way), 0 where r is NaN.
    const __m512d rc = _mm512_maskz_min_pd(_mm512_cmp_pd_mask(r, r, _CMP_ORD_Q), r, vs);
    const __m256i fl = _mm512_cvttpd_epi32(rc);
    const __m512d frac = _mm512_reduce_pd(rc, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);  // rc − ⌊rc⌋, exact
    const __mmask8 up = _mm512_cmp_pd_mask(u, frac, _CMP_LT_OQ);
    const __mmask8 positive = _mm512_cmp_pd_mask(xd, zero, _CMP_NLT_UQ);
    // The 8-bit masks act on the eight 32-bit codes in a 256-bit register (AVX-512VL): widening
    // them to a 16-bit mask would send each through a general register.
    __m256i l = _mm256_mask_add_epi32(fl, up, fl, one);
    l = _mm256_mask_or_epi32(l, positive, l, sign);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(code + j), l);
  }
  qsgd_codes_portable(x + j, m - j, scale, s, level_bits, key, first + j, code + j);
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace
#endif

bool qsgd_codes_vectorised() noexcept {
#if defined(GRADCODEC_QSGD_AVX512)
  return cpu_avx512dq() && cpu_avx512vl();
#else
  return false;
#endif
}

void qsgd_codes(const float* x, uint64_t m, double scale, double s, unsigned level_bits, uint64_t key, uint64_t first,
                uint32_t* code) noexcept {
#if defined(GRADCODEC_QSGD_AVX512)
  if (qsgd_codes_vectorised()) return codes_avx512(x, m, scale, s, level_bits, key, first, code);
#endif
  qsgd_codes_portable(x, m, scale, s, level_bits, key, first, code);
}

}  // namespace gradcodec::stages::codes
