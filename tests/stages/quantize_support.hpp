// SPDX-License-Identifier: BSD-3-Clause
// Helpers for the quantizer tests: a quantizer built from pipeline text, and direct encode/decode
// of hand-made payloads (dense tensors, or a sparsifier's kept values with their positions).
#pragma once

#include "support.hpp"

#include <gradcodec/plugin/registry.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace gradcodec::test {

// The quantizer of a pipeline text ("qsgd(levels=7)"); fails the test when there is none.
inline std::unique_ptr<Quantizer> make_quantizer(const std::string& text) {
  Pipeline p = Pipeline::parse(text);
  for (const auto& s : p.stages()) {
    const StageEntry* e = find_stage(s.name);
    if (e->kind == StageKind::Quantizer)
      return std::unique_ptr<Quantizer>(static_cast<Quantizer*>(e->make(s.params, s.version).release()));
  }
  throw Error(ErrorCode::Internal, "no quantizer in " + text);
}

// What one quantizer made of one payload.
struct Coded {
  Streams streams;              // the quantizer's streams
  std::vector<uint64_t> index;  // positions after encode (sbc drops some)
  std::vector<float> decoded;   // the values decode() produced (value_count of them)
  uint64_t bytes(const std::string& name) const {
    const Stream* s = streams.find(name);
    return s ? s->bytes.size() : 0;
  }
  bool has(const std::string& name) const { return streams.find(name) != nullptr; }
};

struct SparseInput {
  uint64_t n = 0;               // elements of the tensor
  std::vector<uint64_t> index;  // kept positions (ascending)
  std::vector<float> values;    // kept values (index.size() · block)
  uint32_t block = 1;
  bool implicit = false;        // the decoder regenerates the index (randk shared seed)
};

inline StageContext quant_ctx(const TensorInfo& info, uint64_t seed) {
  StageContext ctx;
  ctx.seed = seed;
  ctx.info = &info;
  return ctx;
}

// Decodes `streams` into a payload shaped like `like` (dense, or sparse with `index`).
inline std::vector<float> decode_with(Quantizer& q, const Streams& streams, const TensorInfo& info, bool sparse,
                                      const std::vector<uint64_t>& index, uint32_t block, bool implicit,
                                      uint64_t seed) {
  Payload d;
  d.info = &info;
  d.n = info.elements();
  d.sparse = sparse;
  d.universe = sparse ? (d.n + block - 1) / block : 0;
  d.block = block;
  d.index = index;
  d.index_implicit = implicit;
  d.exact = false;
  q.decode(d, streams, quant_ctx(info, seed));
  return std::move(d.values);
}

// Encodes and decodes the dense tensor `t` with the quantizer of `text`.
inline Coded code_dense(const std::string& text, const Tensor& t, uint64_t seed = 1) {
  auto q = make_quantizer(text);
  Payload p;
  p.source = &t;
  p.info = &t.info;
  p.n = t.elements();
  p.exact = false;
  Coded c;
  q->encode(p, c.streams, quant_ctx(t.info, seed));
  c.decoded = decode_with(*q, c.streams, t.info, false, {}, 1, false, seed);
  return c;
}

// Encodes and decodes a sparse payload (as a sparsifier would leave it) with the quantizer of `text`.
inline Coded code_sparse(const std::string& text, const SparseInput& in, uint64_t seed = 1) {
  auto q = make_quantizer(text);
  TensorInfo info;
  info.name = "sparse";
  info.shape = {in.n};
  Payload p;
  p.info = &info;
  p.n = in.n;
  p.sparse = true;
  p.universe = (in.n + in.block - 1) / in.block;
  p.block = in.block;
  p.index = in.index;
  p.values = in.values;
  p.index_implicit = in.implicit;
  p.exact = false;
  Coded c;
  q->encode(p, c.streams, quant_ctx(info, seed));
  c.index = p.index;
  c.decoded = decode_with(*q, c.streams, info, true, p.index, in.block, in.implicit, seed);
  return c;
}

inline double sq_dist(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return s;
}
inline double sq_norm(const std::vector<float>& a) {
  double s = 0;
  for (float x : a) s += double(x) * x;
  return s;
}

// Unbiasedness statistic over `seeds` independent codings of g (seeds 1..seeds):
//   ratio = ‖mean_s Q_s(g) − g‖² / (V/seeds),  V = mean_s ‖Q_s(g) − g‖².
// For an unbiased quantizer E‖mean − g‖² = V/seeds exactly (independent seeds), so the ratio is
// ≈ 1 (an average of many independent coordinates); a bias b adds ‖b‖²·seeds/V.
struct BiasStat {
  double ratio = 0;     // as above
  double rel_err = 0;   // ‖mean − g‖/‖g‖
  double variance = 0;  // V/‖g‖²
};
inline BiasStat bias_over_seeds(const std::string& text, const Tensor& t, int seeds) {
  const std::vector<float> g = values_of(t);
  std::vector<double> mean(g.size(), 0.0);
  double v = 0;
  for (int s = 1; s <= seeds; ++s) {
    Coded c = code_dense(text, t, static_cast<uint64_t>(s));
    v += sq_dist(c.decoded, g);
    for (size_t i = 0; i < g.size(); ++i) mean[i] += c.decoded[i];
  }
  v /= seeds;
  double d2 = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double m = mean[i] / seeds - g[i];
    d2 += m * m;
  }
  BiasStat b;
  b.ratio = v > 0 ? d2 / (v / seeds) : (d2 > 0 ? 1e300 : 0);
  b.rel_err = std::sqrt(d2 / sq_norm(g));
  b.variance = v / sq_norm(g);
  return b;
}

}  // namespace gradcodec::test
