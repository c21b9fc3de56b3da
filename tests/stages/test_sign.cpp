// SPDX-License-Identifier: BSD-3-Clause
// sign: exact after values that share one magnitude, EF-signSGD's ||g||_1/d, sign(0) = +1,
// 1 bit per value + one f32 scale, corrupt streams.
#include <catch2/catch.hpp>

#include "stages/quantize_support.hpp"

#include <cmath>

using namespace gradcodec;
using namespace gradcodec::test;

namespace {
float scale_of(const Coded& c) {
  const Stream* s = c.streams.find("scale");
  REQUIRE(s);
  REQUIRE(s->bytes.size() == 4);
  float f;
  std::memcpy(&f, s->bytes.data(), 4);
  return f;
}
// ±c in a fixed pattern, no zeros.
std::vector<float> plus_minus(size_t n, float c) {
  std::vector<float> v(n);
  Rng r(77);
  for (auto& x : v) x = (r.next_u64() & 1) ? c : -c;
  return v;
}
}  // namespace

TEST_CASE("sign is exact on values that share one magnitude", "[quantize][sign]") {
  SECTION("dense +-c") {
    const auto v = plus_minus(1001, 0.0123f);
    Coded c = code_dense("sign", make_tensor("w", {7, 11, 13}, v));
    CHECK(c.decoded == v);
  }
  SECTION("dense +-c across the decoder's 2048-value chunks and its small-tensor path") {
    for (size_t n : {511, 512, 513, 2047, 2048, 2049, 4099, 20001}) {
      INFO("n=" << n);
      const auto v = plus_minus(n, 2.5f);
      Coded c = code_dense("sign", make_tensor("w", {n}, v));
      CHECK(c.decoded == v);
    }
  }
  SECTION("a sparsifier's kept values +-S (BIRD's sign(t)*S)") {
    SparseInput in;
    in.n = 10000;
    for (uint64_t i = 0; i < 300; ++i) in.index.push_back(31 * i + 5);
    in.values = plus_minus(300, 3.0e-4f);
    Coded c = code_sparse("sign", in);
    CHECK(c.decoded == in.values);
    CHECK(c.index == in.index);
  }
  SECTION("every registered sparsifier on a +-c tensor") {
    // The kept values of any selecting sparsifier of a ±c tensor share the magnitude c (or a
    // computed one, like BIRD's S): "S | sign" must decode exactly as "S | raw" does.
    Tensor t = make_tensor("layer.weight", {16, 8, 3, 3}, plus_minus(16 * 8 * 9, 0.5f));
    int tried = 0;
    for (const auto& e : stage_table()) {
      if (e.kind != StageKind::Sparsifier) continue;
      std::string sp = e.example;
      sp = sp.substr(0, sp.find('|'));  // the example's first stage is the sparsifier
      if (sp.rfind(e.name, 0) != 0) continue;
      INFO(sp);
      RoundTrip a = roundtrip(sp + " | raw", t, 3), b = roundtrip(sp + " | sign", t, 3);
      CHECK(values_of(a.decoded) == values_of(b.decoded));
      ++tried;
    }
    WARN("sparsifiers checked: " << tried);
  }
}

TEST_CASE("sign(scale=l1) sends EF-signSGD's ||g||_1/d", "[quantize][sign]") {
  const auto g = gaussian(4097, 6, 0.01f);
  double l1 = 0;
  for (float x : g) l1 += std::fabs(double(x));
  Coded c = code_dense("sign(scale=l1)", make_tensor("w", {4097}, g));
  CHECK(scale_of(c) == static_cast<float>(l1 / 4097));  // computed in double, rounded once
  for (size_t i = 0; i < g.size(); ++i) REQUIRE(c.decoded[i] == (g[i] < 0 ? -1 : 1) * scale_of(c));
  // After a sparsifier d is still the tensor's element count: dropped values count as zeros.
  SparseInput in;
  in.n = 50000;
  for (uint64_t i = 0; i < 4097; ++i) in.index.push_back(12 * i);
  in.values = g;
  Coded s = code_sparse("sign(scale=l1)", in);
  CHECK(scale_of(s) == static_cast<float>(l1 / 50000));
  Coded m = code_sparse("sign(scale=mean)", in);
  CHECK(scale_of(m) == static_cast<float>(l1 / 4097));
}

TEST_CASE("sign of 0 is +1: zeros (and -0) decode to +scale", "[quantize][sign]") {
  std::vector<float> v = {0.0f, -0.0f, 2.0f, -4.0f, 0.0f};
  Coded mean = code_dense("sign", make_tensor("w", {5}, v));
  CHECK(scale_of(mean) == 1.2f);  // (0 + 0 + 2 + 4 + 0)/5
  CHECK(mean.decoded == std::vector<float>{1.2f, 1.2f, 1.2f, -1.2f, 1.2f});
  Coded none = code_dense("sign(scale=none)", make_tensor("w", {5}, v));
  CHECK_FALSE(none.has("scale"));
  CHECK(none.decoded == std::vector<float>{1, 1, 1, -1, 1});
  CHECK(none.streams.get("value")[0] == 0xe8);  // bits 1 1 1 0 1, then 3 zero padding bits
}

TEST_CASE("sign costs 1 bit per value plus one f32 scale", "[quantize][sign]") {
  for (size_t n : {0, 1, 7, 8, 9, 1000}) {
    Tensor t = make_tensor("w", {n}, gaussian(n, n));
    for (const char* text : {"sign", "sign(scale=l1)", "sign(scale=none)"}) {
      INFO(text << " n=" << n);
      Coded c = code_dense(text, t);
      CHECK(c.bytes("value") == (n + 7) / 8);
      CHECK(c.bytes("scale") == (std::string(text) == "sign(scale=none)" || n == 0 ? 0 : 4));
      CHECK(c.decoded.size() == n);
    }
  }
}

TEST_CASE("sign refuses streams of the wrong size", "[quantize][sign]") {
  Tensor t = make_tensor("w", {20}, gaussian(20, 1));
  auto q = make_quantizer("sign");
  Payload p;
  p.source = &t, p.info = &t.info, p.n = 20;
  Streams s;
  q->encode(p, s, quant_ctx(t.info, 1));
  Streams bad = s;
  bad.find("value")->bytes.push_back(0);
  CHECK_THROWS_AS(decode_with(*q, bad, t.info, false, {}, 1, false, 1), Error);
  Streams no_scale;
  no_scale.add("value").bytes = s.find("value")->bytes;
  CHECK_THROWS_AS(decode_with(*q, no_scale, t.info, false, {}, 1, false, 1), Error);
}
