#include "quantize/nibbles.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GRADCODEC_NIBBLES_AVX512 1
#endif

namespace gradcodec::stages::codes {

void expand_nibbles_portable(const uint8_t* in, uint64_t count, const float* table, float* out) noexcept {
  uint64_t i = 0;
  for (; i + 2 <= count; i += 2, ++in) out[i] = table[*in >> 4], out[i + 1] = table[*in & 15];
  if (i < count) out[i] = table[*in >> 4];
}

#if defined(GRADCODEC_NIBBLES_AVX512)
namespace {

// GCC 12 reports the intrinsics' own _mm512_undefined_*() placeholders as "maybe uninitialized".
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// Sixteen values per step: eight bytes, each doubled (bytes b0 b0 b1 b1 …), widened to 32-bit
// lanes; the even lanes shifted right by 4 (high nibble), the odd ones left as they are —
// vpermps reads only the low four bits of each index lane, which is the low nibble. The permute
// copies table entries: the same bits as the portable loop.
__attribute__((target("avx512f"))) void expand_avx512(const uint8_t* in, uint64_t count, const float* table,
                                                       float* out) noexcept {
  const __m512 t = _mm512_loadu_ps(table);
  uint64_t i = 0;
  for (; i + 16 <= count; i += 16, in += 8) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(in));
    const __m512i lanes = _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(bytes, bytes));
    const __m512i idx = _mm512_mask_srli_epi32(lanes, static_cast<__mmask16>(0x5555), lanes, 4);
    _mm512_storeu_ps(out + i, _mm512_permutexvar_ps(idx, t));
  }
  expand_nibbles_portable(in, count - i, table, out + i);
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

bool has_avx512() noexcept {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

}  // namespace
#endif

bool expand_nibbles_vectorised() noexcept {
#if defined(GRADCODEC_NIBBLES_AVX512)
  return has_avx512();
#else
  return false;
#endif
}

void expand_nibbles(const uint8_t* in, uint64_t count, const float* table, float* out) noexcept {
#if defined(GRADCODEC_NIBBLES_AVX512)
  if (has_avx512()) return expand_avx512(in, count, table, out);
#endif
  expand_nibbles_portable(in, count, table, out);
}

}  // namespace gradcodec::stages::codes
