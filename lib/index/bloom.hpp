// SPDX-License-Identifier: BSD-3-Clause
// bloom(fpr, policy, fp_aware, second) — DeepReduce's Bloom-filter index coder (Kostopoulou's thesis,
// Kostopoulou 2020 §3; docs/stages.md "bloom").
//
// Encoder: the r kept positions S go into a Bloom filter of
//   m = ⌈−r ln ε / (ln 2)²⌉ bits and k = max(1, round(−ln ε / ln 2)) hash functions
// (§3.2), probed by double hashing of the position: with (h1, h2) the two halves of
// XXH3-128(position as u64 little-endian, seed), probe i is (h1 mod m + i·b) mod m where
// b = 1 + h2 mod (m − 1) (b = 0 when m = 1).
// Decoder: queries every position of [0, d) in order → P (P ⊇ S), then a policy picks r of P
// (§3.4): leftmost = the first r; random = r uniformly (seeded); conflict = the conflict-set
// heuristic of §3.4.3 (below). The values travel in ascending position order and are assigned to
// the picked positions in ascending order (Algorithm 4), so a false positive picked before a
// true one shifts the values after it.
// fp_aware (§3.7): the encoder runs the decoder's pick itself and sends the values at the picked
// positions instead (IndexCoder::select, before the value codec), so every picked position
// carries its own value; false positives then replace some top-k choices.
// second (§3.6): the encoder also codes the false positives P − S in a second filter (same ε, so
// the same k; seed second_seed(seed)). The decoder splits P: a position the second filter answers
// "no" to is certainly not in P − S, so it is a true positive and picked outright; the rest, P₂
// (all of P − S and the true positives that are false positives of the second filter), go to the
// policy, which picks the r − |certain| others from P₂. The conflict policy counts every set a
// certain pick probes as explained.
//
// Conflict sets (§3.4.3): C_j = the elements of P with a probe at bit j; every set holds at least
// one true positive. Sets are visited by increasing size (ties in a seeded random order); a set
// none of whose elements was picked yet ("unexplained") gives one of its elements, uniformly at
// random (a singleton gives a certain true positive); picking an element explains every set it
// belongs to. A set's size never changes while it is unexplained, so one sorted pass does it.
// When no unexplained set remains, the rest of the r picks are uniform among the unpicked of P.
//
// Seed: one u32 drawn from the container seed (RngPurpose::Hash) and stored in the stream; it
// seeds XXH3 and, through policy_seed(), the random and conflict policies. Decoding needs nothing
// but the stream, d and the stage's parameters, and is deterministic.
//
// Wire, version 1 (stream `index`):
//   LEB128 r                kept positions (count of picks)
//   LEB128 m                filter bits (0 iff r = 0)
//   u8     k                hash functions, 1..64
//   u32    seed             little-endian: the XXH3 seed; the policies use policy_seed(seed)
//   LEB128 false picks      false positives the decoder's policy picks (informative: the policy
//                           errors rate's numerator; ≤ r)
//   ⌈m/8⌉ bytes             the filter: bit j is bit 7 − (j mod 8) of byte ⌊j/8⌋; padding 0
// Size: 8·(|r| + |m| + 1 + 4 + |false picks| + ⌈m/8⌉) bits, |v| the LEB128 length of v.
// With second=true the same stream goes on (the first part unchanged):
//   LEB128 n₂               |P − S|: the first filter's false positives over [0, d)
//   LEB128 m₂               second filter bits, ⌈−n₂ ln ε / (ln 2)²⌉ (0 iff n₂ = 0)
//   ⌈m₂/8⌉ bytes            the second filter, k probes, seed second_seed(seed); bit order and
//                           padding as the first
// Size: 8·(|n₂| + |m₂| + ⌈m₂/8⌉) more bits.
#pragma once
#include <gradcodec/plugin/params.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_bloom(const Params& p, uint32_t version);

namespace bloom {

enum class Policy : uint8_t { Leftmost = 0, Random = 1, Conflict = 2 };
Policy policy_from_name(const std::string& name);  // throws Usage for an unknown name

// m = ⌈−r ln ε / (ln 2)²⌉ (0 when r = 0) and k = max(1, round(−ln ε / ln 2)).
uint64_t filter_bits(uint64_t r, double fpr) noexcept;
unsigned hash_count(double fpr) noexcept;

class Filter {
 public:
  // An empty filter of m bits (m ≥ 1 when anything is inserted) and k probes.
  Filter(uint64_t m, unsigned k, uint32_t seed);
  // A filter read from a stream: `bits` holds ⌈m/8⌉ bytes.
  Filter(uint64_t m, unsigned k, uint32_t seed, std::span<const uint8_t> bits);
  void insert(uint64_t x) noexcept;
  bool contains(uint64_t x) const noexcept;
  // The distinct bit locations of x's probes, appended to `out`; returns how many.
  unsigned locations(uint64_t x, std::vector<uint64_t>& out) const;
  uint64_t m() const noexcept { return m_; }
  unsigned k() const noexcept { return k_; }
  uint32_t seed() const noexcept { return seed_; }
  const std::vector<uint8_t>& bytes() const noexcept { return bits_; }

 private:
  void probes(uint64_t x, uint64_t& a, uint64_t& b) const noexcept;
  uint64_t m_;
  unsigned k_;
  uint32_t seed_;
  std::vector<uint8_t> bits_;
};

// Every position of [0, universe) the filter answers "maybe" to, ascending.
std::vector<uint64_t> positives(const Filter& f, uint64_t universe);

// The policies: r of the positives P (ascending, r ≤ |P|), returned ascending.
std::vector<uint64_t> pick_leftmost(std::span<const uint64_t> P, uint64_t r);
std::vector<uint64_t> pick_random(std::span<const uint64_t> P, uint64_t r, uint32_t seed);
// Conflict sets given explicitly: element e of P belongs to the distinct sets
// sets[offsets[e] .. offsets[e+1]), set ids < nsets (offsets has |P| + 1 entries).
std::vector<uint64_t> pick_conflict_sets(std::span<const uint64_t> P, std::span<const uint64_t> offsets,
                                         std::span<const uint64_t> sets, uint64_t nsets, uint64_t r, uint32_t seed);
// The conflict sets of a filter: one per bit, holding the elements of P that probe it.
std::vector<uint64_t> pick_conflict(const Filter& f, std::span<const uint64_t> P, uint64_t r, uint32_t seed);
std::vector<uint64_t> pick(Policy policy, const Filter& f, std::span<const uint64_t> P, uint64_t r, uint32_t seed);

// |picked \ kept| for two ascending lists.
uint64_t false_picks(std::span<const uint64_t> kept, std::span<const uint64_t> picked) noexcept;

// fp_aware: the values to send for `picked` — a kept position's own value from `values`
// (|kept|·block of them, in kept order), any other position's from `dense` (n values; a partial
// last block padded with zeros).
std::vector<float> values_at_picks(std::span<const uint64_t> kept, std::span<const float> values,
                                   std::span<const uint64_t> picked, std::span<const float> dense, uint32_t block);

// second: the positions `certain` (ascending, all in S) are picked outright and the policy picks
// the r − |certain| others from P2 (ascending, disjoint from certain); returned ascending. The
// conflict policy's sets are those of f over P2, a set holding a probe of a certain position
// counting as explained (it has its true positive).
std::vector<uint64_t> pick_pruned(Policy policy, const Filter& f, std::span<const uint64_t> certain,
                                  std::span<const uint64_t> P2, uint64_t r, uint32_t seed);
// Splits P by the second filter f2: certain = the positions f2 answers "no" to, P2 = the rest.
void split_by_second(const Filter& f2, std::span<const uint64_t> P, std::vector<uint64_t>& certain,
                     std::vector<uint64_t>& P2);

struct Config {
  double fpr = 0.01;
  Policy policy = Policy::Conflict;
  bool second = false;  // §3.6: a second filter over P − S
};

// The encoder's result: the stream, the positions its decoder will pick, the false picks.
struct Coded {
  std::vector<uint8_t> stream;
  std::vector<uint64_t> picked;
  uint64_t false_picks = 0;
  uint64_t n2 = 0, m2 = 0;  // second=true: |P − S| and the second filter's bits
};
// The policies' seed derived from the stream's seed: (u32) SplitMix64(seed ⊕ 0x9e3779b97f4a7c15).
uint32_t policy_seed(uint32_t seed) noexcept;
// The second filter's XXH3 seed: (u32) SplitMix64(seed ⊕ 0x6a09e667f3bcc908).
uint32_t second_seed(uint32_t seed) noexcept;

// Codes the ascending positions `kept` of [0, universe) with the given seed.
Coded encode_positions(std::span<const uint64_t> kept, uint64_t universe, const Config& cfg, uint32_t seed);

struct Header {
  uint64_t r = 0, m = 0, false_picks = 0;
  unsigned k = 0;
  uint32_t seed = 0;
  std::span<const uint8_t> filter;  // ⌈m/8⌉ bytes
  uint64_t n2 = 0, m2 = 0;           // second=true only
  std::span<const uint8_t> filter2;  // ⌈m₂/8⌉ bytes
};
// Parses and checks a stream (Corrupt on any inconsistency; r ≤ universe); `second` says whether
// the second filter's part follows the first filter (the stage's parameter).
Header read_header(std::span<const uint8_t> stream, uint64_t universe, bool second = false);
// Refuses (Corrupt) k and m that do not follow from fpr and r (up to the last bit of a logarithm),
// and m₂ that does not follow from fpr and n₂.
void check_sizing(const Header& h, double fpr);
// The positions the decoder picks from a stream (checked with read_header and check_sizing),
// ascending.
std::vector<uint64_t> decode_positions(std::span<const uint8_t> stream, uint64_t universe, const Config& cfg);

// Exact stream size in bits (whole bytes): header and filter.
uint64_t stream_bits(uint64_t r, uint64_t m, uint64_t false_picks) noexcept;
// The second filter's part (second=true), to add to stream_bits: 8·(|n₂| + |m₂| + ⌈m₂/8⌉).
uint64_t second_bits(uint64_t n2, uint64_t m2) noexcept;

}  // namespace bloom
}  // namespace gradcodec::stages
