// SPDX-License-Identifier: BSD-3-Clause
// ssdm: unbiased, with the variance of a 1-bit unbiased sign ((count − 1)·||g||²), 1 bit per
// value + one f32, edge cases, corrupt streams.
#include <catch2/catch.hpp>

#include "stages/quantize_support.hpp"

#include <cmath>

using namespace gradcodec;
using namespace gradcodec::test;

TEST_CASE("ssdm is unbiased: the mean over seeds converges to g", "[quantize][ssdm]") {
  Tensor t = make_tensor("w", {200}, gaussian(200, 31));
  BiasStat b = bias_over_seeds("ssdm", t, 4000);
  // ratio ≈ 1 when unbiased (BiasStat); 1.5 is a wide margin over its spread (200 coordinates).
  CHECK(b.ratio < 1.5);
  CHECK(b.rel_err <= std::sqrt(1.5 * b.variance / 4000));
  // E‖N·s − g‖² = Σ (N² − g_i²) = (count − 1)·N²: the per-seed error averages ~4000·199 terms, so
  // its mean is within ~1% of that; 5% is a safe margin.
  CHECK(b.variance == Approx(199.0).epsilon(0.05));
  // A biased variant fails the same check: the deterministic sign(scale=mean) never averages out.
  BiasStat biased = bias_over_seeds("sign", t, 50);
  CHECK(biased.ratio > 40);
}

TEST_CASE("ssdm costs 1 bit per value plus one f32 norm; decodes to +-||g||", "[quantize][ssdm]") {
  const auto g = gaussian(1001, 2);
  double ss = 0;
  for (float x : g) ss += double(x) * x;
  const float norm = static_cast<float>(std::sqrt(ss));
  Coded c = code_dense("ssdm", make_tensor("w", {1001}, g), 4);
  CHECK(c.bytes("value") == (1001 + 7) / 8);
  CHECK(c.bytes("scale") == 4);
  for (float d : c.decoded) REQUIRE(std::fabs(d) == norm);
}

TEST_CASE("ssdm edge cases: one value is exact, zeros stay zero, empty is empty", "[quantize][ssdm]") {
  CHECK(code_dense("ssdm", make_tensor("s", {}, {-1.5f})).decoded == std::vector<float>{-1.5f});  // P(+1) = 0
  for (float d : code_dense("ssdm", make_tensor("z", {9}, std::vector<float>(9, 0.0f))).decoded) CHECK(d == 0.0f);
  Coded e = code_dense("ssdm", make_tensor("e", {0}, {}));
  CHECK(e.decoded.empty());
  CHECK(e.bytes("scale") == 0);
  // A value as large as the norm (all others zero) always gets its own sign.
  Coded c = code_dense("ssdm", make_tensor("w", {4}, {0.0f, 0.0f, -3.0f, 0.0f}), 5);
  CHECK(c.decoded[2] == -3.0f);
}

TEST_CASE("ssdm refuses streams of the wrong size", "[quantize][ssdm]") {
  Tensor t = make_tensor("w", {16}, gaussian(16, 1));
  auto q = make_quantizer("ssdm");
  Payload p;
  p.source = &t, p.info = &t.info, p.n = 16;
  Streams s;
  q->encode(p, s, quant_ctx(t.info, 1));
  Streams bad = s;
  bad.find("value")->bytes.push_back(0);
  CHECK_THROWS_AS(decode_with(*q, bad, t.info, false, {}, 1, false, 1), Error);
  bad = s;
  bad.find("scale")->bytes.clear();
  CHECK_THROWS_AS(decode_with(*q, bad, t.info, false, {}, 1, false, 1), Error);
}
