// SPDX-License-Identifier: BSD-3-Clause
// BIRD's tensor-wise bi-random sampling over the blocks of one tensor (Wu et al. 2023 (BIRD+)
// §III-C, Algorithm 1; docs/stages.md "bird", "bird+"). No I/O, no wire: the stage (bird.hpp) turns
// a selection into streams.
//
// Given B blocks of m contiguous f32 elements (the split of bird_split.hpp):
//   norms     one pass over the tensor: L_i = ‖t_i‖₁ and I_i = ‖t_i‖∞ per block.
//   stage 1   Lmax = max L_i; p_i = L_i / Lmax; block i joins U iff u_i < p_i, u_i uniform in
//             [0, 1) from ctx.rng(Stage1) output i (one draw per block, keyed by the block index).
//             S₁ = Lmax / m. Every block of U is then worth sign(t_i)·S₁ (E‖·‖₁ = L_i).
//   stage 2   p∞_j = I_j / max_{k∈U} I_k for j ∈ U; v_j uniform from ctx.rng(Stage2) output j.
//             BIRD:  V = { j ∈ U : v_j < p∞_j }.
//             BIRD+: K = #{ j ∈ U : v_j < q_j } with q_j = (p∞_j)^γ; then K blocks of U chosen
//                    uniformly without replacement (random_positions with ctx.rng(Select)) → V.
//   scale     S = S₁·|U| / |V| (S = 0 and V empty when U is empty), rounded to f32 once.
// The block of largest L1 always passes stage 1 and the block of U with largest L∞ has
// p∞ = 1, so V is never empty when Lmax > 0 (γ finite).
//
// keep = f (BIRD+ only, instead of γ): γ is solved per tensor, after stage 1, so that the
// expected kept count given U is E[K] = Σ_{j∈U} q_j = T = f·B (kept fraction f of the tensor):
//   T ≥ |U|          γ = 0: every q_j = 1, V = U (stage 1 already kept fewer than f·B);
//   c₁ < T < |U|     Σ (p∞_j)^γ = T solved by Newton's method on ln Σ (convex in γ, iterated
//                    from γ = 0 it rises monotonically to the root); |U| > 4096 sums over a
//                    histogram of p∞ (bins of the top 16 bits of its f32 pattern, i.e. 2⁻⁷
//                    relative width, each at its geometric centre) instead of every block;
//   T ≤ c₁           (c₁ = #{p∞_j = 1} ≥ 1; no γ reaches below c₁ blocks): γ = ∞ and each of
//                    those c₁ blocks succeeds with probability λ = T/c₁, so K may be 0. To keep
//                    the expectation invariance S is divided by P(K ≥ 1) = 1 − (1 − λ)^c₁.
// This extends the paper only where its γ cannot reach f (small tensors at tiny f).
//
// Non-finite data: a block holding a NaN has L_i = NaN and never joins U (NaN is ignored in the
// maxima); a tensor whose Lmax is 0 or +Inf sends no block.
#pragma once

#include "sparsify/bird_norms.hpp"

#include <gradcodec/plugin/stage.hpp>

#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace gradcodec::stages {

struct BirdRule {
  bool plus = false;  // BIRD+ (γ-corrected count + uniform choice) rather than BIRD
  double gamma = 1;   // BIRD+: exponent on p∞ (≥ 0), when keep == 0
  double keep = 0;    // BIRD+: target kept fraction in (0, 1]; 0 = use gamma
};

struct BirdSelection {
  std::vector<uint64_t> blocks;  // V, ascending block indices
  uint64_t stage1 = 0;           // |U|
  float scale = 0;               // S as sent (f32); 0 when V is empty
  double gamma = 0;              // BIRD+: the γ used (solved under keep; +inf allowed)
  double lambda = 1;             // BIRD+ under keep: the thinning λ of the p∞ = 1 blocks
};

// The γ and λ of keep mode for the p∞ values of U (each in (0, 1]) and a target count T ≥ 0.
struct GammaFit {
  double gamma = 0;
  double lambda = 1;
};
GammaFit bird_fit_gamma(std::span<const float> pinf, double target);

// BIRD+'s trial u < p^γ (γ finite and > 0, p in [0, 1)), decided as `u < std::pow(double(p), γ)`
// decides it, but mostly from a table of a^γ at the 257 points a = k/256: for p in [a_k, a_k+1),
// p^γ lies between the table's two entries (p^γ rises with p), so u below the lower one, with a
// margin of 10⁻¹² for pow's rounding, succeeds and u at or above the upper one fails. Only u inside
// the band [a_k^γ, a_k+1^γ] so widened calls pow (at most about γ/256 of the trials for γ ≥ 1).
class PowLess {
 public:
  explicit PowLess(double gamma);
  // Whether u < pow(p, γ), for any p (p outside [0, 1), NaN included, goes to pow). Without a
  // branch on the outcome itself, which is a coin toss the CPU cannot predict.
  bool operator()(double u, float p) const noexcept {
    if (!(p >= 0.0f && p < 1.0f)) [[unlikely]]
      return u < std::pow(static_cast<double>(p), gamma_);
    const auto k = static_cast<uint32_t>(p * 256.0f);  // exact: p·2⁸ < 256, truncated
    const double lo = lo_[k], hi = hi_[k];
    if ((u >= lo) & (u < hi)) [[unlikely]]
      return u < std::pow(static_cast<double>(p), gamma_);
    return u < lo;
  }
  // The table: for p in [k/256, (k + 1)/256), u < lo(k) succeeds and u ≥ hi(k) fails.
  const double* lo() const noexcept { return lo_; }
  const double* hi() const noexcept { return hi_; }

 private:
  double gamma_;
  double lo_[256];  // a_k^γ·(1 − 10⁻¹²): every p ≥ a_k has pow(p, γ) above it
  double hi_[256];  // a_k+1^γ·(1 + 10⁻¹²): every p < a_k+1 has pow(p, γ) below it
};

// Runs both stages on `v` (blocks·m elements, block-major). Draws from ctx.rng(Stage1),
// ctx.rng(Stage2) and ctx.rng(Select). O(d) for the norms plus O(B) for the sampling.
BirdSelection bird_select(std::span<const float> v, uint64_t blocks, uint64_t m, const BirdRule& rule,
                          const StageContext& ctx);
// The buffers bird_sample works in (stage 1's kept list U and stage 2's p∞ over U), kept by a
// caller that samples many tensors in turn so that they are allocated and faulted in once, not
// per tensor. Their contents are overwritten by each call.
class BirdScratch {
 public:
  // Room for n entries; contents unspecified.
  uint64_t* kept(size_t n);
  float* pinf(size_t n);

 private:
  std::unique_ptr<uint64_t[]> kept_;
  size_t kept_room_ = 0;
  std::unique_ptr<float[]> pinf_;
  size_t pinf_room_ = 0;
};

// Both stages from the per-block norms of blocks of m elements and l1_max = bird_max(l1), as
// bird_norms returns them. O(B).
BirdSelection bird_sample(std::span<const float> l1, std::span<const float> linf, float l1_max, uint64_t m,
                          const BirdRule& rule, const StageContext& ctx, BirdScratch& scratch);
BirdSelection bird_sample(std::span<const float> l1, std::span<const float> linf, float l1_max, uint64_t m,
                          const BirdRule& rule, const StageContext& ctx);

}  // namespace gradcodec::stages
