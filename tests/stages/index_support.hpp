// SPDX-License-Identifier: BSD-3-Clause
// Helpers of the index-coder tests: build a coder straight from the registry (no pipeline, so no
// sparsifier is needed), encode/decode a position set, the size each coder's formula predicts,
// and position sets (uniform exact-k samples, Bernoulli masks) from the project's generator.
#pragma once

#include <gradcodec/plugin/registry.hpp>

#include "index/bitmap.hpp"
#include "index/elias.hpp"
#include "index/golomb.hpp"
#include "index/plain.hpp"
#include "index/rle.hpp"
#include "index/tcspos.hpp"
#include "index/varint.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace gradcodec::test::ix {

// Every coder configuration under test: the registry name and, for elias, its kind.
struct CoderSpec {
  std::string name;
  std::string kind;  // elias only
  std::string label() const { return kind.empty() ? name : name + "(kind=" + kind + ")"; }
};
inline std::vector<CoderSpec> all_coders() {
  return {{"plain", ""},  {"varint", ""},         {"bitmap", ""},         {"rle", ""},
          {"golomb", ""}, {"elias", "gamma"},     {"elias", "delta"},     {"tcspos", ""}};
}

// The coder built by its registry row's factory, with default parameters (kind overridden).
inline std::unique_ptr<IndexCoder> make_coder(const CoderSpec& c) {
  const StageEntry* e = find_stage(c.name);
  if (!e) throw Error(ErrorCode::Internal, "no stage " + c.name);
  if (e->kind != StageKind::IndexCoder) throw Error(ErrorCode::Internal, c.name + " is not an index coder");
  Params params;
  for (const auto& ps : e->params) {
    ParamValue v;
    v.type = ps.type;
    v.text = (ps.name == "kind" && !c.kind.empty()) ? c.kind : ps.default_text;
    params.set(ps.name, v);
  }
  std::unique_ptr<Stage> s = e->make(params, e->version);
  return std::unique_ptr<IndexCoder>(static_cast<IndexCoder*>(s.release()));
}

inline Payload sparse_payload(uint64_t d, std::vector<uint64_t> positions, bool value_order = false) {
  Payload p;
  p.sparse = true;
  p.universe = d;
  p.n = d;
  p.index = std::move(positions);
  p.value_order = value_order;
  return p;
}

inline std::vector<uint8_t> encode(IndexCoder& c, uint64_t d, const std::vector<uint64_t>& positions,
                                   bool value_order = false) {
  Streams s;
  c.encode(sparse_payload(d, positions, value_order), s, StageContext{});
  auto b = s.get(kIndexStream);
  return std::vector<uint8_t>(b.begin(), b.end());
}

// Decodes `bytes` as the index stream of a universe of d; returns the payload.
inline Payload decode(IndexCoder& c, uint64_t d, const std::vector<uint8_t>& bytes) {
  Streams s;
  s.add(kIndexStream).bytes = bytes;
  Payload p = sparse_payload(d, {});
  c.decode(p, s, StageContext{});
  return p;
}

// The size formula of each coder, in bits before byte padding (the stream has ⌈bits/8⌉ bytes).
inline uint64_t predicted_bits(const CoderSpec& c, uint64_t d, const std::vector<uint64_t>& pos,
                               bool value_order = false) {
  using namespace gradcodec::stages;
  if (c.name == "plain") return plain_bits(d, pos.size());
  if (c.name == "varint") return varint_bits(pos, value_order);
  if (c.name == "bitmap") return bitmap_bits(d, pos.size());
  if (c.name == "rle") return rle_bits(pos);
  if (c.name == "golomb") return golomb_bits(d, pos);
  if (c.name == "elias") return elias_bits(c.kind == "delta" ? EliasKind::Delta : EliasKind::Gamma, pos);
  if (c.name == "tcspos") return tcspos_bits(d, pos.size());
  throw Error(ErrorCode::Internal, "no size formula for " + c.name);
}

// Exactly k positions of [0, d) uniformly without replacement, ascending (Knuth's Algorithm S).
inline std::vector<uint64_t> uniform_k(uint64_t d, uint64_t k, uint64_t seed) {
  Rng r(seed);
  std::vector<uint64_t> out;
  out.reserve(k);
  for (uint64_t i = 0; i < d && out.size() < k; ++i)
    if (r.below(d - i) < k - out.size()) out.push_back(i);
  return out;
}

// Each position kept with probability rho.
inline std::vector<uint64_t> bernoulli(uint64_t d, double rho, uint64_t seed) {
  Rng r(seed);
  std::vector<uint64_t> out;
  for (uint64_t i = 0; i < d; ++i)
    if (r.uniform() < rho) out.push_back(i);
  return out;
}

// About k positions of a huge universe without touching d of anything: sorted distinct draws.
inline std::vector<uint64_t> sparse_draws(uint64_t d, uint64_t k, uint64_t seed) {
  Rng r(seed);
  std::vector<uint64_t> out(k);
  for (auto& x : out) x = r.below(d);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// True when `index` is a valid decoded index of a universe of d (ascending, or distinct).
inline bool valid_index(const std::vector<uint64_t>& index, uint64_t d, bool value_order) {
  for (uint64_t x : index)
    if (x >= d) return false;
  if (!value_order) return std::adjacent_find(index.begin(), index.end(), std::greater_equal<>()) == index.end();
  std::vector<uint64_t> s(index);
  std::sort(s.begin(), s.end());
  return std::adjacent_find(s.begin(), s.end()) == s.end();
}

}  // namespace gradcodec::test::ix
