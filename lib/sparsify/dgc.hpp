// SPDX-License-Identifier: BSD-3-Clause
// dgc — Deep Gradient Compression's selection (docs/stages.md "dgc"; Lin, Han, Mao, Wang & Dally,
// ICLR 2018, §2.1 gradient sparsification at 99.9%, §5 "System analysis": the top-k threshold is
// estimated on a 0.1–1% sample, and computed exactly on the already selected gradients when far
// too many pass it). Momentum correction, clipping and warm-up are training-time tricks, not here.
//
// Rule, with k = max(1, round(ratio·d)) (at most d; nothing for d = 0):
//  1. s = max(1, round(sample·d)) magnitudes drawn with replacement (ctx.rng(RngPurpose::Sample),
//     positions rng.below(d)); threshold thr = the k_s-th largest of them, k_s = max(1,
//     round(k·s/d)) (the sample's share of k).
//  2. Select {i : |g_i| ≥ thr}, c of them (magnitudes ranked as in topk: NaN lowest).
//     c > 1.3k   → exact top-k inside the selected set (= the tensor's exact top-k, since the
//                  selected set contains it); kept = k.
//     c ≥ 0.8k   → keep the selected set; kept = c ∈ [0.8k, 1.3k].
//     c < 0.8k   → thr ← 0.7·thr (GRACE's lowering step; a threshold of 0 selects every element,
//                  NaN included) and repeat step 2; at most 10 rounds in all.
//  3. After 10 rounds still below 0.8k (a few huge values above a near-constant floor can hold
//     the count there): exact top-k of the whole tensor. So the kept count is always in
//     [0.8k, 1.3k], and the kept set is always a top set (every kept |g| ≥ every dropped |g|).
// Constant and all-zero tensors: the sample threshold selects all d → exact top-k → positions
// 0..k−1. d = 1: the element. d = 2: one element (k = 1), the larger (the first on a tie).
// Wire: as topk — no stream of its own; ascending positions to the index coder; exact values.
#pragma once
#include <gradcodec/plugin/params.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace gradcodec::stages {

enum class DgcPath : uint8_t {
  All,              // k = d (or d = 0): every position, no sampling
  Threshold,        // the threshold set, c ∈ [0.8k, 1.3k]
  ExactOnSelected,  // c > 1.3k: exact top-k on the selected set
  Fallback,         // 10 rounds below 0.8k: exact top-k of the tensor
};

struct DgcSelection {
  std::vector<uint64_t> index;  // ascending
  unsigned rounds = 0;          // threshold evaluations made (1..10; 0 for All)
  DgcPath path = DgcPath::All;
};

// The selection above for k positions of v, drawing the sample from `rng`.
DgcSelection dgc_select(std::span<const float> v, uint64_t k, double sample, Rng& rng);

std::unique_ptr<Stage> make_dgc(const Params& p, uint32_t version);

}  // namespace gradcodec::stages
