// SPDX-License-Identifier: BSD-3-Clause
#include "sparsify/topk.hpp"
#include "sparsify/elementwise.hpp"
#include "sparsify/radix.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace gradcodec::stages {

uint64_t KeepCount::of(uint64_t d) const noexcept {
  if (d == 0) return 0;
  uint64_t c = k;
  if (by_ratio) c = static_cast<uint64_t>(std::llround(ratio * static_cast<double>(d)));
  return std::clamp<uint64_t>(c, 1, d);
}

KeepCount KeepCount::from(const Params& p, const char* stage) {
  const bool r = p.has("ratio"), n = p.has("k");
  if (r && n) fail(ErrorCode::Usage, std::string(stage) + ": give ratio or k, not both");
  if (!r && !n)
    fail(ErrorCode::Usage, std::string(stage) + ": give one of ratio (fraction kept, e.g. ratio=1%) or k (count kept)");
  KeepCount c;
  c.by_ratio = r;
  if (r) c.ratio = p.num("ratio");
  else c.k = static_cast<uint64_t>(p.integer("k"));
  return c;
}

namespace {

using radix::digit;
using radix::Hist;
using radix::kBins;
using radix::kShift;
constexpr float kInfinity = std::numeric_limits<float>::infinity();
uint32_t pick_bin(const Hist& h, uint32_t bins, uint64_t& r) { return radix::pick_bin(h, bins, r, "topk"); }

// Finishes a radix select from `level` on keys that all share `key`'s digits above it.
TopkCut refine(std::vector<uint32_t>& keys, uint64_t r, int level, uint32_t key) {
  size_t m = keys.size();
  for (; level < 3; ++level) {
    Hist h{};
    for (size_t j = 0; j < m; ++j) ++h[digit(keys[j], level)];
    const uint32_t b = pick_bin(h, kBins[level], r);
    key |= b << kShift[level];
    size_t w = 0;
    for (size_t j = 0; j < m; ++j)
      if (digit(keys[j], level) == b) keys[w++] = keys[j];
    m = w;
  }
  keys.resize(m);
  return {key, r};  // r = rank among the keys equal to `key` = ties to keep
}

// Calls f(key) for every element of a floating tensor, converting 4096 elements at a time.
template <class F>
void for_each_key(const Tensor& t, F&& f) {
  const uint64_t n = t.elements();
  const size_t es = dtype_size(t.dtype());
  if (t.data.size() < n * es) fail(ErrorCode::Internal, "topk: tensor " + t.name() + " is shorter than its shape");
  float buf[4096];
  for (uint64_t i = 0; i < n; i += 4096) {
    const uint64_t c = std::min<uint64_t>(4096, n - i);
    to_f32(t.dtype(), t.data.data() + i * es, c, buf);
    for (uint64_t j = 0; j < c; ++j) f(magnitude_key(buf[j]));
  }
}

// Calls f(i, key) for every element whose key is ≥ min_key, in position order, and returns the
// number of NaN elements when CountNaN (else 0). With SSE2, 16 keys are compared at a time and
// only the elements that pass are looked at one by one: a top-1% cut passes about one element in
// a hundred.
template <bool CountNaN = false, class F>
uint64_t for_each_at_least(std::span<const float> v, uint32_t min_key, F&& f) {
  size_t i = 0;
  const size_t n = v.size();
  uint64_t nan = 0;
#if defined(__SSE2__)
  const __m128i abs_mask = _mm_set1_epi32(0x7fffffff), inf = _mm_set1_epi32(0x7f800000), one = _mm_set1_epi32(1);
  const __m128i below = _mm_set1_epi32(static_cast<int32_t>(min_key) - 1);  // keys < 2^31: signed compares
  // NaN counts per lane (a compare gives −1 where true), added up every 2^24 steps of 16 values
  // before a 32-bit lane could overflow.
  __m128i nan_lanes = _mm_setzero_si128();
  auto flush = [&] {
    alignas(16) uint32_t c[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(c), nan_lanes);
    nan += uint64_t{c[0]} + c[1] + c[2] + c[3];
    nan_lanes = _mm_setzero_si128();
  };
  auto passing = [&](const float* x) {  // magnitude_key of four values, compared with min_key
    const __m128i a = _mm_and_si128(_mm_castps_si128(_mm_loadu_ps(x)), abs_mask);
    const __m128i is_nan = _mm_cmpgt_epi32(a, inf);
    if constexpr (CountNaN) nan_lanes = _mm_sub_epi32(nan_lanes, is_nan);
    const __m128i key = _mm_andnot_si128(is_nan, _mm_add_epi32(a, one));  // NaN → 0
    return static_cast<unsigned>(_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(key, below))));
  };
  for (uint64_t step = 1; i + 16 <= n; i += 16, ++step) {
    const float* x = v.data() + i;
    unsigned m = passing(x) | passing(x + 4) << 4 | passing(x + 8) << 8 | passing(x + 12) << 12;
    for (; m; m &= m - 1) {
      const unsigned j = static_cast<unsigned>(std::countr_zero(m));
      f(i + j, magnitude_key(x[j]));
    }
    if (CountNaN && step % (uint64_t{1} << 24) == 0) flush();
  }
  if constexpr (CountNaN) flush();
#endif
  for (; i < n; ++i) {
    const uint32_t key = magnitude_key(v[i]);
    if constexpr (CountNaN) nan += std::isnan(v[i]);
    if (key >= min_key) f(i, key);
  }
  return nan;
}

// Histogram of the first digit. Gradients put most values in a few bins (a few exponents), so
// four interleaved histograms keep consecutive increments of one bin from waiting on each other.
template <bool CountNonfinite>
uint64_t first_digit_hist(std::span<const float> v, Hist& h) {
  const size_t n = v.size();
  // |x| ≥ +Inf as bits (NaN above it): the screen costs a compare and an add on keys at hand.
  auto bad = [](float x) -> uint64_t {
    uint32_t b;
    std::memcpy(&b, &x, 4);
    return CountNonfinite ? (b & 0x7fffffffu) >= 0x7f800000u : 0;
  };
  uint64_t nonfinite = 0;
  if (n < 4096) {
    for (float x : v) ++h[digit(magnitude_key(x), 0)], nonfinite += bad(x);
    return nonfinite;
  }
  std::array<Hist, 3> more{};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    ++h[digit(magnitude_key(v[i]), 0)];
    ++more[0][digit(magnitude_key(v[i + 1]), 0)];
    ++more[1][digit(magnitude_key(v[i + 2]), 0)];
    ++more[2][digit(magnitude_key(v[i + 3]), 0)];
    if constexpr (CountNonfinite) nonfinite += bad(v[i]) + bad(v[i + 1]) + bad(v[i + 2]) + bad(v[i + 3]);
  }
  for (; i < n; ++i) ++h[digit(magnitude_key(v[i]), 0)], nonfinite += bad(v[i]);
  for (const Hist& m : more)
    for (uint32_t b = 0; b < kBins[0]; ++b) h[b] += m[b];
  return nonfinite;
}

// Keeps every key > cut.key and the first cut.ties keys == cut.key; ascending positions.
std::vector<uint64_t> apply_cut(std::span<const float> v, TopkCut cut, uint64_t reserve) {
  std::vector<uint64_t> idx;
  idx.reserve(reserve);
  for_each_at_least(v, cut.key, [&](size_t i, uint32_t key) {
    if (cut.take(key)) idx.push_back(i);
  });
  return idx;
}

// scope=global: the snapshot-wide cut and the ties each tensor takes (global order = tensor
// order, then element index).
struct GlobalCut final : StageState {
  bool none = true;  // the snapshot has no floating element: keep nothing
  TopkCut cut;
  std::vector<uint64_t> ties;  // per tensor index of the frame
};

class Topk final : public ElementwiseSparsifier {
 public:
  Topk(KeepCount count, bool global, bool by_sign) : count_(count), global_(global), by_sign_(by_sign) {}
  // k of the tensor's d (layer scope), or k of each sign (by_sign: up to 2k); the snapshot-wide
  // cut may keep a whole tensor.
  double kept_fraction(const TensorInfo& t) const noexcept override {
    const uint64_t d = t.elements();
    if (global_ || d == 0) return 1.0;
    const double k = static_cast<double>(count_.of(d)) * (by_sign_ ? 2.0 : 1.0);
    return std::min(1.0, k / static_cast<double>(d));
  }

  // Three passes over the frame (one per radix digit), each loading one tensor at a time. The
  // last pass keeps, per tensor, the non-empty bins of its last-digit histogram (≤ 1024 each).
  bool plans_frame() const noexcept override { return global_; }
  std::shared_ptr<const StageState> plan_frame(const FrameView& frame, const StageContext&) const override {
    if (!global_) return nullptr;
    auto plan = std::make_shared<GlobalCut>();
    plan->ties.assign(frame.count, 0);
    auto each = [&](auto&& per_tensor) {
      for (size_t i = 0; i < frame.count; ++i)
        if (is_float(frame.info(i).dtype)) per_tensor(i, frame.load(i));
    };
    Hist h{};
    uint64_t total = 0;
    each([&](size_t, const Tensor& t) {
      total += t.elements();
      for_each_key(t, [&](uint32_t key) { ++h[digit(key, 0)]; });
    });
    uint64_t r = count_.of(total);
    if (r == 0) return plan;
    const uint32_t b0 = pick_bin(h, kBins[0], r);
    h.fill(0);
    each([&](size_t, const Tensor& t) {
      for_each_key(t, [&](uint32_t key) {
        if (digit(key, 0) == b0) ++h[digit(key, 1)];
      });
    });
    const uint32_t prefix = (b0 << 10) | pick_bin(h, kBins[1], r);  // key >> 10 of the cut
    struct Bin {
      size_t tensor;
      uint32_t bin;
      uint64_t count;
    };
    std::vector<Bin> bins;
    h.fill(0);
    each([&](size_t i, const Tensor& t) {
      Hist local{};
      for_each_key(t, [&](uint32_t key) {
        if ((key >> 10) == prefix) ++local[key & 1023];
      });
      for (uint32_t b = 0; b < 1024; ++b) {
        if (local[b] == 0) continue;
        bins.push_back({i, b, local[b]});
        h[b] += local[b];
      }
    });
    const uint32_t b2 = pick_bin(h, kBins[2], r);
    plan->none = false;
    plan->cut = {(prefix << 10) | b2, r};
    for (const Bin& b : bins) {
      if (b.bin != b2 || r == 0) continue;
      plan->ties[b.tensor] = std::min(b.count, r);
      r -= plan->ties[b.tensor];
    }
    return plan;
  }

  bool reads_f32_view() const noexcept override { return true; }
  // Layer scope counts an f32 tensor's NaN/Inf in its first pass (scope=global leaves it to the
  // codec: its frame plan reads every tensor before any is encoded).
  bool screens_nonfinite() const noexcept override { return !global_; }

  void encode(Payload& p, Streams&, const StageContext& ctx) override {
    const std::span<const float> v = p.f32_view();
    std::vector<uint64_t> idx;
    const auto* plan = global_ ? dynamic_cast<const GlobalCut*>(ctx.frame_plan) : nullptr;
    if (plan) {
      // The plan's cut applied to this tensor (its share of the snapshot's k).
      if (ctx.tensor >= plan->ties.size()) fail(ErrorCode::Internal, "topk: tensor outside the frame plan");
      if (!plan->none) idx = apply_cut(v, {plan->cut.key, plan->ties[ctx.tensor]}, 0);
    } else {
      // Layer scope; also scope=global without a frame pre-pass (a lone tensor is its snapshot).
      // Screened only while reading the f32 input itself: after a transform (ef, delta) the
      // values are not the input's (a transform that would make an Inf stops the pipeline
      // itself, Payload::overflow).
      const bool screen = p.exact && p.source && p.source->dtype() == DType::F32;
      uint64_t* nonfinite = screen ? &p.nonfinite : nullptr;
      idx = by_sign_ ? topk_select_by_sign(v, count_.of(v.size()), nonfinite)
                     : topk_select(v, count_.of(v.size()), nonfinite);
      if (p.nonfinite) return;  // the codec refuses the tensor or stores it raw
    }
    keep_at(p, v, std::move(idx));
  }

 private:
  KeepCount count_;
  bool global_;
  bool by_sign_;
};

}  // namespace

// topk_select_sampled's sample: 256 runs of 16 elements.
constexpr unsigned kSampleRuns = 256, kSampleRun = 16, kSample = kSampleRuns * kSampleRun;

bool topk_select_sampled(std::span<const float> v, uint64_t k, uint64_t* nonfinite, std::vector<uint64_t>& idx) {
  const uint64_t d = v.size();
  idx.clear();
  if (d < kSampledMin || k == 0 || k >= d) return false;
  uint32_t sample[kSample];
  for (unsigned r = 0; r < kSampleRuns; ++r) {
    const uint64_t at = r * (d - kSampleRun) / (kSampleRuns - 1);
    for (unsigned j = 0; j < kSampleRun; ++j) sample[r * kSampleRun + j] = magnitude_key(v[at + j]);
  }
  // The rank in the sample of the bound: the expected count above the cut, plus four standard
  // deviations of a binomial count and 16; a bound passing more than 1/8 of the sample is not
  // worth a pass of its own.
  const double expect = static_cast<double>(k) * kSample / static_cast<double>(d);
  const double rank = expect + 4.0 * std::sqrt(expect) + 16.0;
  if (rank >= kSample / 8.0) return false;
  const auto nth = static_cast<std::ptrdiff_t>(rank);
  std::nth_element(sample, sample + nth, sample + kSample, std::greater<>());
  const uint32_t bound = sample[nth];
  if (bound <= 1) return false;  // ±0 or NaN at the bound: nearly everything would pass
  std::vector<uint32_t> keys;
  keys.reserve(static_cast<size_t>(static_cast<double>(d) * (rank + 1) / kSample * 1.25) + 64);
  idx.reserve(keys.capacity());
  auto collect = [&](size_t i, uint32_t key) {
    idx.push_back(i);
    keys.push_back(key);
  };
  const uint64_t nan = nonfinite ? for_each_at_least<true>(v, bound, collect) : for_each_at_least(v, bound, collect);
  if (nonfinite) {
    // +Inf's key 0x7f800001 is the largest, so every ±Inf passed the bound.
    *nonfinite = nan + static_cast<uint64_t>(std::count(keys.begin(), keys.end(), magnitude_key(kInfinity)));
    if (*nonfinite) {
      idx.clear();
      return true;
    }
  }
  if (keys.size() < k) {
    idx.clear();
    return false;
  }
  std::vector<uint32_t> scratch(keys);
  TopkCut cut = refine(scratch, k, 0, 0);
  size_t w = 0;
  for (size_t j = 0; j < keys.size(); ++j)
    if (cut.take(keys[j])) idx[w++] = idx[j];
  idx.resize(w);
  return true;
}

TopkCut topk_cut(std::vector<uint32_t>& keys, uint64_t k) {
  if (k == 0 || k > keys.size()) fail(ErrorCode::Internal, "topk: k outside [1, d]");
  return refine(keys, k, 0, 0);
}

std::vector<uint64_t> topk_select(std::span<const float> v, uint64_t k, uint64_t* nonfinite) {
  const uint64_t d = v.size();
  k = std::min(k, d);
  if (nonfinite) *nonfinite = 0;
  if (k == 0) return {};
  if (k == d) {
    if (nonfinite) {
      for (float x : v) *nonfinite += !std::isfinite(x);
      if (*nonfinite) return {};
    }
    std::vector<uint64_t> all(d);
    std::iota(all.begin(), all.end(), uint64_t{0});
    return all;
  }
  if (d >= kSampledMin) {
    std::vector<uint64_t> idx;
    if (topk_select_sampled(v, k, nonfinite, idx)) return idx;
  }
  // First digit straight from the values; only the elements of the chosen bin are copied.
  Hist h{};
  if (nonfinite) {
    if ((*nonfinite = first_digit_hist<true>(v, h)) != 0) return {};
  } else {
    first_digit_hist<false>(v, h);
  }
  uint64_t r = k;
  const uint32_t b0 = pick_bin(h, kBins[0], r);
  std::vector<uint32_t> cand;
  cand.reserve(h[b0]);
  for_each_at_least(v, b0 << kShift[0], [&](size_t, uint32_t key) {
    if (digit(key, 0) == b0) cand.push_back(key);  // keys above the bin pass too: k − r of them
  });
  return apply_cut(v, refine(cand, r, 1, b0 << kShift[0]), k);
}

std::vector<uint64_t> topk_select_by_sign(std::span<const float> v, uint64_t k, uint64_t* nonfinite) {
  if (nonfinite) {
    *nonfinite = 0;
    for (float x : v) *nonfinite += !std::isfinite(x);
    if (*nonfinite) return {};
  }
  if (k == 0 || v.empty()) return {};
  auto side_of = [](float x) { return x < 0.0f ? 1 : 0; };  // 0 = non-negative, 1 = negative
  // One pass: both sides' first-digit histograms and sizes.
  std::array<Hist, 2> h{};
  uint64_t size[2] = {0, 0};
  for (float x : v) {
    const int s = side_of(x);
    ++h[s][digit(magnitude_key(x), 0)];
    ++size[s];
  }
  TopkCut cut[2];
  for (int s = 0; s < 2; ++s) {
    uint64_t r = std::min(k, size[s]);
    if (r == 0) {
      cut[s] = {UINT32_MAX, 0};  // keys < 2^31: nothing passes
      continue;
    }
    if (r == size[s]) {
      cut[s] = {0, r};  // the whole side: every key > 0, and every key 0 (NaN) as a tie
      continue;
    }
    const uint32_t b0 = pick_bin(h[s], kBins[0], r);
    std::vector<uint32_t> cand;
    cand.reserve(h[s][b0]);
    for (float x : v)
      if (const uint32_t key = magnitude_key(x); side_of(x) == s && digit(key, 0) == b0) cand.push_back(key);
    cut[s] = refine(cand, r, 1, b0 << kShift[0]);
  }
  std::vector<uint64_t> idx;
  idx.reserve(std::min(k, size[0]) + std::min(k, size[1]));
  for (size_t i = 0; i < v.size(); ++i)
    if (cut[side_of(v[i])].take(magnitude_key(v[i]))) idx.push_back(i);
  return idx;
}

std::unique_ptr<Stage> make_topk(const Params& p, uint32_t) {
  const bool global = p.text("scope") == "global", by_sign = p.flag("by_sign");
  if (global && by_sign) fail(ErrorCode::Usage, "topk: by_sign=true works per tensor only (scope=layer)");
  return std::make_unique<Topk>(KeepCount::from(p, "topk"), global, by_sign);
}

}  // namespace gradcodec::stages
