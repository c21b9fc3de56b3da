// SPDX-License-Identifier: BSD-3-Clause
// threshold: keeps exactly {i : |g_i| ≥ tau} (the boundary included, NaN never, ±Inf always),
// with the input's own values; tau = 0 keeps every non-NaN element; keeping nothing and empty
// tensors decode to zeros; tau is required and ≥ 0.
#include <catch2/catch.hpp>

#include "support.hpp"

#include <cmath>
#include <limits>

using namespace gradcodec;
using namespace gradcodec::test;

TEST_CASE("threshold keeps exactly the elements with |g| >= tau", "[threshold]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.5f, -0.5f, 0.49999997f, -0.7f, nan, inf, -inf, 0.0f, 2.0f, -0.50000006f};
  Tensor t = make_tensor("w", {10}, v);
  auto out = values_of(roundtrip("threshold(tau=0.5)", t).decoded);
  const std::vector<bool> keep = {true, true, false, true, false, true, true, false, true, true};
  for (size_t i = 0; i < v.size(); ++i) {
    INFO(i);
    if (keep[i]) CHECK(out[i] == v[i]);
    else CHECK(out[i] == 0.0f);
  }
  // On gaussian data the kept set is exactly the reference set, whatever its size.
  auto g = gaussian(5000, 9);
  Tensor gt = make_tensor("g", {50, 100}, g);
  for (double tau : {0.0, 0.1, 1.0, 2.5, 10.0}) {
    INFO("tau = " << tau);
    RoundTrip r = roundtrip("threshold(tau=" + format_number(tau, ParamType::Float) + ")", gt);
    auto o = values_of(r.decoded);
    size_t expect = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      const bool in = std::fabs(double(g[i])) >= tau;
      REQUIRE(o[i] == (in ? g[i] : 0.0f));
      expect += in;
    }
    CHECK(r.streams.get("value").size() == 4 * expect);  // exactly the kept values travel
    if (tau >= 10.0) CHECK(expect == 0);
    if (tau == 0.0) CHECK(expect == g.size());
  }
}

TEST_CASE("threshold keeps f16/f64 values bit-exact and handles empty tensors", "[threshold]") {
  auto g = gaussian(300, 2);
  std::vector<uint8_t> bytes(300 * 8);
  from_f32(g.data(), 300, DType::F64, bytes.data());
  Tensor t = make_tensor("d", {300}, g);
  t.info.dtype = DType::F64;
  t.data = Buffer(bytes);
  RoundTrip r = roundtrip("threshold(tau=1)", t);
  for (size_t i = 0; i < 300; ++i) {
    double in, out;
    std::memcpy(&in, bytes.data() + 8 * i, 8);
    std::memcpy(&out, r.decoded.data.data() + 8 * i, 8);
    REQUIRE(out == (std::fabs(in) >= 1.0 ? in : 0.0));
  }
  Tensor e = make_tensor("e", {0}, {});
  CHECK(roundtrip("threshold(tau=1)", e).decoded.data.size() == 0);
}

TEST_CASE("threshold needs a tau >= 0", "[threshold]") {
  CHECK_THROWS_WITH(Pipeline::parse("threshold"), Catch::Contains("threshold: missing parameter 'tau'"));
  CHECK_THROWS_WITH(Pipeline::parse("threshold(tau=-1)"), Catch::Contains("out of range"));
}
