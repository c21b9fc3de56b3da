// SPDX-License-Identifier: BSD-3-Clause
// intN: bits per value + min/max, error within half a step, min and max exact, constants exact.
#include <catch2/catch.hpp>

#include "stages/quantize_support.hpp"

#include <algorithm>
#include <cmath>

using namespace gradcodec;
using namespace gradcodec::test;

TEST_CASE("intN costs bits per value plus min and max; error within half a step", "[quantize][intN]") {
  const auto v = gaussian(3001, 9, 0.02f);
  const float lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
  for (unsigned bits : {1u, 2u, 3u, 8u, 12u, 16u}) {
    INFO("bits=" << bits);
    Coded c = code_dense("intN(bits=" + std::to_string(bits) + ")", make_tensor("w", {3001}, v));
    CHECK(c.bytes("value") == (3001 * bits + 7) / 8);
    CHECK(c.bytes("scale") == 8);
    // Half a step, plus the f32 rounding of the decoded value (half an ulp of |x| ≤ max(|lo|, |hi|)).
    const double half_step = (double(hi) - lo) / ((1u << bits) - 1) / 2;
    const double ulp = std::max(std::fabs(lo), std::fabs(hi)) * 0x1p-24;
    for (size_t i = 0; i < v.size(); ++i) REQUIRE(std::fabs(double(c.decoded[i]) - v[i]) <= half_step + ulp);
    CHECK(*std::min_element(c.decoded.begin(), c.decoded.end()) == lo);
    CHECK(*std::max_element(c.decoded.begin(), c.decoded.end()) == Approx(hi).epsilon(1e-7));
  }
}

TEST_CASE("intN: a constant tensor and a single value decode exactly; empty is empty", "[quantize][intN]") {
  CHECK(code_dense("intN(bits=4)", make_tensor("c", {5}, std::vector<float>(5, -0.3f))).decoded == std::vector<float>(5, -0.3f));
  CHECK(code_dense("intN(bits=1)", make_tensor("s", {}, {7.0f})).decoded == std::vector<float>{7.0f});
  Coded e = code_dense("intN", make_tensor("e", {0}, {}));
  CHECK(e.decoded.empty());
  CHECK(e.streams.total_bytes() == 0);
}

TEST_CASE("intN refuses streams of the wrong size", "[quantize][intN]") {
  Tensor t = make_tensor("w", {20}, gaussian(20, 1));
  auto q = make_quantizer("intN(bits=5)");
  Payload p;
  p.source = &t, p.info = &t.info, p.n = 20;
  Streams s;
  q->encode(p, s, quant_ctx(t.info, 1));
  CHECK(s.find("value")->bytes.size() == 13);  // 100 bits
  Streams bad = s;
  bad.find("value")->bytes.pop_back();
  CHECK_THROWS_AS(decode_with(*q, bad, t.info, false, {}, 1, false, 1), Error);
  bad = s;
  bad.find("scale")->bytes.resize(4);
  CHECK_THROWS_AS(decode_with(*q, bad, t.info, false, {}, 1, false, 1), Error);
}
