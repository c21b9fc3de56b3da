// SPDX-License-Identifier: BSD-3-Clause
#include <gradcodec/rng.hpp>

#include <cmath>

namespace gradcodec {

Rng::Rng(uint64_t seed, uint32_t frame, uint32_t tensor, RngPurpose purpose) noexcept {
  uint64_t k = mix(seed ^ 0x6a09e667f3bcc909ULL);
  k = mix(k ^ (static_cast<uint64_t>(frame) << 32 | tensor));
  k = mix(k ^ (static_cast<uint64_t>(purpose) + 0x3c6ef372fe94f82bULL));
  key_ = k;
}

uint64_t Rng::below_from(uint64_t x, uint64_t n) noexcept {
  __uint128_t m = static_cast<__uint128_t>(x) * n;
  uint64_t l = static_cast<uint64_t>(m);
  if (l < n) {
    uint64_t t = -n % n;
    while (l < t) {
      x = next_u64();
      m = static_cast<__uint128_t>(x) * n;
      l = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

double Rng::normal() noexcept {
  double u1 = uniform();
  double u2 = uniform();
  if (u1 <= 0.0) u1 = 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace gradcodec
