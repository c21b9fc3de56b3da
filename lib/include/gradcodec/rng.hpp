// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — the project's own counter-based random generator.
//
// Every random choice is keyed by (container seed, frame, tensor index, purpose) and the position
// in its stream, so the same input, pipeline and seed give the same bytes for any thread count,
// tensor order, standard library or machine. The mixer is SplitMix64 (Steele, Lea, Flood 2014):
// the n-th output of a stream is mix(key + n·φ64), so a stream can start anywhere (at(n)).
#pragma once

#include <cstdint>

namespace gradcodec {

// Purposes: one per random decision of a stage, so two stages never share a stream.
enum class RngPurpose : uint32_t {
  Test = 0,
  Select = 1,     // random positions (randk, sampling)
  Round = 2,      // stochastic rounding (qsgd, terngrad, ssdm)
  Sample = 3,     // threshold estimation samples (dgc)
  Stage1 = 4,     // BIRD stage 1
  Stage2 = 5,     // BIRD stage 2
  Init = 6,       // PowerSGD initial Q
  Merge = 7,      // merge operators (marsit)
  Policy = 8,     // bloom random policy
  Hash = 9,       // bloom hash seed
};

class Rng {
 public:
  Rng(uint64_t seed, uint32_t frame, uint32_t tensor, RngPurpose purpose) noexcept;
  explicit Rng(uint64_t key) noexcept : key_(key) {}

  uint64_t next_u64() noexcept { return mix(key_ + (ctr_++) * kGamma); }
  // Output n of the stream without advancing.
  uint64_t at(uint64_t n) const noexcept { return mix(key_ + n * kGamma); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() noexcept { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  // Output n as uniform() gives it, without advancing (samplers keyed by position). The signed
  // conversion is the cheaper instruction; the value is < 2^53, so exact either way.
  double uniform_at(uint64_t n) const noexcept {
    return static_cast<double>(static_cast<int64_t>(at(n) >> 11)) * 0x1.0p-53;
  }
  // Uniform in [0, 1) with 24 random bits (exactly representable as float).
  float uniform_f() noexcept { return static_cast<float>(next_u64() >> 40) * 0x1.0p-24f; }
  // Uniform integer in [0, n), n > 0, unbiased (Lemire's multiply-and-reject). Inline where the
  // compiler has 128-bit integers: samplers draw it once per kept position.
#if defined(__SIZEOF_INT128__)
  uint64_t below(uint64_t n) noexcept {
    const uint64_t x = next_u64();
    const unsigned __int128 m = static_cast<unsigned __int128>(x) * n;
    if (static_cast<uint64_t>(m) >= n) [[likely]]  // no rejection is possible: -n % n < n
      return static_cast<uint64_t>(m >> 64);
    return below_from(x, n);
  }
#else
  uint64_t below(uint64_t n) noexcept { return below_from(next_u64(), n); }
#endif
  // Standard normal (Box–Muller, one value per call; deterministic).
  double normal() noexcept;
  bool bernoulli(double p) noexcept { return uniform() < p; }
  uint64_t counter() const noexcept { return ctr_; }
  void seek(uint64_t n) noexcept { ctr_ = n; }

  // The stream's key: output n is mix(key() + n·kGamma) (vectorised samplers compute it so).
  uint64_t key() const noexcept { return key_; }
  static constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ULL;

  static uint64_t mix(uint64_t z) noexcept {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

 private:
  // below(n) given its first draw x: Lemire's rejection loop, drawing again while needed.
  uint64_t below_from(uint64_t x, uint64_t n) noexcept;

  uint64_t key_;
  uint64_t ctr_ = 0;
};

}  // namespace gradcodec
