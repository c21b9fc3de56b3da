// SPDX-License-Identifier: BSD-3-Clause
#include "sparsify/bird_stage1.hpp"

#include "base/cpu.hpp"

#include <algorithm>
#include <bit>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GRADCODEC_BIRD_AVX512 1
#endif

namespace gradcodec::stages {

namespace {

// Branch-free: p = 0 and NaN fail u < p by themselves; the maximum always passes.
size_t decide_portable(const float* l1, uint64_t first, uint64_t end, float lmax, double inv1, const Rng& r,
                       uint64_t* kept) noexcept {
  size_t count = 0;
  for (uint64_t i = first; i < end; ++i) {
    const double u = r.uniform_at(i);
    const bool keep = (l1[i] >= lmax) | (u < static_cast<double>(l1[i]) * inv1);
    kept[count] = i;
    count += keep;
  }
  return count;
}

#if defined(GRADCODEC_BIRD_AVX512)
// GCC 12 reports the intrinsics' own _mm512_undefined_*() placeholders as "maybe uninitialized".
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// The same decisions eight blocks at a time. Integer steps are exact mod 2^64 as in Rng::mix;
// z >> 11 < 2^53 converts to double exactly; the products and comparisons are the portable
// loop's IEEE operations lane by lane (no contraction: nothing is added to a product).
__attribute__((target("avx512f,avx512dq"))) size_t decide_avx512(const float* l1, uint64_t first, uint64_t end,
                                                                  float lmax, double inv1, const Rng& r,
                                                                  uint64_t* kept) noexcept {
  size_t count = 0;
  uint64_t i = first;
  if (end - first >= 8) {
    const __m512i lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    __m512i idx = _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(first)), lane);
    const __m512i eight = _mm512_set1_epi64(8);
    // key + idx·γ steps by 8γ from one group of lanes to the next (exact mod 2^64): one add in
    // place of a 64-bit multiply per step.
    const __m512i gamma8 = _mm512_set1_epi64(static_cast<long long>(Rng::kGamma * 8));
    __m512i z0 = _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(r.key())),
                                  _mm512_mullo_epi64(idx, _mm512_set1_epi64(static_cast<long long>(Rng::kGamma))));
    const __m512i c1 = _mm512_set1_epi64(static_cast<long long>(0xbf58476d1ce4e5b9ULL));
    const __m512i c2 = _mm512_set1_epi64(static_cast<long long>(0x94d049bb133111ebULL));
    const __m512d scale = _mm512_set1_pd(0x1.0p-53), inv = _mm512_set1_pd(inv1);
    const __m512d top = _mm512_set1_pd(static_cast<double>(lmax));  // l ≥ lmax ⟺ (double)l ≥ (double)lmax
    for (; i + 8 <= end; i += 8) {
      __m512i z = _mm512_mullo_epi64(_mm512_xor_si512(z0, _mm512_srli_epi64(z0, 30)), c1);
      z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), c2);
      z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
      const __m512d u = _mm512_mul_pd(_mm512_cvtepi64_pd(_mm512_srli_epi64(z, 11)), scale);
      const __m512d l = _mm512_cvtps_pd(_mm256_loadu_ps(l1 + i));
      const __m512d p = _mm512_mul_pd(l, inv);
      const __mmask8 keep =
          static_cast<__mmask8>(_mm512_cmp_pd_mask(u, p, _CMP_LT_OQ) | _mm512_cmp_pd_mask(l, top, _CMP_GE_OQ));
      // Compressed in a register and stored whole: the lanes past popcount(keep) are zeros that
      // the next store (or nothing) overwrites. kept + count + 8 ≤ kept + (i + 8 − first) stays in
      // the caller's room of end − first entries. Compress-to-memory is microcoded on Zen 4 and
      // much slower.
      _mm512_storeu_si512(kept + count, _mm512_maskz_compress_epi64(keep, idx));
      count += static_cast<size_t>(std::popcount(static_cast<unsigned>(keep)));
      idx = _mm512_add_epi64(idx, eight);
      z0 = _mm512_add_epi64(z0, gamma8);
    }
  }
  return count + decide_portable(l1, i, end, lmax, inv1, r, kept + count);
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif

}  // namespace

size_t bird_stage1_portable(std::span<const float> l1, float lmax, double inv1, const Rng& r, uint64_t* out) noexcept {
  return decide_portable(l1.data(), 0, l1.size(), lmax, inv1, r, out);
}

bool bird_stage1_vectorised() noexcept {
#if defined(GRADCODEC_BIRD_AVX512)
  return cpu_avx512dq();
#else
  return false;
#endif
}

size_t bird_stage1(std::span<const float> l1, float lmax, double inv1, const Rng& r, uint64_t* out) noexcept {
#if defined(GRADCODEC_BIRD_AVX512)
  if (cpu_avx512dq()) return decide_avx512(l1.data(), 0, l1.size(), lmax, inv1, r, out);
#endif
  return decide_portable(l1.data(), 0, l1.size(), lmax, inv1, r, out);
}

}  // namespace gradcodec::stages
