// SPDX-License-Identifier: BSD-3-Clause
#include "sparsify/tcs.hpp"
#include "sparsify/radix.hpp"

#include "index/gaps.hpp"
#include "index/tcspos.hpp"
#include "sparsify/topk.hpp"

#include <gradcodec/half.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace gradcodec::stages {

namespace {

constexpr const char* kName = "tcs";

// ---- state ----

// Shared (both sides): the previous decoded output of this stage, as its nonzero entries.
struct Previous final : StageState {
  bool have = false;
  uint64_t n = 0;
  std::vector<uint64_t> pos;  // ascending
  std::vector<float> val;     // nonzero, non-NaN (magnitude_key > 1)

  void remember(std::span<const float> out) {
    have = true;
    n = out.size();
    pos.clear();
    val.clear();
    for (size_t i = 0; i < out.size(); ++i) {
      if (magnitude_key(out[i]) > 1) {
        pos.push_back(i);
        val.push_back(out[i]);
      }
    }
  }
  bool usable(uint64_t size) const noexcept { return have && n == size; }
};

// Encoder-private: the error accumulation e. Between encode() and after_encode() it holds ḡ.
struct Memory final : StageState {
  std::vector<float> e;
  bool pending = false;  // encode() ran and after_encode() has not yet
};

// ---- counts ----

// round(phi·d), at least 1 when phi > 0, at most d.
uint64_t count_of(double phi, uint64_t d) noexcept {
  if (d == 0 || phi <= 0) return 0;
  const auto k = static_cast<uint64_t>(std::llround(phi * static_cast<double>(d)));
  return std::clamp<uint64_t>(k, 1, d);
}
// ⌈phi·d⌉, at most d ("at least phi·d_l positions", §II-C eqs. 14–15).
uint64_t min_of(double phi, uint64_t d) noexcept {
  if (d == 0 || phi <= 0) return 0;
  return std::min<uint64_t>(d, static_cast<uint64_t>(std::ceil(phi * static_cast<double>(d))));
}

enum class Fairness { None, LF, PLF };

struct Rule {
  double global = 0.01, local = 0.001, min_global = 1e-3, min_local = 4e-4;
  Fairness fair = Fairness::None;
  uint64_t min_g(uint64_t d) const noexcept { return fair == Fairness::None ? 0 : min_of(min_global, d); }
  uint64_t min_l(uint64_t d) const noexcept { return fair == Fairness::LF ? min_of(min_local, d) : 0; }
  uint64_t min_key(uint64_t d) const noexcept { return min_g(d) + min_l(d); }  // keyframes
};

// ---- selection ----

// Local ranking key: 0 = not selectable (in the global mask); else magnitude_key(v) + 1 (so NaN,
// whose magnitude key is 0, still ranks lowest among the selectable).
inline uint32_t local_key(float v) noexcept { return magnitude_key(v) + 1; }

// Positions of the k largest nonzero keys (ties to the lower position), ascending. k is clamped
// to the number of nonzero keys.
std::vector<uint64_t> top_keys(const std::vector<uint32_t>& keys, uint64_t k) {
  std::vector<uint64_t> out;
  if (k == 0) return out;
  std::vector<uint32_t> cand;
  for (uint32_t key : keys)
    if (key) cand.push_back(key);
  if (k >= cand.size()) {
    out.reserve(cand.size());
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i]) out.push_back(i);
    return out;
  }
  TopkCut cut = topk_cut(cand, k);
  out.reserve(k);
  for (size_t i = 0; i < keys.size(); ++i)
    if (cut.take(keys[i])) out.push_back(i);
  return out;
}

// The global mask of a tensor of n elements: the top-k of |previous output| (ties to the lower
// position; zeros rank below every stored entry). Without a usable previous output every
// element is zero: the first k positions. Both sides call this with the same state.
std::vector<uint64_t> global_mask(const Previous* prev, uint64_t n, uint64_t k) {
  k = std::min(k, n);
  std::vector<uint64_t> out;
  if (k == 0) return out;
  const size_t nnz = prev && prev->usable(n) ? prev->pos.size() : 0;
  out.reserve(k);
  if (k <= nnz) {
    for (uint64_t j : topk_select(prev->val, k)) out.push_back(prev->pos[j]);
    return out;
  }
  uint64_t zeros = k - nnz;
  size_t j = 0;
  for (uint64_t x = 0; x < n && (j < nnz || zeros > 0); ++x) {
    if (j < nnz && prev->pos[j] == x) {
      out.push_back(x);
      ++j;
    } else if (zeros > 0) {
      out.push_back(x);
      --zeros;
    }
  }
  return out;
}

using radix::digit;
using radix::Hist;
using radix::kBins;
using radix::kShift;
uint32_t pick_bin(const Hist& h, uint32_t bins, uint64_t& r) { return radix::pick_bin(h, bins, r, "tcs"); }

// The ranking keys of one tensor for a snapshot-wide selection, in position order. Dense: one
// key per position, 0 = not selectable. Sparse: the keys of the listed entries (all > 1); every
// other one of the n positions has key 1 (a zero of the previous output).
struct Keys {
  bool sparse = false;
  std::vector<uint32_t> keys;
  uint64_t n = 0;  // sparse: positions in all
};
using KeysOf = std::function<void(size_t, Keys&)>;

// The previous output's keys (global selection): its stored entries, zeros implicit — the
// order global_mask() uses.
void previous_keys(const Previous* prev, uint64_t n, Keys& k) {
  k.sparse = true;
  k.n = n;
  k.keys.clear();
  if (!prev || !prev->usable(n)) return;
  for (float v : prev->val) k.keys.push_back(magnitude_key(v));
}

// Snapshot-wide top-K over the tensors of a frame, with a minimum share per tensor (§II-C):
// tensor i first reserves its own top-min_i keys, the other selectable keys compete for the rest
// of K by key (ties: lower tensor, then lower position). Returns per tensor the count it gets;
// the tensor's selection is then its own top-count (the same set). The total is K (clamped to
// the selectable keys) unless the minimums alone exceed it. A radix select, no full sort:
// keys_of(i, keys) is called twice per tensor (three times with minimums), holding one tensor's
// keys at a time; the keys of the cut's top-digit bin are kept for the last two digits.
std::vector<uint64_t> snapshot_counts(size_t count, const KeysOf& keys_of, const std::vector<uint64_t>& min_share,
                                      uint64_t K) {
  Keys k;
  std::vector<uint32_t> scratch;
  std::vector<uint64_t> out(count, 0);
  std::vector<TopkCut> reserve(count, TopkCut{std::numeric_limits<uint32_t>::max(), 0});  // none
  uint64_t reserved = 0, selectable = 0;
  const bool any_min = std::any_of(min_share.begin(), min_share.end(), [](uint64_t m) { return m > 0; });
  if (any_min) {
    for (size_t i = 0; i < count; ++i) {
      keys_of(i, k);
      scratch.clear();
      for (uint32_t x : k.keys)
        if (x) scratch.push_back(x);
      const uint64_t avail = k.sparse ? k.n : scratch.size();
      selectable += avail;
      out[i] = std::min<uint64_t>(min_share[i], avail);
      reserved += out[i];
      if (out[i] == 0) continue;
      if (out[i] <= scratch.size()) reserve[i] = topk_cut(scratch, out[i]);
      else reserve[i] = TopkCut{1, out[i] - scratch.size()};  // every listed entry and the first zeros
    }
  }
  // Calls f(i, key, count) for the selectable keys outside tensor i's reserved top.
  auto each = [&](auto&& f) {
    for (size_t i = 0; i < count; ++i) {
      keys_of(i, k);
      const TopkCut& rc = reserve[i];
      uint64_t ties = rc.ties;
      for (uint32_t x : k.keys) {
        if (x == 0 || x > rc.key) continue;
        if (x == rc.key && ties > 0) {
          --ties;
          continue;
        }
        f(i, x, uint64_t{1});
      }
      if (k.sparse) {  // the implicit key-1 positions, the first `ties` of them reserved if rc.key == 1
        uint64_t ones = k.n - k.keys.size();
        if (rc.key == 1) ones -= std::min(ones, ties);
        if (rc.key >= 1 && ones > 0) f(i, 1u, ones);
      }
    }
  };
  Hist h{};
  each([&](size_t, uint32_t x, uint64_t c) { h[digit(x, 0)] += c; });
  uint64_t candidates = 0;
  for (uint64_t c : h) candidates += c;
  if (!any_min) selectable = candidates;
  K = std::min(K, selectable);
  if (reserved >= K || candidates == 0) return out;
  uint64_t r = K - reserved;
  const uint32_t b0 = pick_bin(h, kBins[0], r);
  // Second and last pass: per tensor, the candidates above the cut bin, and the keys inside it
  // (usually a small share of d); the rest of the select runs on those in memory.
  std::vector<uint64_t> above(count, 0), equal(count, 0), ones(count, 0);  // ones: implicit key-1 entries
  std::vector<std::vector<uint32_t>> in_bin(count);
  each([&](size_t i, uint32_t x, uint64_t c) {
    const uint32_t d0 = digit(x, 0);
    if (d0 > b0) above[i] += c;
    else if (d0 == b0 && c == 1) in_bin[i].push_back(x);
    else if (d0 == b0) ones[i] += c;  // only the implicit zeros come in bulk (key 1)
  });
  h.fill(0);
  for (size_t i = 0; i < count; ++i) {
    for (uint32_t x : in_bin[i]) ++h[digit(x, 1)];
    h[digit(1, 1)] += ones[i];
  }
  const uint32_t prefix = (b0 << 10) | pick_bin(h, kBins[1], r);
  h.fill(0);
  for (size_t i = 0; i < count; ++i) {
    for (uint32_t x : in_bin[i])
      if ((x >> 10) == prefix) ++h[x & 1023];
    if ((1u >> 10) == prefix) h[1] += ones[i];
  }
  const uint32_t cut = (prefix << 10) | pick_bin(h, kBins[2], r);  // r = ties at `cut` to take
  for (size_t i = 0; i < count; ++i) {
    for (uint32_t x : in_bin[i]) {
      if (x > cut) ++above[i];
      else if (x == cut) ++equal[i];
    }
    if (cut == 1) equal[i] += ones[i];  // (cut > 1: the zeros are below it)
    const uint64_t take = std::min(equal[i], r);
    r -= take;
    out[i] += above[i] + take;
  }
  return out;
}

// The values of a tensor as f32 into `v` (resized; nothing is read for an empty tensor).
void f32_values(const Tensor& t, std::vector<float>& v) {
  v.resize(t.elements());
  if (!v.empty()) to_f32(t.dtype(), t.data.data(), v.size(), v.data());
}

// ḡ = g + e for a tensor of the frame, e from the encoder's memory (absent or stale: zero).
void add_memory(std::vector<float>& g, const StageState* state) {
  const auto* mem = dynamic_cast<const Memory*>(state);
  if (!mem || mem->e.size() != g.size()) return;
  for (size_t i = 0; i < g.size(); ++i) g[i] += mem->e[i];
}

// The snapshot's decisions for one frame: per tensor, its global mask and its local count (on a
// keyframe: the count of coded positions, and no global mask).
struct Plan final : StageState {
  bool keyframe = false;
  std::vector<uint64_t> n;                    // elements per tensor (0: not floating)
  std::vector<std::vector<uint64_t>> global;  // ascending positions
  std::vector<uint64_t> local;
};

// Ascending union of two disjoint ascending lists; Corrupt when they share a position.
std::vector<uint64_t> merge_disjoint(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  std::vector<uint64_t> out;
  out.reserve(a.size() + b.size());
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i] < b[j])) {
      out.push_back(a[i++]);
    } else if (i == a.size() || b[j] < a[i]) {
      out.push_back(b[j++]);
    } else {
      idx::corrupt(kName, "coded position " + std::to_string(b[j]) + " is already in the global mask");
    }
  }
  return out;
}

// The value the decoder outputs for a reconstructed f32 value, in a tensor of dtype `dt`.
float as_decoded(float x, DType dt) noexcept {
  switch (dt) {
    case DType::F16: return f16_to_f32(f32_to_f16(x));
    case DType::BF16: return bf16_to_f32(f32_to_bf16(x));
    default: return x;
  }
}

class Tcs final : public Reducer {
 public:
  explicit Tcs(Rule rule) : rule_(rule), positions_(static_cast<IndexCoder*>(make_tcspos({}, 1).release())) {}
  StageKind kind() const noexcept override { return StageKind::Sparsifier; }
  bool stateful() const noexcept override { return true; }
  bool needs_index_coder() const noexcept override { return false; }  // codes its own positions
  bool values_exact() const noexcept override { return false; }       // ḡ = g + e
  // The error memory e, the previous decoded update, ḡ and the mirror decoder's values, plus
  // the kept positions and values (tcs on a 4096x4096 f32 tensor: 16.0 B/element). The global
  // mask is snapshot-wide: any tensor may keep all of its elements (kept_fraction 1).
  double work_per_element(const TensorInfo&, double kept) const noexcept override { return 18 + 12 * kept; }

  bool plans_frame() const noexcept override { return true; }
  std::shared_ptr<const StageState> plan_frame(const FrameView& frame, const StageContext& ctx) const override {
    auto plan = std::make_shared<Plan>();
    const size_t count = frame.count;
    plan->keyframe = ctx.keyframe;
    plan->n.assign(count, 0);
    plan->global.assign(count, {});
    plan->local.assign(count, 0);
    uint64_t d = 0;
    for (size_t i = 0; i < count; ++i) {
      const TensorInfo info = frame.info(i);
      if (is_float(info.dtype)) plan->n[i] = info.elements();
      d += plan->n[i];
    }
    if (d == 0) return plan;
    auto state_of = [&](size_t i) -> const StageState* { return frame.state ? frame.state(i) : nullptr; };
    // ḡ of tensor i, minus the positions of its global mask, as local keys.
    std::vector<float> g;
    auto local_keys = [&](size_t i, Keys& k) {
      k.sparse = false;
      k.keys.clear();
      if (plan->n[i] == 0) return;
      f32_values(frame.load(i), g);
      if (g.size() != plan->n[i]) fail(ErrorCode::Internal, "tcs: a tensor changed size within a frame");
      add_memory(g, state_of(i));
      k.keys.resize(g.size());
      for (size_t j = 0; j < g.size(); ++j) k.keys[j] = local_key(g[j]);
      for (uint64_t x : plan->global[i]) k.keys[x] = 0;
    };
    std::vector<uint64_t> mins(count, 0);
    if (ctx.keyframe) {
      for (size_t i = 0; i < count; ++i) mins[i] = rule_.min_key(plan->n[i]);
      plan->local = snapshot_counts(count, local_keys, mins, count_of(rule_.global, d) + count_of(rule_.local, d));
      return plan;
    }
    auto previous = [&](size_t i) -> const Previous* {
      return frame.shared ? dynamic_cast<const Previous*>(frame.shared(i)) : nullptr;
    };
    for (size_t i = 0; i < count; ++i) mins[i] = rule_.min_g(plan->n[i]);
    const auto counts = snapshot_counts(
        count, [&](size_t i, Keys& k) { previous_keys(previous(i), plan->n[i], k); }, mins, count_of(rule_.global, d));
    for (size_t i = 0; i < count; ++i) plan->global[i] = global_mask(previous(i), plan->n[i], counts[i]);
    for (size_t i = 0; i < count; ++i) mins[i] = rule_.min_l(plan->n[i]);
    plan->local = snapshot_counts(count, local_keys, mins, count_of(rule_.local, d));
    return plan;
  }

  void encode(Payload& p, Streams& out, const StageContext& ctx) override {
    const uint64_t n = p.n;
    std::vector<float>& g = p.dense_f32();
    auto& mem = ctx.state_as<Memory>();
    if (mem.e.size() != n) mem.e.assign(n, 0.0f);
    for (size_t i = 0; i < n; ++i) g[i] += mem.e[i];  // ḡ

    std::vector<uint64_t> gmask;
    uint64_t k_local = 0;
    const auto* plan = dynamic_cast<const Plan*>(ctx.frame_plan);
    if (plan) {
      if (ctx.tensor >= plan->n.size() || plan->n[ctx.tensor] != n || plan->keyframe != ctx.keyframe)
        fail(ErrorCode::Internal, "tcs: tensor outside its frame plan");
      gmask = plan->global[ctx.tensor];
      k_local = plan->local[ctx.tensor];
    } else if (ctx.keyframe) {  // a lone tensor: counts of its own
      k_local = std::max(count_of(rule_.global, n) + count_of(rule_.local, n), rule_.min_key(n));
    } else {
      const uint64_t k_g = std::min(n, std::max(count_of(rule_.global, n), rule_.min_g(n)));
      const Previous* prev = ctx.shared && *ctx.shared ? dynamic_cast<const Previous*>(ctx.shared->get()) : nullptr;
      gmask = global_mask(prev, n, k_g);  // read only: the mirror decoder updates it
      k_local = std::max(count_of(rule_.local, n), rule_.min_l(n));
    }
    std::vector<uint32_t> keys(n);
    for (size_t i = 0; i < n; ++i) keys[i] = local_key(g[i]);
    for (uint64_t x : gmask) keys[x] = 0;
    std::vector<uint64_t> local = top_keys(keys, k_local);
    keys = {};

    Stream& s = out.add(kIndexStream);
    idx::put_leb128(s.bytes, gmask.size());
    {
      Payload lp;
      lp.info = p.info;
      lp.n = n;
      lp.sparse = true;
      lp.universe = n;
      lp.index = local;
      Streams tmp;
      positions_->encode(lp, tmp, ctx);
      const auto& b = tmp.all().front().bytes;
      s.bytes.insert(s.bytes.end(), b.begin(), b.end());
    }
    std::vector<uint64_t> kept = merge_disjoint(gmask, local);
    std::vector<float> values(kept.size());
    for (size_t j = 0; j < kept.size(); ++j) values[j] = g[kept[j]];
    mem.e.swap(p.values);  // e holds ḡ until after_encode subtracts what the decoder got
    mem.pending = true;
    p.values = std::move(values);
    p.index = std::move(kept);
    p.sparse = true;
    p.universe = n;
    p.block = 1;
    p.index_implicit = true;
  }

  void after_encode(std::span<const float> recon, const StageContext& ctx) override {
    auto& mem = ctx.state_as<Memory>();
    if (!mem.pending) return;  // stored raw without running the stage (a non-finite tensor): e stays
    mem.pending = false;
    if (recon.size() != mem.e.size()) fail(ErrorCode::Internal, "tcs: reconstruction size differs from the memory");
    const DType dt = ctx.info ? ctx.info->dtype : DType::F32;
    for (size_t i = 0; i < recon.size(); ++i) mem.e[i] -= as_decoded(recon[i], dt);
  }

  void prepare_decode(Payload& p, const Streams& in, const StageContext& ctx) override {
    auto s = in.get(kIndexStream);
    size_t pos = 0;
    const uint64_t k_g = idx::get_leb128(s, pos, kName);
    if (k_g > p.n)
      idx::corrupt(kName, "global mask of " + std::to_string(k_g) + " positions in a tensor of " + std::to_string(p.n));
    Payload lp;
    lp.info = p.info;
    lp.n = p.n;
    lp.sparse = true;
    lp.universe = p.n;
    {
      Streams tmp;
      tmp.add(kIndexStream).bytes.assign(s.begin() + static_cast<std::ptrdiff_t>(pos), s.end());
      positions_->decode(lp, tmp, ctx);
    }
    const std::vector<uint64_t> gmask = global_mask(&ctx.shared_as<Previous>(), p.n, k_g);
    p.index = merge_disjoint(gmask, lp.index);
    p.sparse = true;
    p.universe = p.n;
    p.block = 1;
    p.index_implicit = true;
  }

  void decode(Payload& p, const Streams&, const StageContext& ctx) override {
    scatter_to_dense(p);
    ctx.shared_as<Previous>().remember(p.values);
  }

  void on_raw(std::span<const float> output, const StageContext& ctx) override {
    ctx.shared_as<Previous>().remember(output);
  }

 private:
  Rule rule_;
  std::unique_ptr<IndexCoder> positions_;  // the tcspos code (stateless)
};

}  // namespace

TcsCounts tcs_counts(std::span<const uint8_t> index_stream) {
  size_t pos = 0;
  TcsCounts c;
  c.global = idx::get_leb128(index_stream, pos, kName);
  c.local = idx::get_leb128(index_stream, pos, kName);
  return c;
}

std::unique_ptr<Stage> make_tcs(const Params& p, uint32_t) {
  Rule r;
  r.global = p.num("global");
  r.local = p.num("local");
  r.min_global = p.num("min_global");
  r.min_local = p.num("min_local");
  const std::string& f = p.text("fairness");
  r.fair = f == "lf" ? Fairness::LF : f == "plf" ? Fairness::PLF : Fairness::None;
  return std::make_unique<Tcs>(r);
}

}  // namespace gradcodec::stages
