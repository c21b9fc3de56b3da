// SPDX-License-Identifier: BSD-3-Clause
#include "sparsify/bird_trials.hpp"

#include "base/cpu.hpp"

#include <bit>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GRADCODEC_TRIALS_AVX512 1
#endif

namespace gradcodec::stages {

uint64_t bird_plus_trials_portable(std::span<const uint64_t> u_set, std::span<const float> pinf, const Rng& r,
                                   const PowLess& less) noexcept {
  uint64_t k = 0;
  for (size_t j = 0; j < u_set.size(); ++j) k += less(r.uniform_at(u_set[j]), pinf[j]);
  return k;
}

#if defined(GRADCODEC_TRIALS_AVX512)
namespace {

#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// Eight trials at a time, each lane the portable loop's operations: the counter U[j] mixed as
// Rng::mix mixes it (exact mod 2^64), u = (z >> 11)·2⁻⁵³ (exact: below 2^53); p converted to
// double (exact), so p ≥ 0 and p < 1 are the float tests (false on NaN) and ⌊p·256⌋ is the float
// product's truncation (p·256 is exact in either). Lanes with p outside [0, 1) gather nothing and,
// with the lanes whose u falls in the table's band, go to PowLess one by one.
__attribute__((target("avx512f,avx512dq"))) uint64_t trials_avx512(std::span<const uint64_t> u_set,
                                                                   std::span<const float> pinf, const Rng& r,
                                                                   const PowLess& less) noexcept {
  const __m512i key = _mm512_set1_epi64(static_cast<long long>(r.key()));
  const __m512i gamma = _mm512_set1_epi64(static_cast<long long>(Rng::kGamma));
  const __m512i c1 = _mm512_set1_epi64(static_cast<long long>(0xbf58476d1ce4e5b9ULL));
  const __m512i c2 = _mm512_set1_epi64(static_cast<long long>(0x94d049bb133111ebULL));
  const __m512d scale = _mm512_set1_pd(0x1.0p-53), zero = _mm512_setzero_pd(), one = _mm512_set1_pd(1.0);
  const __m512d by256 = _mm512_set1_pd(256.0);
  uint64_t k = 0;
  size_t j = 0;
  for (; j + 8 <= u_set.size(); j += 8) {
    __m512i z = _mm512_add_epi64(key, _mm512_mullo_epi64(_mm512_loadu_si512(u_set.data() + j), gamma));
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), c1);
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), c2);
    z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
    const __m512d u = _mm512_mul_pd(_mm512_cvtepi64_pd(_mm512_srli_epi64(z, 11)), scale);
    const __m512d p = _mm512_cvtps_pd(_mm256_loadu_ps(pinf.data() + j));
    const __mmask8 in = _mm512_cmp_pd_mask(p, zero, _CMP_GE_OQ) & _mm512_cmp_pd_mask(p, one, _CMP_LT_OQ);
    const __m256i at = _mm512_cvttpd_epi32(_mm512_mul_pd(p, by256));
    const __m512d lo = _mm512_mask_i32gather_pd(zero, in, at, less.lo(), 8);
    const __m512d hi = _mm512_mask_i32gather_pd(zero, in, at, less.hi(), 8);
    const __mmask8 band = _mm512_cmp_pd_mask(u, lo, _CMP_GE_OQ) & _mm512_cmp_pd_mask(u, hi, _CMP_LT_OQ);
    const __mmask8 slow = static_cast<__mmask8>(~in | band);
    const __mmask8 yes = static_cast<__mmask8>(_mm512_cmp_pd_mask(u, lo, _CMP_LT_OQ) & ~slow);
    k += static_cast<uint64_t>(std::popcount(static_cast<unsigned>(yes)));
    if (slow) [[unlikely]] {
      alignas(64) double us[8];
      _mm512_store_pd(us, u);
      for (unsigned t = 0; t < 8; ++t)
        if ((slow >> t) & 1) k += less(us[t], pinf[j + t]);
    }
  }
  return k + bird_plus_trials_portable(u_set.subspan(j), pinf.subspan(j), r, less);
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace
#endif

bool bird_plus_trials_vectorised() noexcept {
#if defined(GRADCODEC_TRIALS_AVX512)
  return cpu_avx512dq();
#else
  return false;
#endif
}

uint64_t bird_plus_trials(std::span<const uint64_t> u_set, std::span<const float> pinf, const Rng& r,
                          const PowLess& less) noexcept {
#if defined(GRADCODEC_TRIALS_AVX512)
  if (bird_plus_trials_vectorised()) return trials_avx512(u_set, pinf, r, less);
#endif
  return bird_plus_trials_portable(u_set, pinf, r, less);
}

}  // namespace gradcodec::stages
