// SPDX-License-Identifier: BSD-3-Clause
// fp16 / bf16: round to nearest even, special values, size = 2 bytes per value.
#include <catch2/catch.hpp>

#include "support.hpp"

#include <gradcodec/half.hpp>
#include <gradcodec/rng.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace gradcodec;
using namespace gradcodec::test;

TEST_CASE("f16 conversion: exact values, rounding to nearest even, overflow, subnormals", "[fp16]") {
  CHECK(f32_to_f16(1.0f) == 0x3c00);
  CHECK(f32_to_f16(-2.0f) == 0xc000);
  CHECK(f32_to_f16(65504.0f) == 0x7bff);
  CHECK(f32_to_f16(65520.0f) == 0x7c00);           // rounds up to Inf
  CHECK(f32_to_f16(1.0f + 0x1p-11f) == 0x3c00);    // tie -> even
  CHECK(f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02); // tie -> even (up)
  CHECK(f32_to_f16(0x1p-24f) == 0x0001);           // smallest subnormal
  CHECK(f32_to_f16(0x1p-25f) == 0x0000);           // tie -> even (zero)
  CHECK(f32_to_f16(-0.0f) == 0x8000);
  CHECK(f32_to_f16(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK((f32_to_f16(std::nanf("")) & 0x7c00) == 0x7c00);
  CHECK((f32_to_f16(std::nanf("")) & 0x03ff) != 0);
  // every f16 bit pattern survives f16 -> f32 -> f16 (NaN payloads included)
  for (uint32_t h = 0; h < 65536; ++h) REQUIRE(f32_to_f16(f16_to_f32(static_cast<uint16_t>(h))) == h);
  // the bulk conversion (a table, used by decoders and readers) gives f16_to_f32's bits for every
  // pattern, little-endian bytes at an odd address
  std::vector<uint8_t> bytes(1 + 2 * 65536);
  for (uint32_t h = 0; h < 65536; ++h) bytes[1 + 2 * h] = static_cast<uint8_t>(h), bytes[2 + 2 * h] = static_cast<uint8_t>(h >> 8);
  std::vector<float> bulk(65536);
  f16_to_f32_n(bytes.data() + 1, 65536, bulk.data());
  for (uint32_t h = 0; h < 65536; ++h) {
    const float one = f16_to_f32(static_cast<uint16_t>(h));
    REQUIRE(std::memcmp(&bulk[h], &one, 4) == 0);
  }
}

TEST_CASE("bf16 conversion rounds to nearest even and keeps NaN", "[fp16]") {
  CHECK(f32_to_bf16(1.0f) == 0x3f80);
  CHECK(f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80);      // tie -> even
  CHECK(f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82);  // tie -> even (up)
  uint16_t nan = f32_to_bf16(std::nanf(""));
  CHECK((nan & 0x7f80) == 0x7f80);
  CHECK((nan & 0x7f) != 0);
  for (uint32_t h = 0; h < 65536; ++h) {
    uint16_t b = static_cast<uint16_t>(h);
    float f = bf16_to_f32(b);
    if (std::isnan(f)) REQUIRE(std::isnan(bf16_to_f32(f32_to_bf16(f))));
    else REQUIRE(f32_to_bf16(f) == b);
  }
}

TEST_CASE("fp16 and bf16 stages: 2 bytes per value, relative error within half an ulp", "[fp16]") {
  auto v = gaussian(10000, 3);
  Tensor t = make_tensor("w", {100, 100}, v);
  for (const char* name : {"fp16", "bf16"}) {
    RoundTrip r = roundtrip(name, t);
    CHECK(r.streams.get("value").size() == 2 * v.size());
    auto out = values_of(r.decoded);
    const double half_ulp = std::string(name) == "fp16" ? 0x1p-11 : 0x1p-8;
    for (size_t i = 0; i < v.size(); ++i) {
      if (std::fabs(v[i]) < 1e-4) continue;  // f16 subnormal range
      REQUIRE(std::fabs(out[i] - v[i]) <= half_ulp * std::fabs(v[i]) * 1.0001);
    }
  }
}

TEST_CASE("f32_to_f16_n gives f32_to_f16's halves bit for bit (F16C where the CPU has it)", "[fp16]") {
  // Every half's f32 value and its f32 neighbours, the midpoints between consecutive halves and
  // their neighbours (ties and near-ties, subnormal ones included), values at the overflow
  // boundary, f32 subnormals, NaNs with quiet and signalling payloads (alone and inside groups
  // of eight), random bit patterns; converted at several offsets so that the groups of eight and
  // the tails shift. (Letting NaN groups through the CPU's conversion fails: it sets the quiet bit.)
  std::vector<float> x;
  auto bits = [](uint32_t u) { return std::bit_cast<float>(u); };
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    x.push_back(f);
    if (std::isnan(f)) continue;
    x.push_back(std::nextafter(f, -std::numeric_limits<float>::infinity()));
    x.push_back(std::nextafter(f, std::numeric_limits<float>::infinity()));
    if ((h & 0x7fff) < 0x7bff) {  // the midpoint with the next half of the same sign
      const float mid = (f + f16_to_f32(static_cast<uint16_t>(h + 1))) / 2;
      x.push_back(mid);
      x.push_back(std::nextafter(mid, 0.0f));
      x.push_back(std::nextafter(mid, 2 * mid));
    }
  }
  for (float f : {65504.0f, 65519.0f, 65519.996f, 65520.0f, 65536.0f, 1e30f, 0x1p-25f, 0x1p-26f, 0x1.8p-25f,
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min()}) {
    x.push_back(f);
    x.push_back(-f);
  }
  for (uint32_t u : {0x7f800001u, 0x7f810000u, 0x7fa00000u, 0x7fc00000u, 0x7fc01234u, 0xff800001u, 0xffc00001u,
                     0x7f802000u, 0xffffffffu})
    x.push_back(bits(u));
  Rng r(16);
  for (int i = 0; i < 200000; ++i) x.push_back(bits(static_cast<uint32_t>(r.next_u64())));
  for (size_t offset : {size_t{0}, size_t{1}, size_t{5}}) {
    INFO("offset " << offset);
    const size_t n = x.size() - offset;
    std::vector<uint8_t> a(2 * n + 2, 0xAB), b(2 * n + 2, 0xAB);
    f32_to_f16_n(x.data() + offset, n, a.data());
    f32_to_f16_n_portable(x.data() + offset, n, b.data());
    REQUIRE(a == b);  // the sentinel past the end too
    for (size_t i = 0; i < n; i += 997) {
      uint16_t h;
      std::memcpy(&h, b.data() + 2 * i, 2);
      REQUIRE(h == f32_to_f16(x[offset + i]));
    }
  }
}
