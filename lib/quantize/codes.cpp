// SPDX-License-Identifier: BSD-3-Clause
#include "quantize/codes.hpp"

#include <gradcodec/detail/pages.hpp>

#include <array>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <cmath>
#include <cstring>
#include <limits>

namespace gradcodec::stages::codes {

std::span<const float> coded_values(Payload& p) {
  if (p.sparse || p.lowrank) return p.values;
  return p.f32_view();  // dense: the source's own f32 bytes when nothing changed them (no copy)
}

uint64_t packed_bytes(uint64_t count, uint64_t bits, const char* stage) {
  if (bits != 0 && count > (std::numeric_limits<uint64_t>::max() - 7) / bits)
    fail(ErrorCode::Corrupt, std::string(stage) + ": " + std::to_string(count) + " values cannot be coded");
  return (count * bits + 7) / 8;
}

std::span<const uint8_t> stream(const Streams& in, const char* name, const char* stage) {
  const Stream* s = in.find(name);
  if (!s) fail(ErrorCode::Corrupt, std::string(stage) + ": missing stream '" + name + "'");
  return s->view();
}

void expect_bytes(const char* stage, const char* name, uint64_t got, uint64_t want) {
  if (got != want)
    fail(ErrorCode::Corrupt, std::string(stage) + ": " + name + " stream holds " + std::to_string(got) +
                                 " bytes, expected " + std::to_string(want));
}

std::vector<float> read_f32s(std::span<const uint8_t> bytes, uint64_t count, const char* stage, const char* name) {
  expect_bytes(stage, name, bytes.size(), packed_bytes(count, 32, stage));
  std::vector<float> v(count);
  if (count) std::memcpy(v.data(), bytes.data(), count * 4);
  return v;
}

void write_f32s(Stream& s, std::span<const float> v) {
  const size_t at = s.bytes.size();
  s.bytes.resize(at + v.size() * 4);
  if (!v.empty()) std::memcpy(s.bytes.data() + at, v.data(), v.size() * 4);
}

void BitUnpacker::expect_end() const {
  if (pos_ != d_.size())
    fail(ErrorCode::Corrupt, std::string(stage_) + ": " + std::to_string(d_.size() - pos_) + " trailing bytes in the " +
                                 name_ + " stream");
  if (acc_ != 0) fail(ErrorCode::Corrupt, std::string(stage_) + ": nonzero padding bits in the " + name_ + " stream");
}

void BitUnpacker::ended() const {
  fail(ErrorCode::Corrupt, std::string(stage_) + ": " + name_ + " stream ends early (" + std::to_string(d_.size()) +
                               " bytes)");
}

void note_nonfinite(Payload& p, std::span<const float> v) noexcept {
  if (!p.source || p.source->dtype() != DType::F32 || p.sparse || p.lowrank || v.size() != p.n) return;
  uint64_t n = 0;
  for (float x : v) n += std::isfinite(x) ? 0 : 1;
  p.nonfinite = n;
}

bool pack_signs(Stream& s, std::span<const float> v) {
  const size_t full = v.size() / 8;
  const size_t at = s.bytes.size();
  s.bytes.resize(at + (v.size() + 7) / 8);
  uint8_t* out = s.bytes.data() + at;
  const float* x = v.data();
  size_t b = 0;
  bool nonfinite = false;
#if defined(__SSE2__)
  // 8 values at a time: compare with 0 (x < 0 is false for -0 and NaN, as sign_bit wants), the
  // lanes' masks in lane order, then bit-reversed to MSB-first and inverted (1 = non-negative).
  static const auto reverse = [] {
    std::array<uint8_t, 256> r{};
    for (unsigned i = 0; i < 256; ++i) {
      unsigned y = 0;
      for (int k = 0; k < 8; ++k) y |= ((i >> k) & 1u) << (7 - k);
      r[i] = static_cast<uint8_t>(y);
    }
    return r;
  }();
  // x − x is NaN exactly when x is NaN or ±Inf: those lanes are "unordered" with themselves.
  const __m128 zero = _mm_setzero_ps();
  __m128 bad = _mm_setzero_ps();
  for (; b < full; ++b) {
    const float* p = x + 8 * b;
    const __m128 a = _mm_loadu_ps(p), c = _mm_loadu_ps(p + 4);
    const unsigned lo = static_cast<unsigned>(_mm_movemask_ps(_mm_cmplt_ps(a, zero)));
    const unsigned hi = static_cast<unsigned>(_mm_movemask_ps(_mm_cmplt_ps(c, zero)));
    out[b] = static_cast<uint8_t>(~reverse[lo | (hi << 4)]);
    bad = _mm_or_ps(bad, _mm_cmpunord_ps(_mm_sub_ps(a, a), _mm_sub_ps(c, c)));
  }
  nonfinite = _mm_movemask_ps(bad) != 0;
#endif
  for (; b < full; ++b) {
    const float* p = x + 8 * b;
    unsigned byte = 0;
    for (int k = 0; k < 8; ++k) {
      byte = (byte << 1) | (sign_bit(p[k]) ? 1u : 0u);
      nonfinite = nonfinite || !std::isfinite(p[k]);
    }
    out[b] = static_cast<uint8_t>(byte);
  }
  if (const size_t rest = v.size() - 8 * full; rest > 0) {
    unsigned byte = 0;
    for (size_t k = 0; k < rest; ++k) {
      byte = (byte << 1) | (sign_bit(v[8 * full + k]) ? 1u : 0u);
      nonfinite = nonfinite || !std::isfinite(v[8 * full + k]);
    }
    out[full] = static_cast<uint8_t>(byte << (8 - rest));
  }
  return nonfinite;
}

void expand_bits(std::span<const uint8_t> b, uint64_t count, float one, float zero, std::vector<float>& out) {
  out.clear();
  if (count < 512) {
    out.reserve(count);
    for (uint64_t i = 0; i < count; ++i) out.push_back(bit_at(b, i) ? one : zero);
    return;
  }
  float table[256][8];
  for (unsigned x = 0; x < 256; ++x)
    for (unsigned j = 0; j < 8; ++j) table[x][j] = ((x >> (7 - j)) & 1u) ? one : zero;
  append_chunked<2048>(out, count, [&](float* dst, size_t first, size_t n) {
    const uint8_t* src = b.data() + first / 8;  // first is a multiple of 2048: whole bytes
    const size_t full = n / 8;
    for (size_t k = 0; k < full; ++k) std::memcpy(dst + 8 * k, table[src[k]], sizeof table[0]);
    for (size_t i = 8 * full; i < n; ++i) dst[i] = bit_at(b, first + i) ? one : zero;
  });
}

}  // namespace gradcodec::stages::codes
