// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — IEEE binary16 and bfloat16 conversions (round to nearest even, NaN kept quiet).
#pragma once

#include <cstdint>
#include <cstring>

namespace gradcodec {

float f16_to_f32(uint16_t h) noexcept;
// n little-endian binary16 values at src to f32, as f16_to_f32 each (a 64 Ki-entry table).
void f16_to_f32_n(const uint8_t* src, uint64_t n, float* dst) noexcept;
uint16_t f32_to_f16(float f) noexcept;  // round to nearest even; overflow → ±Inf; NaN → NaN
// n f32 values to little-endian binary16 at dst, as f32_to_f16 each, bit for bit (the CPU's
// F16C conversion eight at a time where it has it, the scalar rule for any group with a NaN).
void f32_to_f16_n(const float* src, uint64_t n, uint8_t* dst) noexcept;
void f32_to_f16_n_portable(const float* src, uint64_t n, uint8_t* dst) noexcept;

inline float bf16_to_f32(uint16_t b) noexcept {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t f32_to_bf16(float f) noexcept;  // round to nearest even; NaN → quiet NaN, sign kept

}  // namespace gradcodec
