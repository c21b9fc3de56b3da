#include "sparsify/bird_sample.hpp"

#include "sparsify/bird_stage1.hpp"
#include "sparsify/randk.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

namespace gradcodec::stages {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The largest element (NaN never wins; 0 when empty), in 8 independent lanes.
float max_of(std::span<const float> v) noexcept {
  float mx[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= v.size(); i += 8)
    for (int j = 0; j < 8; ++j) mx[j] = v[i + j] > mx[j] ? v[i + j] : mx[j];
  for (int j = 0; i < v.size(); ++i, ++j) mx[j] = v[i] > mx[j] ? v[i] : mx[j];
  float top = 0;
  for (float x : mx) top = x > top ? x : top;
  return top;
}

inline float f32_of(double s) noexcept { return s > static_cast<double>(FLT_MAX) ? INFINITY : static_cast<float>(s); }

// One Bernoulli(q) trial of BIRD+ with q = λ·p^γ (γ = ∞: q = λ·[p = 1]). The cheap bounds
// p^γ ≤ p (γ ≥ 1) and p^γ ≥ p (γ < 1) settle most trials without calling pow.
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

}  // namespace

namespace {

// The norms read elements through a loader ld(i) → float: a plain array, or the little-endian
// bytes of an f32 tensor read in place (memcpy of 4 bytes: no copy of the tensor, no aliasing).
struct ArrayLoad {
  const float* x;
  float operator()(uint64_t i) const noexcept { return x[i]; }
  const uint8_t* bytes() const noexcept { return reinterpret_cast<const uint8_t*>(x); }
};
struct BytesLoad {
  const uint8_t* p;
  float operator()(uint64_t i) const noexcept {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
  const uint8_t* bytes() const noexcept { return p; }
};

// ‖·‖₁ and ‖·‖∞ of elements [off, off + len): in order below 16 elements, else in 8 lanes
// combined in order. NaN propagates into the sum and is skipped by the max.
template <class Ld>
inline void run_norms(const Ld& ld, uint64_t off, uint64_t len, float& sum, float& max) noexcept {
  if (len < 16) {
    float s = 0, mx = 0;
    for (uint64_t k = 0; k < len; ++k) {
      const float a = std::fabs(ld(off + k));
      s += a;
      mx = a > mx ? a : mx;
    }
    sum = s, max = mx;
    return;
  }
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0}, mx[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  uint64_t k = 0;
  for (; k + 8 <= len; k += 8)
    for (int j = 0; j < 8; ++j) {
      const float a = std::fabs(ld(off + k + j));
      s[j] += a;
      mx[j] = a > mx[j] ? a : mx[j];
    }
  for (int j = 0; k < len; ++k, ++j) {
    const float a = std::fabs(ld(off + k));
    s[j] += a;
    mx[j] = a > mx[j] ? a : mx[j];
  }
  float total = 0, top = 0;
  for (int j = 0; j < 8; ++j) total += s[j], top = mx[j] > top ? mx[j] : top;
  sum = total, max = top;
}

// Blocks longer than kPiece are summed piece by piece (pieces of kPiece elements, partial sums
// added in order), so a reader that converts a tensor kPiece elements at a time gets the very
// same norms as one that holds the whole tensor.
constexpr uint64_t kPiece = 8192;

#if defined(__SSE2__)
// Norms of 4·G blocks of m < 16 elements at x (little-endian f32 bytes, any alignment), block j
// in lane j % 4 of group j / 4: the four rows of a group are loaded 4 elements at a time and
// transposed, so each lane adds its block's elements in order, exactly as run_norms does
// (max_ps(a, mx) is a > mx ? a : mx: NaN never wins). Reads only the blocks' own bytes.
template <int G>
inline void small_norms_sse(const uint8_t* x, uint64_t m, float* l1, float* linf) noexcept {
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7FFFFFFF));
  __m128 s[G], mx[G];
  for (int g = 0; g < G; ++g) s[g] = _mm_setzero_ps(), mx[g] = _mm_setzero_ps();
  const uint64_t row = 4 * m;  // bytes per block
  auto add = [&](int g, __m128 v) {
    v = _mm_and_ps(v, abs_mask);
    s[g] = _mm_add_ps(s[g], v);
    mx[g] = _mm_max_ps(v, mx[g]);
  };
  uint64_t k = 0;
  for (; k + 4 <= m; k += 4)
    for (int g = 0; g < G; ++g) {
      const uint8_t* p = x + 4 * g * row + 4 * k;
      __m128 r0 = _mm_loadu_ps(reinterpret_cast<const float*>(p));
      __m128 r1 = _mm_loadu_ps(reinterpret_cast<const float*>(p + row));
      __m128 r2 = _mm_loadu_ps(reinterpret_cast<const float*>(p + 2 * row));
      __m128 r3 = _mm_loadu_ps(reinterpret_cast<const float*>(p + 3 * row));
      _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
      add(g, r0), add(g, r1), add(g, r2), add(g, r3);
    }
  for (; k < m; ++k)
    for (int g = 0; g < G; ++g) {
      const uint8_t* p = x + 4 * g * row + 4 * k;
      float e[4];
      for (int j = 0; j < 4; ++j) std::memcpy(&e[j], p + j * row, 4);
      add(g, _mm_loadu_ps(e));
    }
  for (int g = 0; g < G; ++g) _mm_storeu_ps(l1 + 4 * g, s[g]), _mm_storeu_ps(linf + 4 * g, mx[g]);
}
#endif

// Norms of `blocks` blocks of m elements starting at element `first`. Blocks shorter than 16
// (conv kernels) are done 8 at a time, interleaved: each block still adds its elements in order
// (the same arithmetic as run_norms), but eight independent chains hide the add latency; with
// SSE2 they are done 16 at a time as four 4-lane groups (small_norms_sse; 10-15% faster than
// two groups on VGG16), the rest 8 at a time as two.
template <class Ld>
void norms_into(const Ld& ld, uint64_t first, uint64_t blocks, uint64_t m, float* l1, float* linf) noexcept {
  uint64_t b = 0;
#if defined(__SSE2__)
  if (m < 16 && m > 0) {
    const uint8_t* x = ld.bytes() + 4 * first;
    for (; b + 16 <= blocks; b += 16) small_norms_sse<4>(x + 4 * b * m, m, l1 + b, linf + b);
    for (; b + 8 <= blocks; b += 8) small_norms_sse<2>(x + 4 * b * m, m, l1 + b, linf + b);
  }
#endif
  if (m < 16) {
    for (; b + 8 <= blocks; b += 8) {
      float s[8] = {0, 0, 0, 0, 0, 0, 0, 0}, mx[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      const uint64_t base = first + b * m;
      for (uint64_t k = 0; k < m; ++k)
        for (uint64_t j = 0; j < 8; ++j) {
          const float a = std::fabs(ld(base + j * m + k));
          s[j] += a;
          mx[j] = a > mx[j] ? a : mx[j];
        }
      for (int j = 0; j < 8; ++j) l1[b + j] = s[j], linf[b + j] = mx[j];
    }
  }
  for (; b < blocks; ++b) {
    const uint64_t at = first + b * m;
    if (m <= kPiece) {
      run_norms(ld, at, m, l1[b], linf[b]);
      continue;
    }
    float s = 0, mx = 0;
    for (uint64_t off = 0; off < m; off += kPiece) {
      float ps, pm;
      run_norms(ld, at + off, std::min(kPiece, m - off), ps, pm);
      s += ps;
      mx = pm > mx ? pm : mx;
    }
    l1[b] = s, linf[b] = mx;
  }
}

}  // namespace

void bird_norms(std::span<const float> v, uint64_t m, std::vector<float>& l1, std::vector<float>& linf) {
  const uint64_t blocks = m == 0 ? 0 : v.size() / m;
  l1.resize(blocks);
  linf.resize(blocks);
  norms_into(ArrayLoad{v.data()}, 0, blocks, m, l1.data(), linf.data());
}

void bird_norms(const Tensor& t, uint64_t m, std::vector<float>& l1, std::vector<float>& linf) {
  const uint64_t n = t.elements(), blocks = m == 0 ? 0 : n / m;
  const size_t es = dtype_size(t.dtype());
  if (t.data.size() < n * es) fail(ErrorCode::Internal, "bird: tensor " + t.name() + " is shorter than its shape");
  l1.resize(blocks);
  linf.resize(blocks);
  if (blocks == 0) return;
  const uint8_t* src = t.data.data();
  if (t.dtype() == DType::F32) return norms_into(BytesLoad{src}, 0, blocks, m, l1.data(), linf.data());
  // Other dtypes: convert kPiece elements at a time (whole blocks when m ≤ kPiece).
  if (m <= kPiece) {
    const uint64_t per = kPiece / m;
    std::vector<float> buf(per * m);
    for (uint64_t b = 0; b < blocks; b += per) {
      const uint64_t c = std::min(per, blocks - b);
      to_f32(t.dtype(), src + b * m * es, c * m, buf.data());
      norms_into(ArrayLoad{buf.data()}, 0, c, m, l1.data() + b, linf.data() + b);
    }
    return;
  }
  std::vector<float> buf(kPiece);
  for (uint64_t b = 0; b < blocks; ++b) {
    float s = 0, mx = 0;
    for (uint64_t off = 0; off < m; off += kPiece) {
      const uint64_t len = std::min(kPiece, m - off);
      to_f32(t.dtype(), src + (b * m + off) * es, len, buf.data());
      float ps, pm;
      run_norms(ArrayLoad{buf.data()}, 0, len, ps, pm);
      s += ps;
      mx = pm > mx ? pm : mx;
    }
    l1[b] = s, linf[b] = mx;
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
  bird_norms(v.first(blocks * m), m, l1, linf);
  return bird_sample(l1, linf, m, rule, ctx);
}

BirdSelection bird_sample(std::span<const float> l1, std::span<const float> linf, uint64_t m, const BirdRule& rule,
                          const StageContext& ctx) {
  BirdSelection sel;
  const uint64_t blocks = l1.size();
  if (blocks == 0 || m == 0 || linf.size() != blocks) return sel;

  // Stage 1: L1 sampling.
  const float lmax = max_of(l1);  // NaN never wins
  if (!(lmax > 0) || std::isinf(lmax)) return sel;
  const double inv1 = 1.0 / static_cast<double>(lmax);
  std::vector<uint64_t> u_set;
  bird_stage1(l1, lmax, inv1, ctx.rng(RngPurpose::Stage1), u_set);
  sel.stage1 = u_set.size();
  const double s1 = static_cast<double>(lmax) / static_cast<double>(m);

  // Stage 2: L∞ probabilities over U.
  std::vector<float> pinf(u_set.size());
  for (size_t j = 0; j < u_set.size(); ++j) pinf[j] = linf[u_set[j]];
  const float imax = max_of(pinf);
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
    for (size_t j = 0; j < u_set.size(); ++j) k += plus_trial(r2.uniform_at(u_set[j]), pinf[j], g);
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
