// SPDX-License-Identifier: BSD-3-Clause
// tcs — Time-Correlated Sparsification (Ozfatura, Ozfatura & Gündüz 2021 §II-A..C,
// Algorithm 2; docs/stages.md "tcs"). Stateful.
//
// Frame t > 0 (not a keyframe), over the whole snapshot (d = Σ d_l elements):
//   m_global = top-K_global of |Δ_{t−1}|, K_global = round(global·d): Δ_{t−1} is the previous
//              *decoded* update, i.e. this stage's decoded output of frame t−1 (the decoder has
//              it, so these positions cost nothing: only their values are sent);
//   ḡ        = g + e (error accumulation, §II-B eq. 12);
//   m_local  = top-K_local of |ḡ ⊙ (1 − m_global)|, K_local = round(local·d): coded positions;
//   sent     = ḡ at m_global ∪ m_local;   e ← ḡ − decoded (what the decoder did not get).
// Keyframes (frame 0, every --keyframe-interval frame): plain top-(K_global + K_local) of |ḡ| with
// every position coded (the decoder needs no earlier frame).
// Ties rank the lower tensor index, then the lower position first (as topk scope=global).
//
// Snapshot-wide selection, per-tensor records. The encoder's pre-pass (plan_frame) picks the
// snapshot's top-K; the record of tensor l then carries k_g,l, the number of global-mask positions
// that fell in it, and the decoder recomputes that tensor's mask as the top-k_g,l of its own
// previous output — the same set, since the snapshot's top-K restricted to one tensor is that
// tensor's top-k_g,l. So one tensor of one frame still decodes from that tensor's records alone.
//
// Fairness (§II-C): `lf` gives every tensor at least ⌈min_global·d_l⌉ global positions and
// ⌈min_local·d_l⌉ local ones; `plf` only the global minimum. Each tensor first reserves its own
// top minimum, then the rest of the snapshot's K goes by key as above (the totals stay K_global
// and K_local unless the minimums alone exceed them). On keyframes the minimum is the sum
// (lf) or min_global (plf). Without a frame pre-pass (a lone tensor) the counts are per tensor.
//
// State: shared (both sides) — the previous decoded output, as its nonzero entries (positions
// and f32 values; NaN counts as zero); encoder-private — e (f32, one per element).
//
// Wire, version 1:
//   index  LEB128 k_g (global-mask positions of this tensor), then the local positions in the
//          `tcspos` code over [0, d_l) (LEB128 k_l, u8 L, block bits: see tcspos).
//   values go to the value codec (all k_g + k_l of them, in ascending position order of
//          m_global ∪ m_local; computed values, so `raw` stores f32).
// Bits per frame: 32·(k_g + k_l) with f32 values + tcspos_bits(d_l, k_l) + 8·|LEB128 k_g|,
// ≈ d·(32·(global + local) + local·(log2(1/local) + 1) + 1/B) — 0.363 bits/param at 1% / 0.1%.
#pragma once
#include <gradcodec/plugin/params.hpp>

#include <cstdint>
#include <span>

namespace gradcodec::stages {

std::unique_ptr<Stage> make_tcs(const Params& p, uint32_t version);

// The two counts a tcs `index` stream starts with (Error Corrupt when it cannot be read).
struct TcsCounts {
  uint64_t global = 0;  // positions of the global mask (values without positions)
  uint64_t local = 0;   // coded positions
};
TcsCounts tcs_counts(std::span<const uint8_t> index_stream);

}  // namespace gradcodec::stages
