// SPDX-License-Identifier: BSD-3-Clause
// The codec: lossless is bit-exact for every dtype including NaN/Inf bit patterns; raw fallback
// never grows a tensor; 0-d and empty tensors; big-endian flags survive.
#include <catch2/catch.hpp>

#include "support.hpp"

#include <cmath>
#include <limits>

using namespace gradcodec;
using namespace gradcodec::test;

namespace {
Tensor bytes_tensor(const std::string& name, DType dt, std::vector<uint64_t> shape, std::vector<uint8_t> bytes) {
  Tensor t;
  t.info.name = name;
  t.info.dtype = dt;
  t.info.shape = std::move(shape);
  t.data = Buffer(std::move(bytes));
  return t;
}
// Random bit patterns (every class of float: NaN payloads, Inf, subnormals, -0) of a dtype.
Tensor random_bits(DType dt, size_t n, uint64_t seed) {
  Rng r(seed);
  std::vector<uint8_t> b(n * dtype_size(dt));
  for (auto& x : b) x = static_cast<uint8_t>(r.next_u64());
  return bytes_tensor("bits", dt, {n}, b);
}
}  // namespace

TEST_CASE("lossless preset is bit-exact for every dtype, NaN and Inf patterns included", "[codec]") {
  for (DType dt : {DType::F16, DType::BF16, DType::F32, DType::F64}) {
    INFO(dtype_name(dt));
    Tensor t = random_bits(dt, 5000, static_cast<uint64_t>(dt));
    RoundTrip r = roundtrip(Pipeline::preset("lossless").text(), t);
    REQUIRE(r.decoded.data.size() == t.data.size());
    CHECK(std::memcmp(r.decoded.data.data(), t.data.data(), t.data.size()) == 0);
  }
  // explicit specials in f32 and f64
  std::vector<float> f = {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(), 1.5f};
  uint32_t payload_nan = 0x7fa12345;
  std::memcpy(&f[4], &payload_nan, 4);
  Tensor t = make_tensor("specials", {7}, f);
  RoundTrip r = roundtrip("zstd", t);
  CHECK(std::memcmp(r.decoded.data.data(), t.data.data(), t.data.size()) == 0);
}

TEST_CASE("0-d and empty tensors round-trip", "[codec]") {
  Tensor scalar = make_tensor("s", {}, {3.25f});
  RoundTrip a = roundtrip("zstd", scalar);
  CHECK(a.decoded.info.shape.empty());
  CHECK(values_of(a.decoded) == std::vector<float>{3.25f});
  Tensor empty = make_tensor("e", {3, 0, 2}, {});
  RoundTrip b = roundtrip("fp16 | zstd", empty);
  CHECK(b.decoded.info.shape == std::vector<uint64_t>{3, 0, 2});
  CHECK(b.decoded.data.size() == 0);
}

TEST_CASE("f64 lossless keeps every bit, lossy f64 decodes back to f64", "[codec]") {
  Tensor t = random_bits(DType::F64, 1000, 9);
  RoundTrip r = roundtrip("shuffle | zstd", t);
  CHECK(std::memcmp(r.decoded.data.data(), t.data.data(), t.data.size()) == 0);
  std::vector<double> v(100);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.001 * double(i);
  std::vector<uint8_t> bytes(800);
  std::memcpy(bytes.data(), v.data(), 800);
  Tensor d = bytes_tensor("d", DType::F64, {100}, bytes);
  RoundTrip h = roundtrip("fp16", d);
  CHECK(h.decoded.dtype() == DType::F64);
  auto out = values_of(h.decoded);
  for (size_t i = 0; i < v.size(); ++i) CHECK(std::fabs(out[i] - v[i]) <= 1e-3 * std::fabs(v[i]) + 1e-7);
}

TEST_CASE("count_nonfinite counts NaN and Inf patterns of every dtype, and nothing else", "[codec]") {
  // Per dtype: a NaN, +Inf, -Inf, the largest finite, -0 and a subnormal, little-endian words.
  auto words16 = [](std::vector<uint16_t> w) {
    std::vector<uint8_t> b(w.size() * 2);
    std::memcpy(b.data(), w.data(), b.size());
    return b;
  };
  CHECK(count_nonfinite(bytes_tensor("h", DType::F16, {6}, words16({0x7e00, 0x7c00, 0xfc00, 0x7bff, 0x8000, 0x0001}))) == 3);
  CHECK(count_nonfinite(bytes_tensor("b", DType::BF16, {6}, words16({0x7fc1, 0x7f80, 0xff80, 0x7f7f, 0x8000, 0x0001}))) == 3);
  std::vector<float> f = {std::nanf(""), std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::max(), -0.0f, std::numeric_limits<float>::denorm_min()};
  std::vector<uint8_t> fb(f.size() * 4);
  std::memcpy(fb.data(), f.data(), fb.size());
  CHECK(count_nonfinite(bytes_tensor("f", DType::F32, {6}, fb)) == 3);
  std::vector<double> d = {std::nan(""), std::numeric_limits<double>::infinity(), std::numeric_limits<double>::max(), 1.0};
  std::vector<uint8_t> db(d.size() * 8);
  std::memcpy(db.data(), d.data(), db.size());
  CHECK(count_nonfinite(bytes_tensor("d", DType::F64, {4}, db)) == 2);
  CHECK(count_nonfinite(bytes_tensor("o", DType::Other, {4}, std::vector<uint8_t>(4, 0xff))) == 0);
  CHECK(count_nonfinite(bytes_tensor("e", DType::F32, {0}, {})) == 0);
}

TEST_CASE("count_beyond_f32: finite f64 values float32 cannot hold, and nothing else", "[codec]") {
  const double fmax = std::numeric_limits<float>::max();
  std::vector<double> d = {fmax, -fmax, std::nextafter(fmax, 1e300), -1e39, std::numeric_limits<double>::max(),
                           std::numeric_limits<double>::infinity(), std::nan(""), 1.0, 0.0};
  std::vector<uint8_t> db(d.size() * 8);
  std::memcpy(db.data(), d.data(), db.size());
  CHECK(count_beyond_f32(bytes_tensor("d", DType::F64, {d.size()}, db)) == 3);  // next(fmax), -1e39, DBL_MAX
  std::vector<float> f = {std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity()};
  std::vector<uint8_t> fb(f.size() * 4);
  std::memcpy(fb.data(), f.data(), fb.size());
  CHECK(count_beyond_f32(bytes_tensor("f", DType::F32, {2}, fb)) == 0);
  CHECK(count_beyond_f32(bytes_tensor("e", DType::F64, {0}, {})) == 0);
}
