// SPDX-License-Identifier: BSD-3-Clause
#include "sparsify/randk.hpp"

#include "sparsify/topk.hpp"

#include <gradcodec/detail/pages.hpp>


#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <unordered_set>

namespace gradcodec::stages {

std::vector<uint64_t> random_positions(uint64_t u, uint64_t k, Rng& rng) {
  k = std::min(k, u);
  std::vector<uint64_t> out;
  if (k == 0) return out;
  out.reserve(k);
  if (k == u) {  // the only k-subset; no draws needed
    out.resize(u);
    std::iota(out.begin(), out.end(), uint64_t{0});
    return out;
  }
  if (k < u / 16) {
    std::unordered_set<uint64_t> seen;
    seen.reserve(2 * k);
    for (uint64_t j = u - k; j < u; ++j) {
      const uint64_t t = rng.below(j + 1);
      const uint64_t pick = seen.count(t) ? j : t;
      seen.insert(pick);
      out.push_back(pick);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  std::vector<uint64_t> bits((u + 63) / 64, 0);
  auto test = [&](uint64_t x) { return (bits[x >> 6] >> (x & 63)) & 1u; };
  for (uint64_t j = u - k; j < u; ++j) {
    const uint64_t t = rng.below(j + 1);
    const uint64_t pick = test(t) ? j : t;
    bits[pick >> 6] |= uint64_t{1} << (pick & 63);
  }
  for (uint64_t w = 0; w < bits.size(); ++w)
    for (uint64_t b = bits[w]; b; b &= b - 1) out.push_back(w * 64 + static_cast<uint64_t>(__builtin_ctzll(b)));
  return out;
}

namespace {

class Randk final : public Reducer {
 public:
  Randk(KeepCount count, bool shared, bool unbiased, uint32_t block)
      : count_(count), shared_(shared), unbiased_(unbiased), block_(block) {}
  StageKind kind() const noexcept override { return StageKind::Sparsifier; }
  bool stochastic() const noexcept override { return true; }
  bool needs_index_coder() const noexcept override { return !shared_; }
  bool values_exact() const noexcept override { return !unbiased_ && block_ == 1; }
  double kept_fraction(const TensorInfo& t) const noexcept override {
    const uint64_t d = t.elements();
    return d == 0 ? 1.0 : std::min(1.0, static_cast<double>(count_.of(universe(d))) * block_ / static_cast<double>(d));
  }
  // The dense f32 copy, the drawing of the positions, the kept positions and values
  // (randk(ratio=0.01) on a 4096x4096 f32 tensor: 4.5 B/element).
  double work_per_element(const TensorInfo&, double kept) const noexcept override { return 6 + 12 * kept; }

  void encode(Payload& p, Streams&, const StageContext& ctx) override {
    const std::vector<float>& v = p.dense_f32();
    const uint64_t u = universe(p.n), k = count_.of(u);
    Rng rng = ctx.rng(RngPurpose::Select);
    std::vector<uint64_t> idx = random_positions(u, k, rng);
    // U/k in f32 arithmetic on both the value and the factor: decoded = fl(g·fl(U/k)).
    const float scale = unbiased_ && k > 0 ? static_cast<float>(static_cast<double>(u) / static_cast<double>(k)) : 1.0f;
    std::vector<float> kept(idx.size() * block_, 0.0f);
    bool overflow = false;  // a finite value scaled by U/k beyond float32's range
    for (size_t j = 0; j < idx.size(); ++j) {
      const uint64_t first = idx[j] * block_, len = std::min<uint64_t>(block_, p.n - first);
      for (uint64_t e = 0; e < len; ++e) {
        const float x = v[first + e], y = unbiased_ ? x * scale : x;
        overflow |= std::isinf(y) && std::isfinite(x);
        kept[j * block_ + e] = y;
      }
    }
    if (overflow) {
      p.overflow = "randk: a kept value scaled by U/k (unbiased=true) is beyond float32's range (3.4e38)";
      return;
    }
    p.values = std::move(kept);
    p.index = std::move(idx);
    p.sparse = true;
    p.universe = u;
    p.block = block_;
    p.index_implicit = shared_;
  }

  void prepare_decode(Payload& p, const Streams& in, const StageContext& ctx) override {
    p.sparse = true;
    p.universe = universe(p.n);
    p.block = block_;
    p.index_implicit = shared_;
    if (!shared_) return;
    // Every value codec spends at least one bit per coded value, so streams smaller than
    // k·block bits cannot be this record's: refuse them before drawing and holding k positions
    // (a corrupt shape would otherwise cost O(k) work and memory for nothing).
    const uint64_t k = count_.of(p.universe), values = k * block_;  // ≤ n + block − 1
    if (in.total_bytes() < values / 8 + (values % 8 != 0))
      fail(ErrorCode::Corrupt, "randk: streams of " + std::to_string(in.total_bytes()) + " bytes cannot hold " +
                                   std::to_string(values) + " values");
    Rng rng = ctx.rng(RngPurpose::Select);
    p.index = random_positions(p.universe, k, rng);
  }

  void decode(Payload& p, const Streams&, const StageContext&) override {
    if (block_ == 1 || p.n % block_ == 0) return scatter_to_dense(p);
    // A partial last block: scatter_to_dense wants whole blocks, so scatter here, dropping the
    // padding of the last block. Values are f32 whenever block > 1 (values_exact() is false).
    if (!p.exact_bytes.empty()) fail(ErrorCode::Internal, "randk: exact bytes with block > 1");
    if (p.values.size() != p.index.size() * block_) fail(ErrorCode::Corrupt, "randk: value count does not match the index");
    auto dense = zeroed_fresh<float>(p.n);
    for (size_t j = 0; j < p.index.size(); ++j) {
      const uint64_t pos = p.index[j];
      if (pos >= p.universe) fail(ErrorCode::Corrupt, "randk: block " + std::to_string(pos) + " outside the tensor");
      if (j > 0 && pos <= p.index[j - 1]) fail(ErrorCode::Corrupt, "randk: blocks not ascending");
      const uint64_t first = pos * block_, len = std::min<uint64_t>(block_, p.n - first);
      std::memcpy(dense.data() + first, p.values.data() + j * block_, len * 4);
    }
    p.values = std::move(dense);
    p.sparse = false;
  }

 private:
  uint64_t universe(uint64_t n) const noexcept { return n == 0 ? 0 : (n - 1) / block_ + 1; }
  KeepCount count_;
  bool shared_, unbiased_;
  uint32_t block_;
};

}  // namespace

std::unique_ptr<Stage> make_randk(const Params& p, uint32_t) {
  return std::make_unique<Randk>(KeepCount::from(p, "randk"), p.flag("shared_seed"), p.flag("unbiased"),
                                 static_cast<uint32_t>(p.integer("block")));
}

}  // namespace gradcodec::stages
