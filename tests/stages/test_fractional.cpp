// SPDX-License-Identifier: BSD-3-Clause
// fractional(P): the per-value bound |Q(u) − u| ≤ ((1 − σ)/σ)·|u| (TCS eq. 23), the exact cost
// d(⌈log2 P⌉ + 1) + 32P bits, P not a power of two, zeros, corrupt streams.
#include <catch2/catch.hpp>

#include "stages/quantize_support.hpp"

#include <algorithm>
#include <cmath>

using namespace gradcodec;
using namespace gradcodec::test;

namespace {
// σ = (u_min/u_max)^(1/P) over the nonzero magnitudes.
double sigma_of(const std::vector<float>& v, unsigned P) {
  double lo = INFINITY, hi = 0;
  for (float x : v)
    if (x != 0) lo = std::min(lo, std::fabs(double(x))), hi = std::max(hi, std::fabs(double(x)));
  return std::pow(lo / hi, 1.0 / P);
}
}  // namespace

TEST_CASE("fractional respects |Q(u) - u| <= ((1 - sigma)/sigma)|u| for every value", "[quantize][fractional]") {
  // Gradient-like magnitudes over many decades, plus a few identical values.
  std::vector<float> v = gaussian(5000, 17, 1e-3f);
  v[10] = v[11] = v[12] = 2.5e-3f;
  for (unsigned P : {1u, 2u, 3u, 5u, 8u, 16u, 64u, 1000u}) {
    INFO("P=" << P);
    Coded c = code_dense("fractional(P=" + std::to_string(P) + ")", make_tensor("w", {v.size()}, v));
    const double sigma = sigma_of(v, P), gamma = (1 - sigma) / sigma;
    // Slack: μ_p is rounded to f32 once, half an ulp: ≤ 2^-24·μ_p ≤ 2^-24·(1 + γ)·|u| since
    // μ_p ≤ |u|/σ; 2^-23·(1 + γ)·|u| covers it twice over.
    for (size_t i = 0; i < v.size(); ++i) {
      const double u = v[i], q = c.decoded[i];
      REQUIRE(std::fabs(q - u) <= (gamma + (1 + gamma) * 0x1p-23) * std::fabs(u));
      REQUIRE((q < 0) == (u < 0));
    }
  }
}

TEST_CASE("fractional costs d(log2 P + 1) + 32P bits; P not a power of two takes ceil(log2 P)", "[quantize][fractional]") {
  const auto v = gaussian(1000, 3);
  Tensor t = make_tensor("w", {1000}, v);
  for (unsigned P : {1u, 2u, 4u, 16u, 256u}) {
    Coded c = code_dense("fractional(P=" + std::to_string(P) + ")", t);
    const unsigned log2P = static_cast<unsigned>(std::log2(P));
    CHECK(c.bytes("value") * 8 == 1000 * (log2P + 1));  // 1000·(log2 P + 1) is a multiple of 8
    CHECK(c.bytes("scale") * 8 == 32 * P);
    CHECK_FALSE(c.has("side"));  // no exact zeros
  }
  // P = 5: intervals coded in ⌈log2 5⌉ = 3 bits, codes 5..7 never used (refused when decoding).
  Coded c = code_dense("fractional(P=5)", t);
  CHECK(c.bytes("value") == 1000 * 4 / 8);
  CHECK(c.bytes("scale") == 5 * 4);
  // The P means are the interval means: every decoded magnitude is one of them.
  std::vector<float> means(5);
  std::memcpy(means.data(), c.streams.get("scale").data(), 20);
  CHECK(std::is_sorted(means.rbegin(), means.rend()));
  for (float d : c.decoded) REQUIRE(std::find(means.begin(), means.end(), std::fabs(d)) != means.end());
}

TEST_CASE("fractional decodes zeros exactly through the side bitmap", "[quantize][fractional]") {
  std::vector<float> v = gaussian(100, 5);
  v[0] = 0.0f, v[50] = -0.0f, v[99] = 0.0f;
  Coded c = code_dense("fractional(P=4)", make_tensor("w", {100}, v));
  CHECK(c.bytes("side") == 13);
  CHECK(c.decoded[0] == 0.0f);
  CHECK(c.decoded[50] == 0.0f);
  CHECK(c.decoded[99] == 0.0f);
  const double sigma = sigma_of(v, 4), gamma = (1 - sigma) / sigma;
  for (size_t i = 0; i < v.size(); ++i) REQUIRE(std::fabs(double(c.decoded[i]) - v[i]) <= (gamma + (1 + gamma) * 0x1p-23) * std::fabs(v[i]));
  CHECK(code_dense("fractional", make_tensor("z", {3}, {0.0f, 0.0f, 0.0f})).decoded == std::vector<float>(3, 0.0f));
  CHECK(code_dense("fractional", make_tensor("s", {}, {-6.0f})).decoded == std::vector<float>{-6.0f});
  CHECK(code_dense("fractional", make_tensor("e", {0}, {})).streams.total_bytes() == 0);
}

TEST_CASE("fractional refuses corrupt streams", "[quantize][fractional]") {
  Tensor t = make_tensor("w", {40}, gaussian(40, 1));
  auto q = make_quantizer("fractional(P=5)");
  Payload p;
  p.source = &t, p.info = &t.info, p.n = 40;
  Streams s;
  q->encode(p, s, quant_ctx(t.info, 1));
  Streams bad = s;
  bad.find("value")->bytes[0] = 0x7f;  // sign 0, interval code 7 ≥ P
  CHECK_THROWS_AS(decode_with(*q, bad, t.info, false, {}, 1, false, 1), Error);
  bad = s;
  bad.find("scale")->bytes.resize(16);
  CHECK_THROWS_AS(decode_with(*q, bad, t.info, false, {}, 1, false, 1), Error);
  bad = s;
  bad.add("side").bytes.assign(4, 0);  // 40 values need 5 bytes
  CHECK_THROWS_AS(decode_with(*q, bad, t.info, false, {}, 1, false, 1), Error);
}
