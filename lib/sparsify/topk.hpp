// SPDX-License-Identifier: BSD-3-Clause
// topk — keep the k largest |g_i| of each tensor, or of the whole snapshot with scope=global
// (Aji & Heafield 2017 "Sparse Communication for Distributed Gradient
// Descent" §2; Stich, Cordonnier & Jaggi 2018 "Sparsified SGD with Memory" §2).
//
// k = max(1, round(ratio·d)) (or the given k), at most d, 0 for an empty tensor. The kept set is
// exactly the set a full sort by (|g| descending, index ascending) would pick, found in O(d) by
// a three-digit radix select on the magnitude bits (11 + 10 + 10 bits) — never a full sort.
// Ranking is on the f32 working values. NaN magnitudes rank lowest (below ±0, which tie), so a
// NaN is kept only when k exceeds the number of non-NaN elements; ±Inf rank highest.
// by_sign=true (layer scope only): k per sign instead, the k largest positive and the k most
// negative values (topk_select_by_sign) — SBC's selection, which the `sbc` value codec then
// halves by keeping one side (Sattler et al. 2019, Algorithm 1).
// Wire: no stream of its own; positions ascending go to the index coder, kept values (the
// input's own elements) to the value codec.
#pragma once
#include <gradcodec/plugin/params.hpp>

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace gradcodec::stages {

// How many positions a sparsifier keeps: a fraction `ratio` of the universe or a count `k`.
struct KeepCount {
  bool by_ratio = true;
  double ratio = 0;
  uint64_t k = 0;
  // max(1, round(ratio·d)) or k, never more than d; 0 when d = 0 (round half away from zero).
  uint64_t of(uint64_t d) const noexcept;
  // Reads `ratio` | `k`; throws Error(Usage) naming `stage` unless exactly one of them is given.
  static KeepCount from(const Params& p, const char* stage);
};

// Ranking key of |v|: a larger magnitude gives a larger key; ±0 → 1, NaN → 0 (ranks lowest).
// Keys fit in 31 bits (+Inf → 0x7f800001).
inline uint32_t magnitude_key(float v) noexcept {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  b &= 0x7fffffffu;
  return b > 0x7f800000u ? 0u : b + 1u;
}

// The cut of a top-k selection: keep every key > `key`, plus the first `ties` elements (in
// position order) whose key == `key`.
struct TopkCut {
  uint32_t key = 0;
  uint64_t ties = 0;
  // The keep rule, for keys met in ascending position: every key above the cut, and the first
  // `ties` keys equal to it (each one taken uses one up).
  bool take(uint32_t k) noexcept {
    if (k > key) return true;
    if (k == key && ties > 0) {
      --ties;
      return true;
    }
    return false;
  }
};

// The cut for the k largest of `keys` (1 ≤ k ≤ keys.size()), O(size). Reorders and shrinks
// `keys` (it is scratch).
TopkCut topk_cut(std::vector<uint32_t>& keys, uint64_t k);

// The sampled path topk_select takes first on tensors of at least kSampledMin elements, exact
// like the full one. A sample of 256 runs of 16 elements spread evenly over the tensor gives a
// lower bound on the cut: a key that, on the sample's evidence, at least k elements reach with a
// wide margin. One pass collects every element at or above it (and counts NaN), and the radix
// select runs on those alone, so the cut, its ties and the kept positions are those of the full
// path whenever at least k elements passed. Returns false, with `idx` empty, when fewer passed
// (the sample misjudged the tensor), when the bound would pass more than about 1/8 of the
// elements, or for a tensor below kSampledMin: the caller then takes the full path. The result
// never depends on the sample, only the time does. `nonfinite` as for topk_select (then true).
constexpr uint64_t kSampledMin = uint64_t{1} << 16;
bool topk_select_sampled(std::span<const float> v, uint64_t k, uint64_t* nonfinite, std::vector<uint64_t>& idx);

// Positions of the k largest |v_i| (ties to the lower index), ascending; k is clamped to
// v.size(). O(d) time, O(candidates) extra memory. With `nonfinite`, the first pass also counts
// the NaN/Inf elements into it, and when there are any the selection stops there (returns {}).
std::vector<uint64_t> topk_select(std::span<const float> v, uint64_t k, uint64_t* nonfinite = nullptr);

// by_sign selection (Sattler et al. 2019, Algorithm 1 "val+ = top_p%(ΔW), val− = top_p%(−ΔW)"):
// the k largest non-negative values and, apart, the k largest-magnitude negative values — at
// most 2k positions, ascending. The sides follow the wire's sign convention (v < 0 is negative;
// ±0 and NaN count as non-negative); a side with fewer than k values is kept whole; within a side
// the rank is topk's (|v| descending, ties to the lower index). `nonfinite` as for topk_select.
std::vector<uint64_t> topk_select_by_sign(std::span<const float> v, uint64_t k, uint64_t* nonfinite = nullptr);

std::unique_ptr<Stage> make_topk(const Params& p, uint32_t version);

}  // namespace gradcodec::stages
