// SPDX-License-Identifier: BSD-3-Clause
#include "sparsify/bird.hpp"

#include "base/workers.hpp"
#include "sparsify/bird_sample.hpp"
#include "sparsify/bird_split.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <exception>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

namespace gradcodec::stages {

namespace {

// The frame's attach decisions: cached selections of the sibling tensors, bitmaps of vectors.
struct BirdPlan final : StageState {
  struct Weight {
    uint64_t elements = 0;  // the tensor the selection was made on (a consistency check)
    uint64_t nonfinite = 0;  // its NaN/Inf count (screen_nonfinite), f32 tensors
    BirdSelection sel;
    // The kept blocks' values as encode sends them (±S by sign), made while the tensor was still
    // in cache from its norms: f32 tensors without NaN/Inf that keep at most 1/8 of their
    // elements (the plan holds them for the whole frame); empty otherwise (encode then reads
    // the tensor again).
    std::vector<float> values;
  };
  std::unordered_map<uint32_t, Weight> weights;               // by tensor index
  std::unordered_map<uint32_t, std::vector<uint8_t>> bitmaps;  // by tensor index: the wire bitmap
};

uint64_t bitmap_bytes(uint64_t n) noexcept { return n / 8 + (n % 8 != 0); }

// The kept blocks are scattered over the tensor: each block's first and last lines are asked
// for kAheadBlocks blocks ahead, so that the misses overlap instead of coming one per block.
constexpr size_t kAheadBlocks = 16;

// The values encode sends for the kept `blocks` of m elements of the f32 tensor whose
// little-endian bytes are at x (any alignment: a memory-mapped input is read in place): ±scale
// by the sign of each element (x < 0 is negative), block after block, into dst.
void kept_signs(const uint8_t* x, const std::vector<uint64_t>& blocks, uint64_t m, float scale, float* dst) {
  const float pos = scale, neg = -scale;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (i + kAheadBlocks < blocks.size()) {
      const uint8_t* ahead = x + 4 * blocks[i + kAheadBlocks] * m;
      __builtin_prefetch(ahead, 0, 1);
      __builtin_prefetch(ahead + 4 * (m - 1), 0, 1);
    }
    const uint8_t* src = x + 4 * blocks[i] * m;
    for (uint64_t e = 0; e < m; ++e) {
      float f;
      std::memcpy(&f, src + 4 * e, 4);
      dst[e] = f < 0.0f ? neg : pos;
    }
    dst += m;
  }
}

// The NaN/Inf count of an f32 tensor of n elements split into `blocks` blocks of m whose L1 norms
// (f32 sums) were summarised as `norms`. Such a sum is finite unless one of its elements is
// NaN/Inf or the sum overflowed, so the elements are only counted (by `count`) when a norm is
// not finite or some elements lie outside the blocks: a clean tensor costs nothing more than its
// norms.
template <class Count>
uint64_t screen_nonfinite(const NormsSummary& norms, uint64_t blocks, uint64_t m, uint64_t n, Count&& count) {
  return !norms.finite || blocks * m != n ? count() : 0;
}

class Bird final : public Reducer {
 public:
  Bird(BirdRule rule, bool attach, const char* name) : rule_(rule), attach_(attach), name_(name) {}
  StageKind kind() const noexcept override { return StageKind::Sparsifier; }
  bool stochastic() const noexcept override { return true; }
  bool values_exact() const noexcept override { return false; }
  bool reads_f32_view() const noexcept override { return true; }
  bool screens_nonfinite() const noexcept override { return true; }
  uint64_t kept_block(const TensorInfo& t) const noexcept override { return bird_split(t.shape).block; }
  // No dense copy (the input is read in place): the block norms (two f32 per block), the kept
  // blocks' values and positions, and scratch (bird+ on a 4096x4096 f32 tensor: 3.9 B/element).
  double work_per_element(const TensorInfo& t, double kept) const noexcept override {
    const double m = static_cast<double>(bird_split(t.shape).block);
    return 1 + 4 * kept + 16 / m;
  }

  bool plans_frame() const noexcept override { return attach_; }
  std::shared_ptr<const StageState> plan_frame(const FrameView& frame, const StageContext& ctx) const override {
    if (!attach_ || frame.count == 0) return nullptr;
    const std::vector<int64_t> attach = bird_attach_map(frame.count, frame.info);
    std::map<size_t, std::vector<uint32_t>> dependents;  // sibling → its vectors, in frame order
    for (size_t i = 0; i < attach.size(); ++i)
      if (attach[i] >= 0) dependents[static_cast<size_t>(attach[i])].push_back(static_cast<uint32_t>(i));
    if (dependents.empty()) return nullptr;
    auto plan = std::make_shared<BirdPlan>();
    // The weights' norms and sampling on `ctx.threads` workers, each taking the next weight as
    // it finishes one (a work queue: weights differ in size by 1000×, and fixed batches left a
    // worker idle behind each batch's largest). The queue holds the largest weights first, so
    // the last ones taken are small and the workers finish together (in frame order, a stack
    // of conv layers ends on its largest weights: on a VGG16 snapshot ×4, one worker then sat
    // idle for up to a 512×512×3×3 weight's time). Loads are serialised (format readers are not
    // thread-safe) and a worker holds one tensor at a time, so at most `threads` are loaded.
    // Each weight is sampled from its own generator and the results are kept by weight: the
    // same plan for any thread count and any queue order. Errors: once a weight has failed, the
    // workers skip the weights that come after it in the frame but still do those before it,
    // so the error thrown is that of the lowest-numbered failing weight, whatever the thread
    // count.
    std::vector<std::pair<size_t, const std::vector<uint32_t>*>> todo;
    std::vector<std::pair<uint64_t, size_t>> by_size;  // (elements, position in todo)
    for (const auto& [w, vectors] : dependents) {
      by_size.emplace_back(frame.info(w).elements(), todo.size());
      todo.emplace_back(w, &vectors);
    }
    std::stable_sort(by_size.begin(), by_size.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    {
      std::vector<std::pair<size_t, const std::vector<uint32_t>*>> queue;
      for (const auto& [elements, k] : by_size) queue.push_back(todo[k]);
      todo = std::move(queue);
    }
    const size_t workers = std::min(todo.size(), std::max<size_t>(1, ctx.threads));
    std::vector<BirdPlan::Weight> done(todo.size());
    std::vector<BirdSplit> splits(todo.size());
    std::vector<std::exception_ptr> errors(todo.size());
    std::mutex load_mu;
    size_t next = 0;
    size_t first_failed = SIZE_MAX;  // the lowest-numbered weight seen failing; guarded by load_mu
    auto work = [&] {
      // Norm and sampling buffers per worker, kept across its weights: fresh ones per tensor cost
      // page faults and zero-filling (a large share of the plan's time: docs/performance.md);
      // their contents are overwritten.
      std::vector<float> l1, linf;
      BirdScratch scratch;
      for (;;) {
        std::unique_lock<std::mutex> lk(load_mu);
        if (next >= todo.size()) return;
        const size_t j = next++;
        if (todo[j].first > first_failed) continue;
        try {
          const Tensor t = frame.load(todo[j].first);
          lk.unlock();
          const BirdSplit s = splits[j] = bird_split(t.shape());
          check_block(s, ErrorCode::Usage);
          StageContext c = ctx;
          c.tensor = static_cast<uint32_t>(todo[j].first);
          c.info = &t.info;
          done[j].elements = t.elements();
          const NormsSummary n = bird_norms(t, s.block, l1, linf);  // no copy of the tensor
          if (t.dtype() == DType::F32)
            done[j].nonfinite =
                screen_nonfinite(n, l1.size(), s.block, t.elements(), [&] { return count_nonfinite(t); });
          done[j].sel = bird_sample(l1, linf, n.l1_max, s.block, rule_, c, scratch);
          const uint64_t kept = done[j].sel.blocks.size() * s.block;
          if (t.dtype() == DType::F32 && done[j].nonfinite == 0 && kept <= t.elements() / 8) {
            done[j].values.resize(kept);
            kept_signs(t.data.data(), done[j].sel.blocks, s.block, done[j].sel.scale, done[j].values.data());
          }
        } catch (...) {
          if (!lk.owns_lock()) lk.lock();
          errors[j] = std::current_exception();
          first_failed = std::min(first_failed, todo[j].first);
        }
      }
    };
    if (ctx.workers) run_with_helpers(*ctx.workers, static_cast<unsigned>(workers), work);
    else work();
    for (size_t j = 0; j < todo.size(); ++j)
      if (todo[j].first == first_failed) std::rethrow_exception(errors[j]);
    for (size_t j = 0; j < todo.size(); ++j) {
      const auto& [w, vectors] = todo[j];
      std::vector<uint8_t> bitmap(bitmap_bytes(splits[j].channels), 0);
      // A block's channel is divided out only when the block lies outside the last one's
      // channel [lo, hi): V is ascending, so once per channel rather than once per kept block
      // (docs/performance.md, "Real gradients").
      uint64_t lo = 0, hi = 0;
      for (uint64_t b : done[j].sel.blocks) {
        if (b < lo || b >= hi) {
          const uint64_t o = splits[j].channel_of(b);
          lo = o * splits[j].per_channel, hi = lo + splits[j].per_channel;
          bitmap[o >> 3] |= static_cast<uint8_t>(0x80u >> (o & 7));
        }
      }
      for (uint32_t vec : *vectors) plan->bitmaps[vec] = bitmap;
      plan->weights[static_cast<uint32_t>(w)] = std::move(done[j]);
    }
    return plan;
  }

  void encode(Payload& p, Streams& out, const StageContext& ctx) override {
    const auto* plan = dynamic_cast<const BirdPlan*>(ctx.frame_plan);
    const BirdSplit s = bird_split(p.info->shape);
    if (s.vector) return encode_vector(p, out, ctx, plan);
    check_block(s, ErrorCode::Usage);
    const std::span<const float> v = p.f32_view();
    // The plan's selection was made on the input tensor: usable while no transform changed it.
    const BirdSelection* sel = nullptr;
    const std::vector<float>* planned = nullptr;  // the plan's values of the kept elements
    BirdSelection own;
    // Screened only while the values are the f32 input's own (no transform changed them).
    const bool f32 = p.exact && p.source && p.source->dtype() == DType::F32;
    if (plan && p.exact) {
      auto it = plan->weights.find(ctx.tensor);
      if (it != plan->weights.end() && it->second.elements == p.n) {
        sel = &it->second.sel;
        if (f32) p.nonfinite = it->second.nonfinite;
        if (!it->second.values.empty()) planned = &it->second.values;
      }
    }
    if (!sel) {  // bird_select, with the norms screened on the way
      std::vector<float> l1, linf;
      NormsSummary n;
      if (s.blocks > 0 && v.size() / s.block >= s.blocks) n = bird_norms(v.first(s.blocks * s.block), s.block, l1, linf);
      if (f32) p.nonfinite = screen_nonfinite(n, l1.size(), s.block, p.n, [&] { return count_nonfinite(*p.source); });
      own = bird_sample(l1, linf, n.l1_max, s.block, rule_, ctx);
      sel = &own;
    }
    if (p.nonfinite) return;  // the codec refuses the tensor or stores it raw
    const uint64_t m = s.block;
    std::vector<float> kept;
    if (planned) {
      kept = *planned;
    } else {
      kept.resize(sel->blocks.size() * m);
      kept_signs(reinterpret_cast<const uint8_t*>(v.data()), sel->blocks, m, sel->scale, kept.data());
    }
    p.values = std::move(kept);
    if (sel == &own) p.index = std::move(own.blocks);
    else p.index = sel->blocks;
    p.sparse = true;
    p.universe = s.blocks;
    p.block = static_cast<uint32_t>(m);
  }

  void prepare_decode(Payload& p, const Streams&, const StageContext&) override {
    const BirdSplit s = bird_split(p.info->shape);
    p.sparse = true;
    if (s.vector) {  // the side stream carries everything; no value, no index
      p.universe = p.n;
      p.block = 1;
      p.index.clear();
      p.index_implicit = true;
      return;
    }
    check_block(s, ErrorCode::Corrupt);
    p.universe = s.blocks;
    p.block = static_cast<uint32_t>(s.block);
  }

  void decode(Payload& p, const Streams& in, const StageContext&) override {
    if (bird_split(p.info->shape).vector) return decode_vector(p, in);
    scatter_to_dense(p);
  }

 private:
  void check_block(const BirdSplit& s, ErrorCode code) const {
    if (s.block > UINT32_MAX)
      fail(code, std::string(name_) + ": blocks of " + std::to_string(s.block) + " elements exceed 2^32 - 1");
  }

  void encode_vector(Payload& p, Streams& out, const StageContext& ctx, const BirdPlan* plan) const {
    const uint64_t n = p.n, nb = bitmap_bytes(n);
    if (p.source && p.source->dtype() == DType::F32 && (p.nonfinite = count_nonfinite(*p.source))) return;
    const std::span<const float> v = p.f32_view();  // an f32 source is read in place
    Stream& side = out.add(kSideStream, 1);
    const std::vector<uint8_t>* attached = nullptr;
    if (plan) {
      auto it = plan->bitmaps.find(ctx.tensor);
      if (it != plan->bitmaps.end() && it->second.size() == nb) attached = &it->second;
    }
    if (attached) {
      side.bytes = *attached;
    } else {  // dense: every bit set, padding 0
      side.bytes.assign(nb, 0xFF);
      if (n % 8) side.bytes.back() = static_cast<uint8_t>(0xFF00u >> (n % 8));
    }
    uint64_t sent = 0;
    for (uint64_t i = 0; i < nb; ++i) sent += static_cast<uint64_t>(std::popcount(side.bytes[i]));
    side.bytes.resize(nb + 4 * sent);  // one allocation of the exact size (no doubling growth)
    uint8_t* entry = side.bytes.data() + nb;
    for (uint64_t o = 0; o < n; ++o) {
      if (!((side.bytes[o >> 3] >> (7 - (o & 7))) & 1u)) continue;
      std::memcpy(entry, &v[o], 4);  // little-endian host
      entry += 4;
    }
    p.values.clear();
    p.index.clear();
    p.sparse = true;
    p.universe = n;
    p.block = 1;
    p.index_implicit = true;
  }

  void decode_vector(Payload& p, const Streams& in) const {
    const Stream* st = in.find(kSideStream);
    if (!st) fail(ErrorCode::Corrupt, std::string(name_) + ": missing stream 'side'");
    const std::span<const uint8_t> side = st->view();
    const uint64_t n = p.n, nb = bitmap_bytes(n);
    if (side.size() < nb)
      fail(ErrorCode::Corrupt, std::string(name_) + ": side stream of " + std::to_string(side.size()) +
                                   " bytes is shorter than the bitmap of " + std::to_string(n) + " entries");
    if (n % 8 && (side[nb - 1] & (0xFFu >> (n % 8))))
      fail(ErrorCode::Corrupt, std::string(name_) + ": side bitmap has padding bits set");
    uint64_t count = 0;
    for (uint64_t i = 0; i < nb; ++i) count += static_cast<uint64_t>(std::popcount(side[i]));
    if (side.size() - nb != 4 * count)
      fail(ErrorCode::Corrupt, std::string(name_) + ": side stream holds " + std::to_string(side.size() - nb) +
                                   " bytes of entries, the bitmap sends " + std::to_string(count) + " (" +
                                   std::to_string(4 * count) + " bytes)");
    std::vector<float> dense(n, 0.0f);  // n ≤ 8·side.size(): bounded by the stream
    const uint8_t* entry = side.data() + nb;
    for (uint64_t o = 0; o < n; ++o) {
      if (!((side[o >> 3] >> (7 - (o & 7))) & 1u)) continue;
      std::memcpy(&dense[o], entry, 4);
      entry += 4;
    }
    p.values = std::move(dense);
    p.sparse = false;
  }

  BirdRule rule_;
  bool attach_;
  const char* name_;
};

bool attach_of(const Params& p) { return p.text("vectors") == "attach"; }

}  // namespace

std::unique_ptr<Stage> make_bird(const Params& p, uint32_t) {
  return std::make_unique<Bird>(BirdRule{}, attach_of(p), "bird");
}

std::unique_ptr<Stage> make_bird_plus(const Params& p, uint32_t) {
  const bool g = p.has("gamma"), k = p.has("keep");
  if (g && k) fail(ErrorCode::Usage, "bird+: give gamma or keep, not both");
  if (!g && !k)
    fail(ErrorCode::Usage,
         "bird+: give one of gamma (exponent on the L-inf probability, e.g. gamma=1.4) or keep (target kept "
         "fraction, e.g. keep=1%)");
  BirdRule rule;
  rule.plus = true;
  if (g) rule.gamma = p.num("gamma");
  else rule.keep = p.num("keep");
  return std::make_unique<Bird>(rule, attach_of(p), "bird+");
}

}  // namespace gradcodec::stages
