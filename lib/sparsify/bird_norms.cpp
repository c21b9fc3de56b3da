// SPDX-License-Identifier: BSD-3-Clause
#include "sparsify/bird_norms.hpp"

#include "base/cpu.hpp"

#include <gradcodec/error.hpp>
#include <gradcodec/plugin/stage.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GRADCODEC_NORMS_AVX2 1
#endif

namespace gradcodec::stages {

namespace {

// The norms read elements through a loader ld(i) → float: a plain array, or the little-endian
// bytes of an f32 tensor read in place (memcpy of 4 bytes: no copy of the tensor, no aliasing).
struct ArrayLoad {
  const float* x;
  float operator()(uint64_t i) const noexcept { return x[i]; }
  const uint8_t* bytes() const noexcept { return reinterpret_cast<const uint8_t*>(x); }
};
struct BytesLoad {
  const uint8_t* p;
  float operator()(uint64_t i) const noexcept {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
  const uint8_t* bytes() const noexcept { return p; }
};

// ‖·‖₁ and ‖·‖∞ of elements [off, off + len): in order below 16 elements, else in 8 lanes
// (lane j adds elements j, j + 8, …; with SSE2 as two 4-lane vectors) combined in order. NaN propagates into the sum and is skipped by the max.
template <class Ld>
inline void run_norms(const Ld& ld, uint64_t off, uint64_t len, float& sum, float& max) noexcept {
  if (len < 16) {
    float s = 0, mx = 0;
    for (uint64_t k = 0; k < len; ++k) {
      const float a = std::fabs(ld(off + k));
      s += a;
      mx = a > mx ? a : mx;
    }
    sum = s, max = mx;
    return;
  }
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0}, mx[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  uint64_t k = 0;
#if defined(__SSE2__)
  {  // the 8 lanes as two vectors: the same adds in the same order, lane by lane
    const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7FFFFFFF));
    const uint8_t* p = ld.bytes() + 4 * off;
    __m128 s0 = _mm_setzero_ps(), s1 = _mm_setzero_ps(), m0 = _mm_setzero_ps(), m1 = _mm_setzero_ps();
    for (; k + 8 <= len; k += 8) {
      const __m128 a0 = _mm_and_ps(_mm_loadu_ps(reinterpret_cast<const float*>(p + 4 * k)), abs_mask);
      const __m128 a1 = _mm_and_ps(_mm_loadu_ps(reinterpret_cast<const float*>(p + 4 * k + 16)), abs_mask);
      s0 = _mm_add_ps(s0, a0), s1 = _mm_add_ps(s1, a1);
      m0 = _mm_max_ps(a0, m0), m1 = _mm_max_ps(a1, m1);
    }
    _mm_storeu_ps(s, s0), _mm_storeu_ps(s + 4, s1), _mm_storeu_ps(mx, m0), _mm_storeu_ps(mx + 4, m1);
  }
#else
  for (; k + 8 <= len; k += 8)
    for (int j = 0; j < 8; ++j) {
      const float a = std::fabs(ld(off + k + j));
      s[j] += a;
      mx[j] = a > mx[j] ? a : mx[j];
    }
#endif
  for (int j = 0; k < len; ++k, ++j) {
    const float a = std::fabs(ld(off + k));
    s[j] += a;
    mx[j] = a > mx[j] ? a : mx[j];
  }
  float total = 0, top = 0;
  for (int j = 0; j < 8; ++j) total += s[j], top = mx[j] > top ? mx[j] : top;
  sum = total, max = top;
}

// Blocks longer than kPiece are summed piece by piece (pieces of kPiece elements, partial sums
// added in order), so a reader that converts a tensor kPiece elements at a time gets the very
// same norms as one that holds the whole tensor.
constexpr uint64_t kPiece = 8192;

#if defined(__SSE2__)
// Norms of 4·G blocks of m < 16 elements at x (little-endian f32 bytes, any alignment), block j
// in lane j % 4 of group j / 4: the four rows of a group are loaded 4 elements at a time and
// transposed, so each lane adds its block's elements in order, exactly as run_norms does
// (max_ps(a, mx) is a > mx ? a : mx: NaN never wins). Reads only the blocks' own bytes.
template <int G>
inline void small_norms_sse(const uint8_t* x, uint64_t m, float* l1, float* linf) noexcept {
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7FFFFFFF));
  __m128 s[G], mx[G];
  for (int g = 0; g < G; ++g) s[g] = _mm_setzero_ps(), mx[g] = _mm_setzero_ps();
  const uint64_t row = 4 * m;  // bytes per block
  auto add = [&](int g, __m128 v) {
    v = _mm_and_ps(v, abs_mask);
    s[g] = _mm_add_ps(s[g], v);
    mx[g] = _mm_max_ps(v, mx[g]);
  };
  uint64_t k = 0;
  for (; k + 4 <= m; k += 4)
    for (int g = 0; g < G; ++g) {
      const uint8_t* p = x + 4 * g * row + 4 * k;
      __m128 r0 = _mm_loadu_ps(reinterpret_cast<const float*>(p));
      __m128 r1 = _mm_loadu_ps(reinterpret_cast<const float*>(p + row));
      __m128 r2 = _mm_loadu_ps(reinterpret_cast<const float*>(p + 2 * row));
      __m128 r3 = _mm_loadu_ps(reinterpret_cast<const float*>(p + 3 * row));
      _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
      add(g, r0), add(g, r1), add(g, r2), add(g, r3);
    }
  for (; k < m; ++k)
    for (int g = 0; g < G; ++g) {
      const uint8_t* p = x + 4 * g * row + 4 * k;
      float e[4];
      for (int j = 0; j < 4; ++j) std::memcpy(&e[j], p + j * row, 4);
      add(g, _mm_loadu_ps(e));
    }
  for (int g = 0; g < G; ++g) _mm_storeu_ps(l1 + 4 * g, s[g]), _mm_storeu_ps(linf + 4 * g, mx[g]);
}
#endif

// The short-block loops ask for the cache lines up to kAhead bytes ahead of the group they are
// on. Without it they run at about half the speed of a plain read pass over a memory-resident
// tensor (the hardware prefetcher alone keeps too few lines in flight for them). The lines go to
// L2, not L1 (prefetcht2): L1's few fill buffers stalled the loop on its prefetches
// (docs/performance.md, "Real gradients").
constexpr uint64_t kAhead = 16384;

// Prefetches each 64-byte line of [begin + kAhead, end) once, as `at` moves through the range.
// (A loop of prefetches with nothing else in it may be deleted by the optimiser as having no
// effect; this one moves `next`, which outlives it.)
class Prefetcher {
 public:
  Prefetcher(const uint8_t* begin, const uint8_t* end) noexcept
      : next_(static_cast<uint64_t>(end - begin) > kAhead ? begin + kAhead : end), end_(end) {}
  void ahead_of(const uint8_t* at) noexcept {
    const uint8_t* want = static_cast<uint64_t>(end_ - at) > kAhead ? at + kAhead : end_;
    for (; next_ < want; next_ += 64) __builtin_prefetch(next_, 0, 1);
  }

 private:
  const uint8_t* next_;
  const uint8_t* end_;
};

#if defined(GRADCODEC_NORMS_AVX2)
// The 8×8 f32 matrix whose row j is r[j], transposed: lane j of o[c] is lane c of r[j].
__attribute__((target("avx2"))) inline void transpose8(const __m256* r, __m256* o) noexcept {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  o[0] = _mm256_permute2f128_ps(u0, u4, 0x20), o[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  o[2] = _mm256_permute2f128_ps(u2, u6, 0x20), o[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  o[4] = _mm256_permute2f128_ps(u0, u4, 0x31), o[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  o[6] = _mm256_permute2f128_ps(u2, u6, 0x31), o[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// The 8×8 f32 matrix whose row j is the 8 elements at p + j·row (little-endian bytes, any
// alignment), transposed: lane j of o[c] is element c of row j.
__attribute__((target("avx2"))) inline void transpose8(const uint8_t* p, uint64_t row, __m256* o) noexcept {
  __m256 r[8];
  for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(reinterpret_cast<const float*>(p + j * row));
  transpose8(r, o);
}

// Norms of the first 16·⌊blocks/16⌋ blocks of 8 ≤ m < 16 elements at x, 16 at a time as two
// groups of 8 lanes (block j of a group in lane j). A group's columns 0–7 come from one
// transpose of its eight rows, columns 8…m−1 from the last m−8 columns of a second transpose
// taken at column m−8 (for 3×3 kernels, m = 9, the one column is gathered instead, which is
// faster on BM_bird_norms/9), so each lane adds its block's elements in order, exactly as run_norms
// does (max(a, mx) is a > mx ? a : mx). Reads only the blocks' own bytes. Returns the blocks done.
// kNine is m = 9, a loop of its own: with the other widths' runtime column range in the same
// loop, the compiler kept the transposed columns in memory.
template <bool kNine>
__attribute__((target("avx2"))) uint64_t norms_avx2(const uint8_t* x, uint64_t blocks, uint64_t m, float* l1,
                                                    float* linf, Prefetcher& pf) noexcept {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const uint64_t row = 4 * m;
  const int tail_from = 16 - static_cast<int>(m);  // first column of the second transpose to add
  uint64_t b = 0;
  for (; b + 16 <= blocks; b += 16) {
    const uint8_t* p = x + b * row;
    pf.ahead_of(p + 16 * row);
    for (int g = 0; g < 2; ++g, p += 8 * row) {
      __m256 s = _mm256_setzero_ps(), mx = _mm256_setzero_ps(), o[8];
      transpose8(p, row, o);
      for (int c = 0; c < 8; ++c) {
        const __m256 a = _mm256_and_ps(o[c], abs_mask);
        s = _mm256_add_ps(s, a);
        mx = _mm256_max_ps(a, mx);
      }
      if constexpr (kNine) {  // one more column: gathered rather than a second transpose
        const __m256i at = _mm256_setr_epi32(8, 17, 26, 35, 44, 53, 62, 71);
        const __m256 a = _mm256_and_ps(_mm256_i32gather_ps(reinterpret_cast<const float*>(p), at, 4), abs_mask);
        s = _mm256_add_ps(s, a);
        mx = _mm256_max_ps(a, mx);
      } else if (m > 8) {
        transpose8(p + 4 * (m - 8), row, o);
        for (int c = tail_from; c < 8; ++c) {
          const __m256 a = _mm256_and_ps(o[c], abs_mask);
          s = _mm256_add_ps(s, a);
          mx = _mm256_max_ps(a, mx);
        }
      }
      _mm256_storeu_ps(l1 + b + 8 * g, s);
      _mm256_storeu_ps(linf + b + 8 * g, mx);
    }
  }
  return b;
}

// Blocks of 16 to kMidBlock − 1 elements (5×5 and 7×7 kernels, short rows) take mid_norms_avx2.
constexpr uint64_t kMidBlock = 128;

// Norms of the first 8·⌊blocks/8⌋ blocks of 16 ≤ m < kMidBlock elements at x, 8 at a time. Each
// block's 8 lanes are one vector, added exactly as run_norms adds them: 8 elements at a time in
// order, then the m mod 8 last elements into lanes 0, 1, … (loaded as the block's last 8 and
// rotated; the lanes they do not reach get +0, which changes no sum or max). The 8 blocks' lane
// vectors are then transposed, so that lanes 0…7 are combined in order for 8 blocks at once
// rather than one block at a time. Reads only the blocks' own bytes. Returns the blocks done.
__attribute__((target("avx2"))) uint64_t mid_norms_avx2(const uint8_t* x, uint64_t blocks, uint64_t m, float* l1,
                                                        float* linf, Prefetcher& pf) noexcept {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const uint64_t row = 4 * m, whole = m / 8 * 8;
  const int rest = static_cast<int>(m % 8);
  // Lane j < rest takes element whole + j, which is lane 8 − rest + j of the last 8 elements.
  const __m256i rotate = _mm256_setr_epi32((8 - rest) % 8, (9 - rest) % 8, (10 - rest) % 8, (11 - rest) % 8,
                                           (12 - rest) % 8, (13 - rest) % 8, (14 - rest) % 8, (15 - rest) % 8);
  const __m256 rest_mask = _mm256_castsi256_ps(_mm256_setr_epi32(
      rest > 0 ? 0x7FFFFFFF : 0, rest > 1 ? 0x7FFFFFFF : 0, rest > 2 ? 0x7FFFFFFF : 0, rest > 3 ? 0x7FFFFFFF : 0,
      rest > 4 ? 0x7FFFFFFF : 0, rest > 5 ? 0x7FFFFFFF : 0, rest > 6 ? 0x7FFFFFFF : 0, 0));
  uint64_t b = 0;
  for (; b + 8 <= blocks; b += 8) {
    const uint8_t* p = x + b * row;
    pf.ahead_of(p + 8 * row);
    __m256 s[8], mx[8];
    for (int j = 0; j < 8; ++j) {
      const float* e = reinterpret_cast<const float*>(p + j * row);
      __m256 sj = _mm256_setzero_ps(), mj = _mm256_setzero_ps();
      for (uint64_t k = 0; k < whole; k += 8) {
        const __m256 a = _mm256_and_ps(_mm256_loadu_ps(e + k), abs_mask);
        sj = _mm256_add_ps(sj, a);
        mj = _mm256_max_ps(a, mj);
      }
      if (rest) {
        const __m256 a = _mm256_and_ps(_mm256_permutevar8x32_ps(_mm256_loadu_ps(e + m - 8), rotate), rest_mask);
        sj = _mm256_add_ps(sj, a);
        mj = _mm256_max_ps(a, mj);
      }
      s[j] = sj, mx[j] = mj;
    }
    __m256 ls[8], lm[8];  // ls[c]: lane c of the 8 blocks
    transpose8(s, ls);
    transpose8(mx, lm);
    __m256 total = _mm256_setzero_ps(), top = _mm256_setzero_ps();
    for (int c = 0; c < 8; ++c) {
      total = _mm256_add_ps(total, ls[c]);
      top = _mm256_max_ps(lm[c], top);
    }
    _mm256_storeu_ps(l1 + b, total);
    _mm256_storeu_ps(linf + b, top);
  }
  return b;
}
#endif

// Norms of `blocks` blocks of m elements starting at element `first`. A block of one element is
// |x| itself (0 + |x|, and NaN is no maximum). Blocks shorter than 16 (conv kernels) are done
// several at a time, interleaved: each block still adds its elements in order (the same arithmetic
// as run_norms), but independent chains hide the add latency. With AVX2 (and `wide`), 8 ≤ m < 16 go
// 16 at a time (norms_avx2; faster than the SSE2 loop on a memory-resident tensor: BM_bird_norms/9
// against BM_bird_norms_without_avx2/9); with SSE2 the others go 16 at a time as four 4-lane groups
// (small_norms_sse; faster than two groups on VGG16), then 8 at a time as two; the rest 8 at a time
// in scalar lanes. With AVX2 (and `wide`), blocks of 16 ≤ m < kMidBlock go 8 at a time
// (mid_norms_avx2: faster than run_norms block by block on 5×5 kernels, BM_bird_norms/25 against
// BM_bird_norms_without_avx2/25). The measured gains: docs/performance.md, "Figures behind design
// choices".
// `pf` covers the whole run of blocks this call is part of.
template <class Ld>
void norms_into(const Ld& ld, uint64_t first, uint64_t blocks, uint64_t m, float* l1, float* linf, Prefetcher& pf,
                bool wide) noexcept {
  uint64_t b = 0;
  if (m == 1) {
    for (; b < blocks; ++b) {
      const float a = std::fabs(ld(first + b));
      l1[b] = 0.0f + a;
      linf[b] = a > 0.0f ? a : 0.0f;
    }
    return;
  }
  if (m < 16 && m > 0) {
    const uint8_t* x = ld.bytes() + 4 * first;
#if defined(GRADCODEC_NORMS_AVX2)
    if (wide && m >= 8 && cpu_avx2())
      b = m == 9 ? norms_avx2<true>(x, blocks, m, l1, linf, pf) : norms_avx2<false>(x, blocks, m, l1, linf, pf);
#else
    (void)wide;
#endif
#if defined(__SSE2__)
    for (; b + 16 <= blocks; b += 16) {
      pf.ahead_of(x + 4 * (b + 16) * m);
      small_norms_sse<4>(x + 4 * b * m, m, l1 + b, linf + b);
    }
    for (; b + 8 <= blocks; b += 8) small_norms_sse<2>(x + 4 * b * m, m, l1 + b, linf + b);
#endif
    (void)x;
  }
  if (m < 16) {
    for (; b + 8 <= blocks; b += 8) {
      float s[8] = {0, 0, 0, 0, 0, 0, 0, 0}, mx[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      const uint64_t base = first + b * m;
      for (uint64_t k = 0; k < m; ++k)
        for (uint64_t j = 0; j < 8; ++j) {
          const float a = std::fabs(ld(base + j * m + k));
          s[j] += a;
          mx[j] = a > mx[j] ? a : mx[j];
        }
      for (int j = 0; j < 8; ++j) l1[b + j] = s[j], linf[b + j] = mx[j];
    }
  }
#if defined(GRADCODEC_NORMS_AVX2)
  if (wide && m >= 16 && m < kMidBlock && cpu_avx2()) b = mid_norms_avx2(ld.bytes() + 4 * first, blocks, m, l1, linf, pf);
#endif
  for (; b < blocks; ++b) {
    const uint64_t at = first + b * m;
    if (m <= kPiece) {
      run_norms(ld, at, m, l1[b], linf[b]);
      continue;
    }
    float s = 0, mx = 0;
    for (uint64_t off = 0; off < m; off += kPiece) {
      float ps, pm;
      run_norms(ld, at + off, std::min(kPiece, m - off), ps, pm);
      s += ps;
      mx = pm > mx ? pm : mx;
    }
    l1[b] = s, linf[b] = mx;
  }
}

#if defined(GRADCODEC_NORMS_AVX2)
// The first 32·⌊n/32⌋ elements of v in one AVX2 pass: their largest (max_ps(x, top) is
// x > top ? x : top from 0, as in bird_max: NaN never enters, so the grouping cannot change the
// maximum) and whether any is Inf or NaN (|x| > FLT_MAX, or unordered). Returns the elements done.
// Two scalar passes (bird_max, then the bits of each element) cost a sizeable share of the time
// of the 3×3 norms they summarise (docs/performance.md, "Figures behind design choices").
__attribute__((target("avx2"))) uint64_t scan_avx2(const float* v, uint64_t n, float& top, bool& nonfinite) noexcept {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 largest = _mm256_set1_ps(FLT_MAX);
  __m256 mx[4], bad[4];
  for (int j = 0; j < 4; ++j) mx[j] = _mm256_setzero_ps(), bad[j] = _mm256_setzero_ps();
  uint64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int j = 0; j < 4; ++j) {
      const __m256 x = _mm256_loadu_ps(v + i + 8 * j);
      mx[j] = _mm256_max_ps(x, mx[j]);
      bad[j] = _mm256_or_ps(bad[j], _mm256_cmp_ps(_mm256_and_ps(x, abs_mask), largest, _CMP_NLE_UQ));
    }
  float lanes[8];
  _mm256_storeu_ps(lanes, _mm256_max_ps(_mm256_max_ps(mx[0], mx[1]), _mm256_max_ps(mx[2], mx[3])));
  float t = 0;
  for (float x : lanes) t = x > t ? x : t;
  top = t;
  nonfinite = _mm256_movemask_ps(_mm256_or_ps(_mm256_or_ps(bad[0], bad[1]), _mm256_or_ps(bad[2], bad[3]))) != 0;
  return i;
}
#endif

// The summary of the L1 norms, taken a chunk at a time right after the chunk is made (while it
// is in cache) rather than in passes of their own over all of them.
class L1Scan {
 public:
  void add(const float* l1, uint64_t n) noexcept {
    uint64_t i = 0;
    float top = 0;
    bool bad = false;
#if defined(GRADCODEC_NORMS_AVX2)
    if (cpu_avx2()) i = scan_avx2(l1, n, top, bad);
#endif
    const float rest = bird_max({l1 + i, n - i});
    top = rest > top ? rest : top;
    sum_.l1_max = top > sum_.l1_max ? top : sum_.l1_max;
    for (; i < n; ++i) {
      uint32_t bits;
      std::memcpy(&bits, l1 + i, 4);
      bad |= (bits & 0x7f800000u) == 0x7f800000u;
    }
    if (bad) sum_.finite = false;
  }
  NormsSummary summary() const noexcept { return sum_; }

 private:
  NormsSummary sum_;
};

// Blocks per chunk of norms_scanned: 4 KiB of L1 norms.
constexpr uint64_t kScanChunk = 1024;

// The norms of `blocks` blocks of m elements read by ld, summarised as they are made.
template <class Ld>
NormsSummary norms_scanned(const Ld& ld, uint64_t blocks, uint64_t m, float* l1, float* linf, bool wide) {
  Prefetcher pf(ld.bytes(), ld.bytes() + 4 * blocks * m);
  L1Scan scan;
  for (uint64_t b = 0; b < blocks; b += kScanChunk) {
    const uint64_t c = std::min(kScanChunk, blocks - b);
    norms_into(ld, b * m, c, m, l1 + b, linf + b, pf, wide);
    scan.add(l1 + b, c);
  }
  return scan.summary();
}

// Sizes an output buffer for n norms. Its contents are all overwritten, so a buffer too small is
// dropped before it grows: no copy of the previous tensor's norms into the new allocation.
void size_for(std::vector<float>& out, uint64_t n) {
  if (n > out.capacity()) out = std::vector<float>();
  out.resize(n);
}

}  // namespace

float bird_max(std::span<const float> v) noexcept {
  uint64_t i = 0;
  float top = 0;
#if defined(__SSE2__)
  // _mm_max_ps(x, mx) is x > mx ? x : mx, so NaN never wins here either; the grouping cannot
  // change the result (a NaN never enters, and +0 is never replaced by −0).
  __m128 mx[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
  for (; i + 16 <= v.size(); i += 16)
    for (int j = 0; j < 4; ++j) mx[j] = _mm_max_ps(_mm_loadu_ps(v.data() + i + 4 * j), mx[j]);
  float lanes[16];
  for (int j = 0; j < 4; ++j) _mm_storeu_ps(lanes + 4 * j, mx[j]);
  for (float x : lanes) top = x > top ? x : top;
#endif
  for (; i < v.size(); ++i) top = v[i] > top ? v[i] : top;
  return top;
}

NormsSummary bird_norms(std::span<const float> v, uint64_t m, std::vector<float>& l1, std::vector<float>& linf) {
  const uint64_t blocks = m == 0 ? 0 : v.size() / m;
  size_for(l1, blocks);
  size_for(linf, blocks);
  return norms_scanned(ArrayLoad{v.data()}, blocks, m, l1.data(), linf.data(), true);
}

NormsSummary bird_norms(const Tensor& t, uint64_t m, std::vector<float>& l1, std::vector<float>& linf) {
  const uint64_t n = t.elements(), blocks = m == 0 ? 0 : n / m;
  const size_t es = dtype_size(t.dtype());
  if (t.data.size() < n * es) fail(ErrorCode::Internal, "bird: tensor " + t.name() + " is shorter than its shape");
  size_for(l1, blocks);
  size_for(linf, blocks);
  if (blocks == 0) return {};
  const uint8_t* src = t.data.data();
  if (t.dtype() == DType::F32) return norms_scanned(BytesLoad{src}, blocks, m, l1.data(), linf.data(), true);
  // Other dtypes: convert kPiece elements at a time (whole blocks when m ≤ kPiece).
  L1Scan scan;
  if (m <= kPiece) {
    const uint64_t per = kPiece / m;
    std::vector<float> buf(per * m);
    for (uint64_t b = 0; b < blocks; b += per) {
      const uint64_t c = std::min(per, blocks - b);
      to_f32(t.dtype(), src + b * m * es, c * m, buf.data());
      const uint8_t* converted_end = reinterpret_cast<const uint8_t*>(buf.data() + c * m);
      Prefetcher none(converted_end, converted_end);  // the buffer was just written: in cache
      norms_into(ArrayLoad{buf.data()}, 0, c, m, l1.data() + b, linf.data() + b, none, true);
      scan.add(l1.data() + b, c);
    }
    return scan.summary();
  }
  std::vector<float> buf(kPiece);
  for (uint64_t b = 0; b < blocks; ++b) {
    float s = 0, mx = 0;
    for (uint64_t off = 0; off < m; off += kPiece) {
      const uint64_t len = std::min(kPiece, m - off);
      to_f32(t.dtype(), src + (b * m + off) * es, len, buf.data());
      float ps, pm;
      run_norms(ArrayLoad{buf.data()}, 0, len, ps, pm);
      s += ps;
      mx = pm > mx ? pm : mx;
    }
    l1[b] = s, linf[b] = mx;
  }
  scan.add(l1.data(), blocks);
  return scan.summary();
}

NormsSummary bird_norms_without_avx2(std::span<const float> v, uint64_t m, std::vector<float>& l1,
                                     std::vector<float>& linf) {
  const uint64_t blocks = m == 0 ? 0 : v.size() / m;
  size_for(l1, blocks);
  size_for(linf, blocks);
  return norms_scanned(ArrayLoad{v.data()}, blocks, m, l1.data(), linf.data(), false);
}

bool bird_norms_avx2() noexcept {
#if defined(GRADCODEC_NORMS_AVX2)
  return cpu_avx2();
#else
  return false;
#endif
}

}  // namespace gradcodec::stages
