// SPDX-License-Identifier: BSD-3-Clause
// zfp and fpzip: fixed-rate sizes, lossless modes bit-exact, error bounds of the lossy modes,
// refused streams, determinism, parameter checks (docs/stages.md "zfp", "fpzip").
#include <catch2/catch.hpp>

#include "stages/quantize_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

using namespace gradcodec;
using namespace gradcodec::test;

namespace {

std::vector<uint32_t> bits_of(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  if (!v.empty()) std::memcpy(b.data(), v.data(), 4 * v.size());
  return b;
}
// Shortest text that parses back to the same double (std::to_string would print 1e-7 as 0.000000).
std::string num(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.17g", x);
  return b;
}
double rms_err(const std::vector<float>& a, const std::vector<float>& b) {
  return std::sqrt(sq_dist(a, b) / static_cast<double>(a.size()));
}
double max_abs_err(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}
ErrorCode decode_code(Quantizer& q, const Streams& s, const TensorInfo& info) {
  try {
    decode_with(q, s, info, false, {}, 1, false, 1);
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::Internal;  // not refused: the caller expects Corrupt
}

}  // namespace

TEST_CASE("zfp fixed rate: ceil(blocks * round(4*rate) / 8) bytes, error shrinking with the rate", "[quantize][zfp]") {
  const auto v = gaussian(1001, 3, 1e-3f);  // 251 blocks, the last one partial
  double last = 1e300;
  for (double rate : {2.25, 2.6, 4.0, 6.0, 8.0, 13.75, 16.0}) {
    INFO("rate=" << rate);
    Coded c = code_dense("zfp(mode=rate, rate=" + num(rate) + ")", make_tensor("w", {1001}, v));
    const uint64_t bits_per_block = static_cast<uint64_t>(std::floor(4 * rate + 0.5));
    CHECK(c.bytes("value") == (251 * bits_per_block + 7) / 8);
    REQUIRE(c.decoded.size() == v.size());
    if (rate < 4) continue;  // below, a block keeps too few bits for the error to tell rates apart
    const double err = rms_err(c.decoded, v);
    CHECK(err < last);
    last = err;
  }
  CHECK(last < 1e-3 * 0x1p-10);  // 16 bits per value on values of σ = 1e-3
}

TEST_CASE("zfp fixed accuracy: every error within the tolerance", "[quantize][zfp]") {
  const auto v = gaussian(4099, 5, 1e-2f);
  for (double tol : {1e-3, 1e-5, 1e-7}) {
    INFO("tolerance=" << tol);
    Coded c = code_dense("zfp(mode=accuracy, tolerance=" + num(tol) + ")", make_tensor("w", {4099}, v));
    CHECK(max_abs_err(c.decoded, v) <= tol);
  }
}

TEST_CASE("zfp fixed precision and fpzip reduced precision: relative error bounds", "[quantize][zfp][fpzip]") {
  const auto v = gaussian(4096, 7, 1e-3f);
  double vmax = 0;
  for (float x : v) vmax = std::max(vmax, double(std::fabs(x)));
  for (unsigned p : {8u, 12u, 16u, 24u}) {
    INFO("precision=" << p);
    // zfp: p bit planes of the block's integers, aligned to the block's largest exponent, and the
    // transform's small gain: within 2^(4-p) of the largest magnitude.
    Coded z = code_dense("zfp(mode=precision, precision=" + std::to_string(p) + ")", make_tensor("w", {4096}, v));
    CHECK(max_abs_err(z.decoded, v) <= vmax * std::ldexp(1.0, 4 - int(p)));
    // fpzip keeps the leading p bits (1 sign + 8 exponent + p-9 mantissa): each value within one
    // unit of its last kept mantissa bit.
    Coded f = code_dense("fpzip(precision=" + std::to_string(p + 8) + ")", make_tensor("w", {4096}, v));
    for (size_t i = 0; i < v.size(); ++i)
      REQUIRE(std::fabs(double(f.decoded[i]) - v[i]) <= std::fabs(double(v[i])) * std::ldexp(1.0, 9 - int(p + 8)));
  }
}

TEST_CASE("zfp reversible and fpzip lossless are bit-exact, -0 and subnormals included", "[quantize][zfp][fpzip]") {
  auto v = gaussian(70001, 11, 1e-3f);  // fpzip: two chunks of 65536 values
  v[0] = -0.0f, v[1] = 0.0f, v[2] = std::numeric_limits<float>::denorm_min(), v[3] = -1e-40f;
  v[4] = std::numeric_limits<float>::max(), v[5] = -std::numeric_limits<float>::min(), v[70000] = 3e38f;
  for (const char* text : {"zfp(mode=reversible)", "fpzip", "fpzip(precision=32)"}) {
    INFO(text);
    Coded c = code_dense(text, make_tensor("w", {70001}, v));
    CHECK(bits_of(c.decoded) == bits_of(v));
    CHECK(c.bytes("value") < 70001 * 4 * 1.01);  // Gaussian mantissas hardly compress
  }
}

TEST_CASE("zfp and fpzip: deterministic, empty, a single value", "[quantize][zfp][fpzip]") {
  const auto v = gaussian(999, 13, 1e-3f);
  for (const char* text : {"zfp(mode=rate, rate=4)", "zfp(mode=accuracy, tolerance=1e-5)", "zfp(mode=precision, precision=10)",
                           "zfp(mode=reversible)", "fpzip", "fpzip(precision=16)"}) {
    INFO(text);
    Coded a = code_dense(text, make_tensor("w", {999}, v)), b = code_dense(text, make_tensor("w", {999}, v));
    CHECK(a.streams.find("value")->bytes == b.streams.find("value")->bytes);
    CHECK(a.decoded == b.decoded);
    Coded e = code_dense(text, make_tensor("e", {0}, {}));
    CHECK(e.decoded.empty());
    CHECK(e.bytes("value") == 0);
    CHECK(code_dense(text, make_tensor("s", {}, {0.25f})).decoded.size() == 1);
  }
}

TEST_CASE("zfp and fpzip refuse cut, extended and altered streams as Corrupt", "[quantize][zfp][fpzip]") {
  Tensor t = make_tensor("w", {1000}, gaussian(1000, 17, 1e-3f));
  for (const char* text : {"zfp(mode=rate, rate=8)", "zfp(mode=accuracy, tolerance=1e-6)", "zfp(mode=reversible)", "fpzip",
                           "fpzip(precision=20)"}) {
    INFO(text);
    auto q = make_quantizer(text);
    Payload p;
    p.source = &t, p.info = &t.info, p.n = 1000;
    Streams s;
    q->encode(p, s, quant_ctx(t.info, 1));
    Streams bad = s;
    bad.find("value")->bytes.pop_back();
    CHECK(decode_code(*q, bad, t.info) == ErrorCode::Corrupt);
    bad = s;
    bad.find("value")->bytes.push_back(0);
    CHECK(decode_code(*q, bad, t.info) == ErrorCode::Corrupt);
    bad = s;
    bad.find("value")->bytes.resize(bad.find("value")->bytes.size() / 2);
    CHECK(decode_code(*q, bad, t.info) == ErrorCode::Corrupt);
    bad = s;
    bad.find("value")->bytes.clear();
    CHECK(decode_code(*q, bad, t.info) == ErrorCode::Corrupt);
  }
  // fpzip: one flipped bit anywhere fails the stream's hash before fpzip reads it.
  auto q = make_quantizer("fpzip");
  Payload p;
  p.source = &t, p.info = &t.info, p.n = 1000;
  Streams s;
  q->encode(p, s, quant_ctx(t.info, 1));
  for (size_t i : {size_t{0}, size_t{9}, size_t{12}, s.find("value")->bytes.size() - 1}) {
    Streams bad = s;
    bad.find("value")->bytes[i] ^= 0x10;
    CHECK(decode_code(*q, bad, t.info) == ErrorCode::Corrupt);
  }
}

TEST_CASE("zfp and fpzip parameters: the mode's own, in range", "[quantize][zfp][fpzip]") {
  auto usage = [](const std::string& text) {
    try {
      make_quantizer(text);
    } catch (const Error& e) {
      return e.code() == ErrorCode::Usage;
    }
    return false;
  };
  CHECK(usage("zfp(mode=rate)"));
  CHECK(usage("zfp(mode=rate, rate=4, tolerance=1e-3)"));
  CHECK(usage("zfp(mode=accuracy, rate=4)"));
  CHECK(usage("zfp(mode=reversible, precision=8)"));
  CHECK(usage("zfp(mode=rate, rate=2)"));
  CHECK(usage("zfp(mode=precision, precision=33)"));
  CHECK(usage("zfp(mode=accuracy, tolerance=0)"));
  CHECK(usage("fpzip(precision=1)"));
  CHECK(usage("fpzip(precision=33)"));
  CHECK_FALSE(usage("zfp(mode=precision, precision=32)"));
  CHECK_FALSE(usage("fpzip(precision=2)"));
}

TEST_CASE("zfp reversible and fpzip lossless keep +-Inf and NaN payloads bit for bit (stage level)", "[quantize][zfp][fpzip]") {
  // The codec refuses or stores raw a tensor holding NaN/Inf for these pipelines (--nonfinite):
  // this is the stages' own behaviour, for values that reach them after a transform.
  std::vector<float> v = gaussian(16, 3, 1e-3f);
  v[1] = std::numeric_limits<float>::infinity(), v[2] = -std::numeric_limits<float>::infinity();
  v[3] = std::numeric_limits<float>::quiet_NaN();
  const uint32_t payload = 0xffc01234;  // a negative quiet NaN with a payload
  std::memcpy(&v[9], &payload, 4);
  for (const char* text : {"zfp(mode=reversible)", "fpzip"}) {
    INFO(text);
    CHECK(bits_of(code_dense(text, make_tensor("w", {16}, v)).decoded) == bits_of(v));
  }
}
