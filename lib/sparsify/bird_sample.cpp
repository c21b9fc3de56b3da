// SPDX-License-Identifier: BSD-3-Clause
#include "sparsify/bird_sample.hpp"

#include "sparsify/bird_stage1.hpp"
#include "sparsify/bird_trials.hpp"
#include "sparsify/randk.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

namespace gradcodec::stages {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

inline float f32_of(double s) noexcept { return s > static_cast<double>(FLT_MAX) ? INFINITY : static_cast<float>(s); }

// One Bernoulli(q) trial of BIRD+ with q = λ·p^γ (γ = ∞: q = λ·[p = 1]). The cheap bounds
// p^γ ≤ p (γ ≥ 1) and p^γ ≥ p (γ < 1) settle most trials without calling pow. (Many trials go
// through PowLess instead: the same decisions, u < pow(p, γ), for finite γ > 0.)
inline bool plus_trial(double u, float p, const GammaFit& g) noexcept {
  if (g.gamma == kInf) return p >= 1.0f && u < g.lambda;
  if (p >= 1.0f || g.gamma == 0) return true;  // q = 1 > u
  const double pd = p;
  if (g.gamma >= 1) {
    if (u >= pd) return false;
  } else if (u < pd) {
    return true;
  }
  return u < std::pow(pd, g.gamma);
}

// Below this many trials the table's 257 calls of pow cost more than they save.
constexpr size_t kPowTableFrom = 2048;

}  // namespace

PowLess::PowLess(double gamma) : gamma_(gamma) {
  // Margins for pow's rounding (under 1 ulp, i.e. 2.2·10⁻¹⁶ relative) and for results in the
  // subnormal range (absolute): every p in [a_k, a_k+1) has lo_[k] < pow(p, γ) < hi_[k].
  constexpr double kRel = 1e-12, kAbs = 0x1p-900;
  double below = std::pow(0.0, gamma);
  for (int k = 0; k < 256; ++k) {
    const double above = std::pow((k + 1) / 256.0, gamma);
    lo_[k] = below * (1 - kRel) - kAbs;
    hi_[k] = above * (1 + kRel) + kAbs;
    below = above;
  }
}

GammaFit bird_fit_gamma(std::span<const float> pinf, double target) {
  const double n = static_cast<double>(pinf.size());
  if (!(target < n)) return {0, 1};
  uint64_t c1 = 0;
  for (float p : pinf) c1 += p >= 1.0f;
  if (c1 > 0 && target <= static_cast<double>(c1)) return {kInf, std::max(0.0, target) / static_cast<double>(c1)};
  // Terms (ln p, count) of F(γ) = c₁ + Σ count·p^γ over the blocks with p < 1.
  std::vector<std::pair<double, double>> terms;
  if (pinf.size() <= 4096) {
    terms.reserve(pinf.size());
    for (float p : pinf)
      if (p < 1.0f) terms.emplace_back(std::log(static_cast<double>(p)), 1.0);
  } else {
    constexpr uint32_t kOne = 0x3F80;  // top 16 bits of 1.0f; every p < 1 has a smaller key
    std::vector<uint32_t> hist(kOne, 0);
    for (float p : pinf) {
      if (!(p < 1.0f)) continue;
      uint32_t bits;
      std::memcpy(&bits, &p, 4);
      ++hist[bits >> 16];
    }
    for (uint32_t b = 0; b < kOne; ++b) {
      if (hist[b] == 0) continue;
      uint32_t lo_bits = b << 16, hi_bits = (b + 1) << 16;
      float lo, hi;
      std::memcpy(&lo, &lo_bits, 4);
      std::memcpy(&hi, &hi_bits, 4);
      const double centre = lo > 0 ? std::sqrt(static_cast<double>(lo) * hi) : 0.5 * hi;
      terms.emplace_back(std::log(centre), static_cast<double>(hist[b]));
    }
  }
  // Newton on G(γ) = ln F(γ) − ln T, convex and decreasing: from γ = 0 (G > 0) every step lands
  // at or below the root, so the iterates rise monotonically to it.
  const double log_t = std::log(target);
  double gamma = 0;
  for (int it = 0; it < 200; ++it) {
    double f = static_cast<double>(c1), df = 0;
    for (const auto& [l, c] : terms) {
      const double e = c * std::exp(gamma * l);
      f += e;
      df += l * e;
    }
    const double g = std::log(f) - log_t;
    if (!(g > 1e-12) || !(df < 0)) break;
    const double step = -g * f / df;
    if (!(step > 1e-14 * std::max(1.0, gamma))) break;
    gamma += step;
  }
  return {gamma, 1};
}

BirdSelection bird_select(std::span<const float> v, uint64_t blocks, uint64_t m, const BirdRule& rule,
                          const StageContext& ctx) {
  if (blocks == 0 || m == 0 || v.size() / m < blocks) return {};
  std::vector<float> l1, linf;
  const NormsSummary n = bird_norms(v.first(blocks * m), m, l1, linf);
  return bird_sample(l1, linf, n.l1_max, m, rule, ctx);
}

uint64_t* BirdScratch::kept(size_t n) {
  if (n > kept_room_) {
    kept_.reset();  // the old buffer is not copied: its contents are dropped
    kept_.reset(new uint64_t[n]);
    kept_room_ = n;
  }
  return kept_.get();
}

float* BirdScratch::pinf(size_t n) {
  if (n > pinf_room_) {
    pinf_.reset();
    pinf_.reset(new float[n]);
    pinf_room_ = n;
  }
  return pinf_.get();
}

BirdSelection bird_sample(std::span<const float> l1, std::span<const float> linf, float l1_max, uint64_t m,
                          const BirdRule& rule, const StageContext& ctx) {
  BirdScratch scratch;
  return bird_sample(l1, linf, l1_max, m, rule, ctx, scratch);
}

BirdSelection bird_sample(std::span<const float> l1, std::span<const float> linf, float l1_max, uint64_t m,
                          const BirdRule& rule, const StageContext& ctx, BirdScratch& scratch) {
  BirdSelection sel;
  const uint64_t blocks = l1.size();
  if (blocks == 0 || m == 0 || linf.size() != blocks) return sel;

  // Stage 1: L1 sampling.
  const float lmax = l1_max;  // NaN never wins
  if (!(lmax > 0) || std::isinf(lmax)) return sel;
  const double inv1 = 1.0 / static_cast<double>(lmax);
  uint64_t* const kept = scratch.kept(blocks);
  const std::span<const uint64_t> u_set(kept, bird_stage1(l1, lmax, inv1, ctx.rng(RngPurpose::Stage1), kept));
  sel.stage1 = u_set.size();
  const double s1 = static_cast<double>(lmax) / static_cast<double>(m);

  // Stage 2: L∞ probabilities over U.
  const std::span<float> pinf(scratch.pinf(u_set.size()), u_set.size());
  float imax = 0;  // bird_max(pinf), taken as they are gathered: NaN never wins
  for (size_t j = 0; j < u_set.size(); ++j) {
    const float x = linf[u_set[j]];
    pinf[j] = x;
    imax = x > imax ? x : imax;
  }
  for (float& p : pinf) p /= imax;  // the maximum gives exactly 1
  const Rng r2 = ctx.rng(RngPurpose::Stage2);
  double thin = 1;  // P(K ≥ 1) when it is below 1 (keep mode, γ = ∞)
  if (!rule.plus) {
    sel.blocks.resize(u_set.size());
    size_t kept = 0;
    for (size_t j = 0; j < u_set.size(); ++j) {
      const double v = r2.uniform_at(u_set[j]);
      const bool keep = static_cast<int>(pinf[j] >= 1.0f) | static_cast<int>(v < static_cast<double>(pinf[j]));  // no branch
      sel.blocks[kept] = u_set[j];
      kept += keep;
    }
    sel.blocks.resize(kept);
  } else {
    GammaFit g{rule.gamma, 1};
    if (rule.keep > 0) g = bird_fit_gamma(pinf, rule.keep * static_cast<double>(blocks));
    sel.gamma = g.gamma;
    sel.lambda = g.lambda;
    uint64_t k = 0;
    if (g.gamma > 0 && g.gamma != kInf && u_set.size() >= kPowTableFrom) {
      const PowLess less(g.gamma);  // p ≥ 1 gives pow(p, γ) ≥ 1 > u: plus_trial's decision
      k = bird_plus_trials(u_set, pinf, r2, less);
    } else {
      for (size_t j = 0; j < u_set.size(); ++j) k += plus_trial(r2.uniform_at(u_set[j]), pinf[j], g);
    }
    if (g.gamma == kInf && g.lambda < 1) {
      uint64_t c1 = 0;
      for (float p : pinf) c1 += p >= 1.0f;
      thin = -std::expm1(static_cast<double>(c1) * std::log1p(-g.lambda));  // 1 − (1 − λ)^c₁
    }
    Rng pick = ctx.rng(RngPurpose::Select);
    const std::vector<uint64_t> chosen = random_positions(u_set.size(), k, pick);
    sel.blocks.reserve(chosen.size());
    for (uint64_t j : chosen) sel.blocks.push_back(u_set[j]);
  }
  if (!sel.blocks.empty())
    sel.scale = f32_of(s1 * static_cast<double>(u_set.size()) / static_cast<double>(sel.blocks.size()) / thin);
  return sel;
}

}  // namespace gradcodec::stages
