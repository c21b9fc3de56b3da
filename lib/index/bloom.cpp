// SPDX-License-Identifier: BSD-3-Clause
#include "index/bloom.hpp"

#include "index/gaps.hpp"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <iterator>
#include <numeric>
#include <optional>

namespace gradcodec::stages {

namespace bloom {

namespace {
constexpr const char* kName = "bloom";
constexpr double kLn2 = 0.69314718055994530942;
}  // namespace

Policy policy_from_name(const std::string& name) {
  if (name == "leftmost") return Policy::Leftmost;
  if (name == "random") return Policy::Random;
  if (name == "conflict") return Policy::Conflict;
  fail(ErrorCode::Usage, "bloom: unknown policy '" + name + "' (leftmost, random, conflict)");
}

uint64_t filter_bits(uint64_t r, double fpr) noexcept {
  if (r == 0) return 0;
  const double m = std::ceil(-static_cast<double>(r) * std::log(fpr) / (kLn2 * kLn2));
  return m < 1 ? 1 : static_cast<uint64_t>(m);
}

unsigned hash_count(double fpr) noexcept {
  const double k = std::round(-std::log(fpr) / kLn2);
  return k < 1 ? 1u : k > 64 ? 64u : static_cast<unsigned>(k);
}

// ------------------------------------------------------------------ Filter

Filter::Filter(uint64_t m, unsigned k, uint32_t seed) : m_(m), k_(k), seed_(seed), bits_((m + 7) / 8, 0) {}

Filter::Filter(uint64_t m, unsigned k, uint32_t seed, std::span<const uint8_t> bits)
    : m_(m), k_(k), seed_(seed), bits_(bits.begin(), bits.end()) {
  if (bits_.size() != (m + 7) / 8) fail(ErrorCode::Internal, "bloom: filter bytes do not match m");
}

// First probe a = h1 mod m and stride b = 1 + h2 mod (m − 1) (never 0, so k probes differ when m > k).
void Filter::probes(uint64_t x, uint64_t& a, uint64_t& b) const noexcept {
  uint8_t le[8];
  std::memcpy(le, &x, 8);  // the library builds on little-endian hosts only
  const XXH128_hash_t h = XXH3_128bits_withSeed(le, 8, seed_);
  a = h.low64 % m_;
  b = m_ > 1 ? 1 + h.high64 % (m_ - 1) : 0;
}

void Filter::insert(uint64_t x) noexcept {
  uint64_t a, b;
  probes(x, a, b);
  for (unsigned i = 0; i < k_; ++i) {
    bits_[a >> 3] |= static_cast<uint8_t>(0x80u >> (a & 7));
    a += b;
    if (a >= m_) a -= m_;
  }
}

bool Filter::contains(uint64_t x) const noexcept {
  if (m_ == 0) return false;
  uint64_t a, b;
  probes(x, a, b);
  for (unsigned i = 0; i < k_; ++i) {
    if (!(bits_[a >> 3] & (0x80u >> (a & 7)))) return false;
    a += b;
    if (a >= m_) a -= m_;
  }
  return true;
}

unsigned Filter::locations(uint64_t x, std::vector<uint64_t>& out) const {
  if (m_ == 0) return 0;
  uint64_t a, b;
  probes(x, a, b);
  const size_t first = out.size();
  for (unsigned i = 0; i < k_; ++i) {
    if (std::find(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(), a) == out.end()) out.push_back(a);
    a += b;
    if (a >= m_) a -= m_;
  }
  return static_cast<unsigned>(out.size() - first);
}

std::vector<uint64_t> positives(const Filter& f, uint64_t universe) {
  std::vector<uint64_t> P;
  if (f.m() == 0) return P;
  for (uint64_t x = 0; x < universe; ++x)
    if (f.contains(x)) P.push_back(x);
  return P;
}

// ------------------------------------------------------------------ policies

std::vector<uint64_t> pick_leftmost(std::span<const uint64_t> P, uint64_t r) {
  r = std::min<uint64_t>(r, P.size());
  return std::vector<uint64_t>(P.begin(), P.begin() + static_cast<std::ptrdiff_t>(r));
}

namespace {
// Picks `need` of the elements `pool` uniformly without replacement (partial Fisher–Yates).
void draw_from(std::vector<uint64_t>& pool, uint64_t need, Rng& rng, std::vector<uint64_t>& out) {
  need = std::min<uint64_t>(need, pool.size());
  for (uint64_t i = 0; i < need; ++i) {
    const uint64_t j = i + rng.below(pool.size() - i);
    std::swap(pool[i], pool[j]);
    out.push_back(pool[i]);
  }
}
}  // namespace

std::vector<uint64_t> pick_random(std::span<const uint64_t> P, uint64_t r, uint32_t seed) {
  std::vector<uint64_t> pool(P.begin(), P.end()), out;
  Rng rng(Rng::mix(seed));
  draw_from(pool, r, rng, out);
  std::sort(out.begin(), out.end());
  return out;
}

namespace {
// The conflict-set policy over elements 0..|P|−1 whose distinct set ids (< nsets) sets_of(e, buf)
// writes into buf. Memory: the members of every set (Σ set sizes ≤ k·|P| words) and a few words
// per set; the sets of a picked element are asked for again rather than stored.
// `explained0` (nsets flags, or null) marks sets known to hold a picked true positive already.
template <class SetsOf>
std::vector<uint64_t> conflict_core(std::span<const uint64_t> P, uint64_t nsets, uint64_t r, uint32_t seed,
                                    SetsOf&& sets_of, const std::vector<uint8_t>* explained0 = nullptr) {
  const uint64_t p = P.size();
  r = std::min(r, p);
  std::vector<uint64_t> start(nsets + 1, 0), buf;
  for (uint64_t e = 0; e < p; ++e) {
    buf.clear();
    sets_of(e, buf);
    for (uint64_t j : buf) {
      if (j >= nsets) fail(ErrorCode::Internal, "bloom: conflict set id out of range");
      ++start[j + 1];
    }
  }
  std::partial_sum(start.begin(), start.end(), start.begin());  // set j: members[start[j], start[j+1])
  std::vector<uint64_t> members(start[nsets]);
  {
    std::vector<uint64_t> fill(start.begin(), start.end() - 1);
    for (uint64_t e = 0; e < p; ++e) {
      buf.clear();
      sets_of(e, buf);
      for (uint64_t j : buf) members[fill[j]++] = e;
    }
  }
  // Non-empty sets by increasing size, ties in a seeded random order.
  const Rng ties(Rng::mix(uint64_t{seed} ^ 0x5bd1e9955bd1e995ULL));
  struct Key {
    uint64_t size, tie, set;
  };
  std::vector<Key> order;
  for (uint64_t j = 0; j < nsets; ++j)
    if (start[j + 1] > start[j]) order.push_back({start[j + 1] - start[j], ties.at(j), j});
  std::sort(order.begin(), order.end(), [](const Key& a, const Key& b) {
    return a.size != b.size ? a.size < b.size : a.tie != b.tie ? a.tie < b.tie : a.set < b.set;
  });
  Rng rng(Rng::mix(seed));
  std::vector<uint8_t> picked(p, 0), explained = explained0 ? *explained0 : std::vector<uint8_t>(nsets, 0);
  if (explained.size() != nsets) fail(ErrorCode::Internal, "bloom: explained flags do not match the sets");
  std::vector<uint64_t> out;
  out.reserve(r);
  for (const Key& k : order) {
    if (out.size() == r) break;
    if (explained[k.set]) continue;
    // An unexplained set has no picked element: any member, drawn uniformly, is a new pick.
    const uint64_t e = members[start[k.set] + rng.below(k.size)];
    picked[e] = 1;
    out.push_back(P[e]);
    buf.clear();
    sets_of(e, buf);
    for (uint64_t j : buf) explained[j] = 1;
  }
  if (out.size() < r) {
    std::vector<uint64_t> rest;
    rest.reserve(p - out.size());
    for (uint64_t e = 0; e < p; ++e)
      if (!picked[e]) rest.push_back(P[e]);
    draw_from(rest, r - out.size(), rng, out);
  }
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

std::vector<uint64_t> pick_conflict_sets(std::span<const uint64_t> P, std::span<const uint64_t> offsets,
                                         std::span<const uint64_t> sets, uint64_t nsets, uint64_t r, uint32_t seed) {
  if (offsets.size() != P.size() + 1 || offsets[P.size()] != sets.size())
    fail(ErrorCode::Internal, "bloom: conflict-set lists do not match the positives");
  return conflict_core(P, nsets, r, seed, [&](uint64_t e, std::vector<uint64_t>& buf) {
    buf.insert(buf.end(), sets.begin() + static_cast<std::ptrdiff_t>(offsets[e]),
               sets.begin() + static_cast<std::ptrdiff_t>(offsets[e + 1]));
  });
}

std::vector<uint64_t> pick_conflict(const Filter& f, std::span<const uint64_t> P, uint64_t r, uint32_t seed) {
  return conflict_core(P, f.m(), r, seed,
                       [&](uint64_t e, std::vector<uint64_t>& buf) { f.locations(P[e], buf); });
}

std::vector<uint64_t> pick(Policy policy, const Filter& f, std::span<const uint64_t> P, uint64_t r, uint32_t seed) {
  switch (policy) {
    case Policy::Leftmost: return pick_leftmost(P, r);
    case Policy::Random: return pick_random(P, r, seed);
    case Policy::Conflict: return pick_conflict(f, P, r, seed);
  }
  fail(ErrorCode::Internal, "bloom: unknown policy");
}

void split_by_second(const Filter& f2, std::span<const uint64_t> P, std::vector<uint64_t>& certain,
                     std::vector<uint64_t>& P2) {
  certain.clear();
  P2.clear();
  for (uint64_t x : P) (f2.contains(x) ? P2 : certain).push_back(x);
}

std::vector<uint64_t> pick_pruned(Policy policy, const Filter& f, std::span<const uint64_t> certain,
                                  std::span<const uint64_t> P2, uint64_t r, uint32_t seed) {
  const uint64_t rest = r > certain.size() ? r - certain.size() : 0;
  std::vector<uint64_t> more;
  if (policy == Policy::Conflict) {
    std::vector<uint8_t> explained(f.m(), 0);
    std::vector<uint64_t> buf;
    for (uint64_t x : certain) {
      buf.clear();
      f.locations(x, buf);
      for (uint64_t j : buf) explained[j] = 1;
    }
    more = conflict_core(P2, f.m(), rest, seed,
                         [&](uint64_t e, std::vector<uint64_t>& b) { f.locations(P2[e], b); }, &explained);
  } else {
    more = pick(policy, f, P2, rest, seed);
  }
  std::vector<uint64_t> out(certain.size() + more.size());
  std::merge(certain.begin(), certain.end(), more.begin(), more.end(), out.begin());
  return out;
}

uint64_t false_picks(std::span<const uint64_t> kept, std::span<const uint64_t> picked) noexcept {
  uint64_t fp = 0;
  size_t i = 0;
  for (uint64_t x : picked) {
    while (i < kept.size() && kept[i] < x) ++i;
    if (i == kept.size() || kept[i] != x) ++fp;
  }
  return fp;
}

std::vector<float> values_at_picks(std::span<const uint64_t> kept, std::span<const float> values,
                                   std::span<const uint64_t> picked, std::span<const float> dense, uint32_t block) {
  if (values.size() != kept.size() * block) fail(ErrorCode::Internal, "bloom: value count does not match the index");
  std::vector<float> out(picked.size() * block, 0.0f);
  size_t i = 0;
  for (size_t j = 0; j < picked.size(); ++j) {
    const uint64_t x = picked[j];
    while (i < kept.size() && kept[i] < x) ++i;
    float* dst = out.data() + j * block;
    if (i < kept.size() && kept[i] == x) {
      std::memcpy(dst, values.data() + i * block, block * sizeof(float));
    } else {
      const uint64_t first = x * block;
      if (first >= dense.size()) fail(ErrorCode::Internal, "bloom: picked position outside the tensor");
      const uint64_t len = std::min<uint64_t>(block, dense.size() - first);
      std::memcpy(dst, dense.data() + first, len * sizeof(float));
    }
  }
  return out;
}

// ------------------------------------------------------------------ stream

uint64_t stream_bits(uint64_t r, uint64_t m, uint64_t fp) noexcept {
  return 8 * (idx::leb128_size(r) + idx::leb128_size(m) + 1 + 4 + idx::leb128_size(fp) + (m + 7) / 8);
}

uint64_t second_bits(uint64_t n2, uint64_t m2) noexcept {
  return 8 * (idx::leb128_size(n2) + idx::leb128_size(m2) + (m2 + 7) / 8);
}

uint32_t policy_seed(uint32_t seed) noexcept {
  return static_cast<uint32_t>(Rng::mix(uint64_t{seed} ^ 0x9e3779b97f4a7c15ULL));
}

uint32_t second_seed(uint32_t seed) noexcept {
  return static_cast<uint32_t>(Rng::mix(uint64_t{seed} ^ 0x6a09e667f3bcc908ULL));
}

Coded encode_positions(std::span<const uint64_t> kept, uint64_t universe, const Config& cfg, uint32_t seed) {
  const uint64_t r = kept.size();
  const uint64_t m = filter_bits(r, cfg.fpr);
  const unsigned k = hash_count(cfg.fpr);
  Filter f(m, k, seed);
  for (uint64_t x : kept) f.insert(x);
  Coded c;
  const std::vector<uint64_t> P = positives(f, universe);
  std::vector<uint64_t> fps;  // second: P − S, ascending
  std::optional<Filter> f2;
  if (cfg.second) {
    if (P.size() < r) fail(ErrorCode::Internal, "bloom: the filter lost a kept position");
    fps.reserve(P.size() - r);
    std::set_difference(P.begin(), P.end(), kept.begin(), kept.end(), std::back_inserter(fps));
    c.n2 = fps.size();
    c.m2 = filter_bits(c.n2, cfg.fpr);
    f2.emplace(c.m2, k, second_seed(seed));
    for (uint64_t x : fps) f2->insert(x);
    std::vector<uint64_t> certain, P2;
    split_by_second(*f2, P, certain, P2);
    c.picked = pick_pruned(cfg.policy, f, certain, P2, r, policy_seed(seed));
  } else {
    c.picked = pick(cfg.policy, f, P, r, policy_seed(seed));
  }
  if (c.picked.size() != r) fail(ErrorCode::Internal, "bloom: the filter lost a kept position");
  c.false_picks = false_picks(kept, c.picked);
  std::vector<uint8_t>& s = c.stream;
  s.reserve((stream_bits(r, m, c.false_picks) + (cfg.second ? second_bits(c.n2, c.m2) : 0)) / 8);
  idx::put_leb128(s, r);
  idx::put_leb128(s, m);
  ByteWriter w(s);
  w.u8(static_cast<uint8_t>(k));
  w.u32(seed);
  idx::put_leb128(s, c.false_picks);
  s.insert(s.end(), f.bytes().begin(), f.bytes().end());
  if (cfg.second) {
    idx::put_leb128(s, c.n2);
    idx::put_leb128(s, c.m2);
    s.insert(s.end(), f2->bytes().begin(), f2->bytes().end());
  }
  return c;
}

namespace {
// Refuses a filter of m bits whose padding bits are set or with more than n·k bits set (n
// insertions of k probes set at most n·k; this also bounds what decoding can be made to do).
void check_filter(std::span<const uint8_t> filter, uint64_t m, uint64_t n, unsigned k, const char* which) {
  if (m % 8 && (filter.back() & (0xffu >> (m % 8))))
    idx::corrupt(kName, std::string("nonzero padding bits after the ") + which);
  uint64_t ones = 0;
  for (uint8_t b : filter) ones += static_cast<uint64_t>(std::popcount(b));
  if ((ones + k - 1) / k > n)  // ones > n·k, without overflow
    idx::corrupt(kName, std::to_string(ones) + " " + which + " bits set, more than " + (which[0] == 'f' ? "r" : "n2") +
                            "·k = " + std::to_string(n * k));
}
}  // namespace

Header read_header(std::span<const uint8_t> s, uint64_t universe, bool second) {
  Header h;
  size_t pos = 0;
  h.r = idx::get_leb128(s, pos, kName);
  h.m = idx::get_leb128(s, pos, kName);
  if (s.size() - pos < 5) idx::corrupt(kName, "stream ends inside the header");
  h.k = s[pos];
  std::memcpy(&h.seed, s.data() + pos + 1, 4);
  pos += 5;
  h.false_picks = idx::get_leb128(s, pos, kName);
  if (h.k < 1 || h.k > 64) idx::corrupt(kName, "hash count " + std::to_string(h.k) + " is outside [1, 64]");
  if (h.r > universe)
    idx::corrupt(kName, "count " + std::to_string(h.r) + " exceeds the universe of " + std::to_string(universe) +
                            " positions");
  if ((h.r == 0) != (h.m == 0))
    idx::corrupt(kName, "filter of " + std::to_string(h.m) + " bits for " + std::to_string(h.r) + " positions");
  if (h.false_picks > h.r)
    idx::corrupt(kName, std::to_string(h.false_picks) + " false picks of " + std::to_string(h.r) + " picks");
  const uint64_t left = s.size() - pos, bytes = h.m / 8 + (h.m % 8 != 0);
  if (second ? left < bytes : bytes != left)
    idx::corrupt(kName, "stream holds " + std::to_string(left) + " bytes of filter" +
                            (second ? " and second filter" : "") + ", expected " + (second ? "at least " : "") + std::to_string(bytes) +
                            " for m = " + std::to_string(h.m));
  h.filter = s.subspan(pos, bytes);
  check_filter(h.filter, h.m, h.r, h.k, "filter");
  if (!second) return h;
  pos += bytes;
  h.n2 = idx::get_leb128(s, pos, kName);
  h.m2 = idx::get_leb128(s, pos, kName);
  if (h.n2 > universe - h.r)
    idx::corrupt(kName, "second filter of " + std::to_string(h.n2) + " false positives, more than the " +
                            std::to_string(universe - h.r) + " positions outside the kept set");
  if (h.r == 0 && h.n2 != 0)  // an empty first filter answers nothing
    idx::corrupt(kName, "second filter of " + std::to_string(h.n2) + " false positives after an empty filter");
  if ((h.n2 == 0) != (h.m2 == 0))
    idx::corrupt(kName, "second filter of " + std::to_string(h.m2) + " bits for " + std::to_string(h.n2) +
                            " false positives");
  const uint64_t left2 = s.size() - pos, bytes2 = h.m2 / 8 + (h.m2 % 8 != 0);
  if (bytes2 != left2)
    idx::corrupt(kName, "stream holds " + std::to_string(left2) + " bytes of second filter, expected " +
                            std::to_string(bytes2) + " for m2 = " + std::to_string(h.m2));
  h.filter2 = s.subspan(pos);
  check_filter(h.filter2, h.m2, h.n2, h.k, "second filter");
  return h;
}

void check_sizing(const Header& h, double fpr) {
  // k = max(1, round(x)) and m = ⌈r·x/ln 2⌉ with x = −ln ε/ln 2, allowing for the last bit of
  // another machine's logarithm at a rounding boundary. Bounds what a hostile stream can make the
  // decoder do: at most about 70% of the bits may be set (popcount ≤ r·k ≈ m·ln 2).
  const double x = -std::log(fpr) / kLn2;
  const bool k_ok = x < 0.5 ? h.k == 1 : std::fabs(double(h.k) - x) <= 0.5 + 1e-9;
  if (!k_ok)
    idx::corrupt(kName, std::to_string(h.k) + " hash functions do not match fpr " + std::to_string(fpr));
  const double m = static_cast<double>(h.r) * x / kLn2;
  if (h.r > 0 && (static_cast<double>(h.m) < m * (1 - 1e-9) - 1 || static_cast<double>(h.m) > m * (1 + 1e-9) + 2))
    idx::corrupt(kName, "a filter of " + std::to_string(h.m) + " bits does not match " + std::to_string(h.r) +
                            " positions at fpr " + std::to_string(fpr));
  const double m2 = static_cast<double>(h.n2) * x / kLn2;  // the second filter: same ε
  if (h.n2 > 0 &&
      (static_cast<double>(h.m2) < m2 * (1 - 1e-9) - 1 || static_cast<double>(h.m2) > m2 * (1 + 1e-9) + 2))
    idx::corrupt(kName, "a second filter of " + std::to_string(h.m2) + " bits does not match " +
                            std::to_string(h.n2) + " false positives at fpr " + std::to_string(fpr));
}

std::vector<uint64_t> decode_positions(std::span<const uint8_t> s, uint64_t universe, const Config& cfg) {
  const Header h = read_header(s, universe, cfg.second);
  check_sizing(h, cfg.fpr);
  const Policy policy = cfg.policy;
  if (h.r == 0) return {};
  const Filter f(h.m, h.k, h.seed, h.filter);
  const std::vector<uint64_t> P = positives(f, universe);
  if (P.size() < h.r)
    idx::corrupt(kName, "the filter answers " + std::to_string(P.size()) + " positions, fewer than its count " +
                            std::to_string(h.r));
  if (!cfg.second) return pick(policy, f, P, h.r, policy_seed(h.seed));
  if (h.n2 != P.size() - h.r)
    idx::corrupt(kName, "second filter of " + std::to_string(h.n2) + " false positives, but the filter answers " +
                            std::to_string(P.size() - h.r) + " positions beyond its count");
  std::vector<uint64_t> certain, P2;
  if (h.n2 == 0) {
    certain = P;  // no false positive: P = S
  } else {
    const Filter f2(h.m2, h.k, second_seed(h.seed), h.filter2);
    split_by_second(f2, P, certain, P2);
  }
  if (certain.size() > h.r)
    idx::corrupt(kName, "the second filter clears " + std::to_string(certain.size()) +
                            " positions as true positives, more than the count " + std::to_string(h.r));
  return pick_pruned(policy, f, certain, P2, h.r, policy_seed(h.seed));
}

}  // namespace bloom

namespace {

constexpr const char* kName = "bloom";

// The encoder's record between select() and encode() in fp_aware mode (per tensor).
struct Pending final : StageState {
  std::vector<uint8_t> stream;
  std::vector<uint64_t> picked;
};

class Bloom final : public IndexCoder {
 public:
  Bloom(bloom::Config cfg, bool fp_aware) : cfg_(cfg), fp_aware_(fp_aware) {}

  bool stochastic() const noexcept override { return true; }  // the hash and policy seeds
  bool selects() const noexcept override { return fp_aware_; }
  // The decoder's query of every position of the universe (fp_aware runs it at encode), and the
  // filter (deepreduce-bloom on a 4096x4096 f32 tensor: 8.1 B/element with topk's dense copy).
  // second=true adds the split of P (certain and P2, and P − S at encode): 16 bytes per positive.
  double work_per_element(const TensorInfo&, double kept) const noexcept override {
    return 6 + 10 * kept + (cfg_.second ? 16 * (kept + cfg_.fpr) : 0);
  }
  bool has_stats() const noexcept override { return true; }

  void select(Payload& p, std::span<const float> dense, const StageContext& ctx) override {
    if (!fp_aware_) return;
    idx::check_positions(p, kName, false);
    bloom::Coded c = code(p, ctx);
    p.values = bloom::values_at_picks(p.index, p.values, c.picked, dense, p.block);
    p.index = c.picked;
    auto& pending = ctx.state_as<Pending>();
    pending.stream = std::move(c.stream);
    pending.picked = std::move(c.picked);
  }

  void encode(const Payload& p, Streams& out, const StageContext& ctx) override {
    idx::check_positions(p, kName, false);
    if (!fp_aware_) {
      out.add(kIndexStream).bytes = code(p, ctx).stream;
      return;
    }
    if (!ctx.state || !*ctx.state) fail(ErrorCode::Internal, "bloom(fp_aware=true): encode() without select()");
    auto& pending = ctx.state_as<Pending>();
    // A value codec that dropped positions after the pick (sbc keeps one side, sent as one mean)
    // gets its remaining positions coded as without fp_aware: its values are all equal, so the
    // in-order assignment cannot misplace one.
    out.add(kIndexStream).bytes = pending.picked == p.index ? std::move(pending.stream) : code(p, ctx).stream;
    ctx.state->reset();
  }

  void decode(Payload& p, const Streams& in, const StageContext&) override {
    p.index = bloom::decode_positions(in.get(kIndexStream), p.universe, cfg_);
    p.value_order = false;
  }

  void stream_stats(const Streams& in, StageStats& out) const override {
    const Stream* s = in.find(kIndexStream);
    if (!s) return;
    const bloom::Header h = bloom::read_header(s->view(), UINT64_MAX, cfg_.second);
    out.push_back({"bloom.policy_errors_rate", static_cast<double>(h.false_picks), static_cast<double>(h.r), false,
                   "false positives the decoder's policy picks / positions picked (Kostopoulou 2020 §3.5)"});
    out.push_back({"bloom.filter_bits_per_kept", static_cast<double>(h.m), static_cast<double>(h.r), false,
                   "filter bits m / kept positions r (-ln(fpr)/(ln 2)^2 = 9.59 at fpr = 0.01)"});
    if (cfg_.second)
      out.push_back({"bloom.second_filter_bits_per_kept", static_cast<double>(h.m2), static_cast<double>(h.r), false,
                     "second filter bits m2 / kept positions r: m2 = ceil(-|P - S| ln(fpr)/(ln 2)^2) (Kostopoulou 2020 "
                     "§3.6)"});
  }

 private:
  bloom::Coded code(const Payload& p, const StageContext& ctx) const {
    const auto seed = static_cast<uint32_t>(ctx.rng(RngPurpose::Hash).next_u64());
    return bloom::encode_positions(p.index, p.universe, cfg_, seed);
  }

  bloom::Config cfg_;
  bool fp_aware_;
};

}  // namespace

std::unique_ptr<Stage> make_bloom(const Params& p, uint32_t) {
  bloom::Config cfg;
  cfg.fpr = p.num("fpr");
  cfg.policy = bloom::policy_from_name(p.text("policy"));
  cfg.second = p.flag("second");
  return std::make_unique<Bloom>(cfg, p.flag("fp_aware"));
}

}  // namespace gradcodec::stages
