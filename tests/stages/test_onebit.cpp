// SPDX-License-Identifier: BSD-3-Clause
// onebit: each value decodes to the mean of its group's values with the same bit — per column of
// the [shape[0], rest] view, or per tensor; 1 bit per value + 2 f32 per group; corrupt streams.
#include <catch2/catch.hpp>

#include "stages/quantize_support.hpp"

using namespace gradcodec;
using namespace gradcodec::test;

namespace {
// The reference: group g(i) of value i; decoded = f32(mean in double of the same-bit values).
std::vector<float> reference(const std::vector<float>& v, size_t groups) {
  std::vector<double> sum(2 * groups, 0);
  std::vector<double> num(2 * groups, 0);
  for (size_t i = 0; i < v.size(); ++i) {
    const size_t k = 2 * (i % groups) + (v[i] < 0 ? 0 : 1);
    sum[k] += v[i];
    num[k] += 1;
  }
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const size_t k = 2 * (i % groups) + (v[i] < 0 ? 0 : 1);
    out[i] = static_cast<float>(sum[k] / num[k]);
  }
  return out;
}
}  // namespace

TEST_CASE("onebit decodes each value to its column's mean of same-bit values", "[quantize][onebit]") {
  // [4, 3]: column j holds elements j, 3 + j, 6 + j, 9 + j.
  const std::vector<float> m = {1.0f, -2.0f, 0.5f,   //
                                3.0f, -4.0f, -0.5f,  //
                                -1.0f, 6.0f, 0.0f,   //
                                -3.0f, -8.0f, 2.0f};
  Coded c = code_dense("onebit", make_tensor("w", {4, 3}, m));
  const std::vector<float> expected = {2.0f,  -14.0f / 3, 2.5f / 3,  //
                                       2.0f,  -14.0f / 3, -0.5f,     //
                                       -2.0f, 6.0f,       2.5f / 3,  //
                                       -2.0f, -14.0f / 3, 2.5f / 3};
  CHECK(c.decoded == reference(m, 3));
  for (size_t i = 0; i < m.size(); ++i) CHECK(c.decoded[i] == Approx(expected[i]).epsilon(1e-6));
  CHECK(c.bytes("value") == 2);       // 12 bits
  CHECK(c.bytes("scale") == 3 * 8);   // (μ0, μ1) per column
}

TEST_CASE("onebit groups: columns of [shape[0], rest], else the whole tensor", "[quantize][onebit]") {
  const auto v = gaussian(4 * 2 * 3 * 3, 12);
  SECTION("conv weight [4, 2, 3, 3]: 18 columns of 4") {
    Coded c = code_dense("onebit", make_tensor("w", {4, 2, 3, 3}, v));
    CHECK(c.decoded == reference(v, 18));
    CHECK(c.bytes("scale") == 18 * 8);
    CHECK(c.bytes("value") == (v.size() + 7) / 8);
  }
  SECTION("per=tensor (GRACE)") {
    Coded c = code_dense("onebit(per=tensor)", make_tensor("w", {4, 2, 3, 3}, v));
    CHECK(c.decoded == reference(v, 1));
    CHECK(c.bytes("scale") == 8);
  }
  SECTION("1-D and 0-d tensors are one group") {
    CHECK(code_dense("onebit", make_tensor("b", {v.size()}, v)).decoded == reference(v, 1));
    CHECK(code_dense("onebit", make_tensor("s", {}, {-3.5f})).decoded == std::vector<float>{-3.5f});
  }
  SECTION("a sparsifier's kept values are one group") {
    SparseInput in;
    in.n = 1000;
    for (uint64_t i = 0; i < v.size(); ++i) in.index.push_back(3 * i);
    in.values = v;
    Coded c = code_sparse("onebit", in);
    CHECK(c.decoded == reference(v, 1));
  }
  SECTION("an empty side is sent as mean 0; 0 counts as non-negative") {
    Coded c = code_dense("onebit", make_tensor("w", {2, 2}, {1.0f, 0.0f, 3.0f, -1.0f}));
    CHECK(c.decoded == std::vector<float>{2.0f, 0.0f, 2.0f, -1.0f});
    std::vector<float> means(4);
    std::memcpy(means.data(), c.streams.get("scale").data(), 16);
    CHECK(means == std::vector<float>{0.0f, 2.0f, -1.0f, 0.0f});  // column 0: (μ0, μ1), column 1
  }
}

TEST_CASE("onebit refuses streams of the wrong size", "[quantize][onebit]") {
  Tensor t = make_tensor("w", {6, 5}, gaussian(30, 1));
  auto q = make_quantizer("onebit");
  Payload p;
  p.source = &t, p.info = &t.info, p.n = 30;
  Streams s;
  q->encode(p, s, quant_ctx(t.info, 1));
  Streams bad = s;
  bad.find("scale")->bytes.resize(8);  // one column's means instead of five
  CHECK_THROWS_AS(decode_with(*q, bad, t.info, false, {}, 1, false, 1), Error);
  bad = s;
  bad.find("value")->bytes.pop_back();
  CHECK_THROWS_AS(decode_with(*q, bad, t.info, false, {}, 1, false, 1), Error);
}
