// SPDX-License-Identifier: BSD-3-Clause
// terngrad: unbiased without clipping (and measurably biased with strong clipping), ternary
// values {-s, 0, s}, the clipping rule, 2 bits per value + one f32, corrupt streams.
#include <catch2/catch.hpp>

#include "stages/quantize_support.hpp"

#include <algorithm>
#include <cmath>

using namespace gradcodec;
using namespace gradcodec::test;

TEST_CASE("terngrad(clip=0) is unbiased; clipping at 1 sigma is not", "[quantize][terngrad]") {
  Tensor t = make_tensor("w", {1000}, gaussian(1000, 21));
  // ratio = ‖mean − g‖²·N/V ≈ 1 when unbiased (see BiasStat in quantize_support.hpp); 1.5 is a wide
  // margin over its few-percent spread.
  BiasStat unbiased = bias_over_seeds("terngrad(clip=0)", t, 2000);
  CHECK(unbiased.ratio < 1.5);
  CHECK(unbiased.rel_err <= std::sqrt(1.5 * unbiased.variance / 2000));
  // The same statistic must be able to fail: clipping at μ ± σ moves every |g| > σ (about a
  // third of the values), a bias of ~0.3·‖g‖ that no number of seeds averages out.
  BiasStat clipped = bias_over_seeds("terngrad(clip=1)", t, 2000);
  CHECK(clipped.ratio > 50);
  CHECK(clipped.rel_err > 0.1);
}

TEST_CASE("terngrad decodes to {-s, 0, s} with s = max|g|; 2 bits per value + 32", "[quantize][terngrad]") {
  const std::vector<float> g = gaussian(999, 3);
  Tensor t = make_tensor("w", {999}, g);
  float smax = 0;
  for (float x : g) smax = std::max(smax, std::fabs(x));
  Coded c = code_dense("terngrad(clip=0)", t, 5);
  CHECK(c.bytes("value") == (2 * 999 + 7) / 8);
  CHECK(c.bytes("scale") == 4);
  size_t zeros = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const float d = c.decoded[i];
    REQUIRE((d == 0.0f || d == smax || d == -smax));
    if (d == 0.0f) ++zeros;
    else REQUIRE((d < 0) == (g[i] < 0));
  }
  CHECK(zeros > 0);
  CHECK(zeros < g.size());
  // The largest value is kept with probability 1.
  const size_t imax = std::max_element(g.begin(), g.end(), [](float a, float b) { return std::fabs(a) < std::fabs(b); }) - g.begin();
  CHECK(std::fabs(c.decoded[imax]) == smax);
}

// σ over the values (population, around their mean), as TernGrad §3.3 and GRACE take it.
static double population_sigma(const std::vector<float>& g) {
  double mu = 0, ss = 0;
  for (float x : g) mu += x;
  mu /= static_cast<double>(g.size());
  for (float x : g) ss += (x - mu) * (x - mu);
  return std::sqrt(ss / static_cast<double>(g.size()));
}

TEST_CASE("terngrad clips |g| to clip*sigma around 0: s = min(max|g|, c*sigma), also with a large mean",
          "[quantize][terngrad]") {
  // Mean 1, σ ≈ 0.1: clipping around 0 caps s at c·σ ≈ 0.25 (around the mean it would be ≈ 1.25).
  std::vector<float> g = gaussian(500, 4, 0.1f);
  for (float& x : g) x += 1.0f;
  g[17] = 50.0f;  // an outlier: raises σ, and max|g|, far above the rest
  const double sigma = population_sigma(g);
  double gmax = 0;
  for (float x : g) gmax = std::max(gmax, std::fabs(double(x)));
  for (double c : {0.5, 2.5, 100.0}) {
    const double want = std::min(gmax, c * sigma);
    INFO("clip " << c << ": sigma " << sigma << ", max|g| " << gmax);
    Coded coded = code_dense("terngrad(clip=" + std::to_string(c) + ")", make_tensor("w", {500}, g), 2);
    float s = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      const float d = coded.decoded[i];
      if (d == 0.0f) continue;
      if (s == 0) s = std::fabs(d);
      REQUIRE(std::fabs(d) == s);  // ternary: one magnitude
      REQUIRE((d < 0) == (g[i] < 0));
    }
    CHECK(s == Approx(want).epsilon(1e-6));
    CHECK(coded.decoded[17] == s);  // |g_17| ≥ s: kept surely
  }
  // A constant tensor (σ = 0) is not clipped to 0: every value is kept as itself.
  Coded flat = code_dense("terngrad", make_tensor("c", {64}, std::vector<float>(64, 3.0f)), 2);
  for (float d : flat.decoded) REQUIRE(d == 3.0f);
}

TEST_CASE("terngrad edge sizes and corrupt streams", "[quantize][terngrad]") {
  Coded empty = code_dense("terngrad", make_tensor("e", {0}, {}));
  CHECK(empty.decoded.empty());
  CHECK(empty.bytes("scale") == 0);
  Coded one = code_dense("terngrad", make_tensor("s", {}, {-2.5f}));
  REQUIRE(one.decoded.size() == 1);
  CHECK(one.decoded[0] == -2.5f);  // σ = 0 clips nothing: s = |g|, kept surely

  Tensor t = make_tensor("w", {10}, gaussian(10, 1));
  auto q = make_quantizer("terngrad");
  Payload p;
  p.source = &t, p.info = &t.info, p.n = 10;
  Streams s;
  q->encode(p, s, quant_ctx(t.info, 1));
  Streams short_value = s;
  short_value.find("value")->bytes.pop_back();
  CHECK_THROWS_AS(decode_with(*q, short_value, t.info, false, {}, 1, false, 1), Error);
  Streams long_scale = s;
  long_scale.find("scale")->bytes.push_back(0);
  CHECK_THROWS_AS(decode_with(*q, long_scale, t.info, false, {}, 1, false, 1), Error);
}
