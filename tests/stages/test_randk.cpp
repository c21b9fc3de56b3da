// SPDX-License-Identifier: BSD-3-Clause
// randk: with a shared seed no `index` stream exists and the decoder regenerates the same
// positions; positions are uniform (chi-square over many seeds, per position and per k-subset);
// unbiased=true makes the mean over seeds converge to g; block=B keeps whole blocks, the partial
// last block included; the positions of a given (seed, frame, tensor) never change (golden).
#include <catch2/catch.hpp>

#include "sparsify/randk.hpp"
#include "support.hpp"

#include <cmath>
#include <map>

using namespace gradcodec;
using namespace gradcodec::test;

namespace {

// Positions kept by a randk pipeline for one seed: the decoded non-zeros of an all-ones tensor.
std::vector<uint64_t> kept_positions(const std::string& pipeline, uint64_t n, uint64_t seed, uint32_t frame = 0,
                                     uint32_t tensor = 0) {
  Tensor t = make_tensor("w", {n}, std::vector<float>(n, 1.0f));
  auto out = values_of(roundtrip(pipeline, t, seed, frame, tensor).decoded);
  std::vector<uint64_t> pos;
  for (uint64_t i = 0; i < n; ++i)
    if (out[i] != 0.0f) pos.push_back(i);
  return pos;
}

double rel_l2(const std::vector<double>& a, const std::vector<float>& g) {
  double e = 0, n = 0;
  for (size_t i = 0; i < g.size(); ++i) e += (a[i] - g[i]) * (a[i] - g[i]), n += double(g[i]) * g[i];
  return std::sqrt(e / n);
}

}  // namespace

TEST_CASE("randk shared seed: no index stream at all, the decoder regenerates the positions", "[randk]") {
  CHECK(Pipeline::parse("randk(ratio=0.1)").text().find("varint") == std::string::npos);
  CHECK_THROWS_WITH(Pipeline::parse("randk(ratio=0.1) | varint"), Catch::Contains("drop varint"));
  auto v = gaussian(1000, 4);
  Tensor t = make_tensor("w", {1000}, v);
  RoundTrip r = roundtrip("randk(ratio=0.1)", t, 3);
  CHECK(r.streams.find("index") == nullptr);
  REQUIRE(r.streams.all().size() == 1);
  CHECK(r.streams.all()[0].name == "value");
  CHECK(r.stream_bytes == 100 * 4);  // only the 100 kept f32 values
  auto out = values_of(r.decoded);
  size_t kept = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    REQUIRE((out[i] == 0.0f || out[i] == v[i]));  // a wrong position would carry another value
    kept += out[i] != 0.0f;
  }
  CHECK(kept == 100);
  // shared_seed=false draws the same positions and codes them: same decoded tensor.
  RoundTrip coded = roundtrip("randk(ratio=0.1, shared_seed=false)", t, 3);
  CHECK(coded.streams.find("index") != nullptr);
  CHECK(values_of(coded.decoded) == out);
}

TEST_CASE("randk positions depend on seed, frame and tensor only, and never change", "[randk]") {
  const std::string p = "randk(k=10)";
  CHECK(kept_positions(p, 100, 7) == kept_positions(p, 100, 7));
  CHECK(kept_positions(p, 100, 7) != kept_positions(p, 100, 8));
  CHECK(kept_positions(p, 100, 7, 1) != kept_positions(p, 100, 7, 0));
  CHECK(kept_positions(p, 100, 7, 0, 1) != kept_positions(p, 100, 7, 0, 0));
  // Golden: containers written with a shared seed decode only while this stays the same.
  CHECK(kept_positions(p, 100, 7) == std::vector<uint64_t>{0, 6, 12, 24, 46, 48, 51, 55, 56, 75});
  Rng rng(5);
  CHECK(stages::random_positions(100, 10, rng) == std::vector<uint64_t>{9, 18, 21, 35, 36, 42, 50, 64, 69, 96});
}

TEST_CASE("randk positions are uniform: chi-square over many seeds", "[randk]") {
  // Per position: over N seeds each position is kept ~ Binomial(N, p = k/U), E = N·k/U, so
  // X = Σ (O − E)²/E ≈ (1 − p)·χ²(U − 1) (the counts sum to N·k). Accept X/(1 − p) inside the
  // central 99.8% of χ²(U − 1): [χ²₀.₀₀₁, χ²₀.₉₉₉] — a biased sampler overshoots, a sampler that
  // cycles deterministically undershoots. Fixed seeds 0..N−1: the verdict is reproducible.
  struct Case {
    uint64_t u, k, seeds;
    double lo, hi;  // χ²(U − 1) quantiles 0.001 and 0.999 (scipy.stats.chi2.ppf)
  };
  for (Case c : {Case{64, 8, 4000, 33.906, 103.442},       // bitmap path (k ≥ U/16)
                 Case{1000, 10, 5000, 866.548, 1142.848}}) {  // hash-set path (k < U/16)
    INFO("U = " << c.u << ", k = " << c.k);
    std::vector<double> count(c.u, 0);
    for (uint64_t s = 0; s < c.seeds; ++s) {
      auto pos = kept_positions("randk(k=" + std::to_string(c.k) + ")", c.u, s);
      REQUIRE(pos.size() == c.k);
      for (uint64_t x : pos) count[x] += 1;
    }
    const double e = double(c.seeds) * c.k / c.u, p = double(c.k) / c.u;
    double x = 0;
    for (double o : count) x += (o - e) * (o - e) / e;
    CHECK(x / (1 - p) > c.lo);
    CHECK(x / (1 - p) < c.hi);
  }
  // Per k-subset (the joint law): every one of the C(U, 2) pairs equally likely. The counts of
  // C cells over N draws are multinomial: X ~ χ²(C − 1). U = 6 (bitmap path), U = 40 (hash path).
  struct Joint {
    uint64_t u;
    double lo, hi;
  };
  for (Joint j : {Joint{6, 3.041, 36.123}, Joint{40, 662.699, 906.696}}) {
    INFO("pairs of U = " << j.u);
    const uint64_t cells = j.u * (j.u - 1) / 2, n = 100 * cells;
    std::map<std::pair<uint64_t, uint64_t>, double> count;
    for (uint64_t s = 0; s < n; ++s) {
      Rng rng(s, 0, 0, RngPurpose::Select);  // keyed as randk keys it
      auto pos = stages::random_positions(j.u, 2, rng);
      REQUIRE(pos.size() == 2);
      REQUIRE(pos[0] < pos[1]);
      count[{pos[0], pos[1]}] += 1;
    }
    REQUIRE(count.size() == cells);
    double x = 0;
    for (const auto& [pair, o] : count) x += (o - 100) * (o - 100) / 100;
    CHECK(x > j.lo);
    CHECK(x < j.hi);
  }
}

TEST_CASE("randk unbiased=true: the mean over seeds converges to g", "[randk]") {
  // Each decoded element is g_i·(d/k) with probability k/d, else 0: variance g_i²(d/k − 1), so
  // the mean of N decodes has relative L2 error sqrt((d/k − 1)/N) in expectation (0.067 here).
  // Tolerance 1.5× that for the fixed seeds 0..N−1; the biased variant's mean is (k/d)·g, off by
  // 1 − k/d = 0.9, which the same tolerance rejects.
  const size_t d = 200, n = 2000;
  auto g = gaussian(d, 17);
  Tensor t = make_tensor("w", {d}, g);
  std::vector<double> unbiased(d, 0), biased(d, 0);
  for (uint64_t s = 0; s < n; ++s) {
    auto u = values_of(roundtrip("randk(ratio=0.1, unbiased=true)", t, s).decoded);
    auto b = values_of(roundtrip("randk(ratio=0.1)", t, s).decoded);
    for (size_t i = 0; i < d; ++i) {
      if (u[i] != 0.0f) REQUIRE(u[i] == g[i] * 10.0f);  // scaled by d/k, stored as f32
      unbiased[i] += u[i] / double(n), biased[i] += b[i] / double(n);
    }
  }
  const double tol = 1.5 * std::sqrt((double(d) / 20 - 1) / double(n));
  CHECK(rel_l2(unbiased, g) <= tol);
  CHECK(rel_l2(biased, g) > 0.85);
}

TEST_CASE("randk block=B keeps whole blocks, the partial last block included", "[randk]") {
  // d = 103, B = 10: U = 11 blocks, the last one has 3 elements; ratio 0.3 → k = round(3.3) = 3.
  auto g = gaussian(103, 23);
  Tensor t = make_tensor("w", {103}, g);
  size_t tail_kept = 0;
  for (uint64_t s = 0; s < 200; ++s) {
    for (const char* p : {"randk(ratio=0.3, block=10)", "randk(ratio=0.3, block=10, shared_seed=false)"}) {
      INFO(p << " seed " << s);
      RoundTrip r = roundtrip(p, t, s);
      auto out = values_of(r.decoded);
      size_t blocks = 0;
      for (size_t b = 0; b < 11; ++b) {
        const size_t first = b * 10, last = std::min<size_t>(first + 10, 103);
        const bool kept = out[first] != 0.0f;
        for (size_t i = first; i < last; ++i) REQUIRE(out[i] == (kept ? g[i] : 0.0f));
        blocks += kept;
        if (b == 10 && kept && std::string(p).find("shared_seed=false") == std::string::npos) ++tail_kept;
      }
      REQUIRE(blocks == 3);
    }
  }
  CHECK(tail_kept > 20);  // 200·3/11 ≈ 55 expected
  // unbiased with blocks: kept blocks scaled by U/k = 11/3
  auto out = values_of(roundtrip("randk(k=3, block=10, unbiased=true)", t, 1).decoded);
  const float scale = static_cast<float>(11.0 / 3.0);
  for (size_t i = 0; i < 103; ++i)
    if (out[i] != 0.0f) CHECK(out[i] == g[i] * scale);
}

TEST_CASE("randk on empty, one-element and ratio=1 tensors", "[randk]") {
  Tensor e = make_tensor("e", {0}, {});
  CHECK(roundtrip("randk(ratio=0.5)", e).decoded.data.size() == 0);
  Tensor one = make_tensor("s", {}, {2.5f});
  CHECK(values_of(roundtrip("randk(ratio=0.01)", one).decoded) == std::vector<float>{2.5f});
  auto g = gaussian(50, 3);
  Tensor t = make_tensor("w", {50}, g);
  CHECK(values_of(roundtrip("randk(ratio=1)", t).decoded) == g);
  CHECK_THROWS_WITH(Pipeline::parse("randk"), Catch::Contains("randk: give one of ratio"));
  CHECK_THROWS_WITH(Pipeline::parse("randk(k=2, ratio=0.5)"), Catch::Contains("randk: give ratio or k, not both"));
  CHECK_THROWS_WITH(Pipeline::parse("randk(k=2, block=0)"), Catch::Contains("out of range"));
}

TEST_CASE("randk refuses a record whose streams cannot hold its k values, before drawing them", "[randk]") {
  // A corrupt shape of 2^40 elements with an 8-byte value stream: k = 2^40/100 implied values.
  PipelineStages stages(Pipeline::parse("randk(ratio=0.01)"));
  TensorInfo info;
  info.name = "huge";
  info.shape = {uint64_t{1} << 40};
  Streams s;
  s.add("value").bytes.assign(8, 0);
  PipelineStages::TensorState st;
  StageContext ctx;
  ctx.info = &info;
  try {
    stages.decode(info, s, true, ctx, st);
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Corrupt);
    CHECK_THAT(e.what(), Catch::Contains("randk: streams of 8 bytes cannot hold"));
  }
}

TEST_CASE("randk unbiased=true: a kept value scaled beyond float32's range stops the pipeline", "[randk]") {
  // d/k = 10: 4e37 would decode as Inf. The stage names itself in Encoded::overflow (the codec
  // then refuses the tensor or stores it raw); 3e37 (scaled: 3e38) codes as usual, and so does
  // 4e37 when unbiased is false.
  auto encode = [](const std::string& text, float x) {
    Tensor t = make_tensor("w", {100}, std::vector<float>(100, x));
    PipelineStages stages(Pipeline::parse(text));
    StageContext ctx;
    ctx.info = &t.info;
    PipelineStages::TensorState st;
    return stages.encode(t, ctx, st);
  };
  const auto over = encode("randk(ratio=0.1, unbiased=true)", -4e37f);
  CHECK(over.overflow.rfind("randk: a kept value scaled by U/k", 0) == 0);
  CHECK(over.streams.all().empty());
  CHECK(encode("randk(ratio=0.1, unbiased=true)", 3e37f).overflow.empty());
  CHECK(encode("randk(ratio=0.1)", 4e37f).overflow.empty());
  CHECK(values_of(roundtrip("randk(ratio=0.1, unbiased=true)", make_tensor("w", {100}, std::vector<float>(100, 3e37f)))
                      .decoded)
            .size() == 100);
}
