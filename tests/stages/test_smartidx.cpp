// SPDX-License-Identifier: BSD-3-Clause
// smartidx (docs/stages.md "smartidx"): exact wire sizes of the package stream on a constructed
// conv weight, round trips equal to an independent top-k + kernel promotion, the sign pattern
// restoring kernel signs (−0 included), Rice codes of known gaps, determinism, non-conv tensors
// as plain individual packages, and refusal of corrupt package streams.
#include <catch2/catch.hpp>

#include "index/golomb.hpp"
#include "sparsify/smartidx.hpp"
#include "support.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace gradcodec;
using namespace gradcodec::stages;
using namespace gradcodec::test;

namespace {

// The tensor smartidx's decoder must rebuild, computed apart from the stage: a full sort by
// (|v| descending, index ascending) for the top-k, then kernels of m with at least
// ceil(kernel·m) selected elements sent whole.
std::vector<float> expected(const std::vector<float>& v, uint64_t m, uint64_t k, double kernel) {
  std::vector<uint64_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](uint64_t a, uint64_t b) { return std::fabs(v[a]) > std::fabs(v[b]); });
  std::vector<char> sel(v.size(), 0);
  for (uint64_t i = 0; i < k; ++i) sel[order[i]] = 1;
  std::vector<float> out(v.size(), 0.0f);
  const auto need = static_cast<uint64_t>(std::ceil(kernel * static_cast<double>(m)));
  for (uint64_t j = 0; j * m < v.size(); ++j) {
    uint64_t c = 0;
    for (uint64_t e = 0; e < m; ++e) c += sel[j * m + e];
    for (uint64_t e = 0; e < m; ++e)
      if (sel[j * m + e] || (m > 1 && c >= need)) out[j * m + e] = v[j * m + e];
  }
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// [4, 1, 3, 3]: kernels 0 and 2 large with one sign pattern (−0 in kernel 0), kernel 1 one large
// element (13), kernel 3 small.
std::vector<float> four_kernels() {
  const float sgn[9] = {1, -1, 1, -1, -1, 1, 1, 1, -1};
  std::vector<float> v(36);
  for (int e = 0; e < 9; ++e) {
    v[e] = sgn[e] * (10.0f + static_cast<float>(e));
    v[18 + e] = sgn[e] * (20.0f + static_cast<float>(e));
    v[9 + e] = 0.01f * static_cast<float>(e + 1);
    v[27 + e] = -0.02f * static_cast<float>(e + 1);
  }
  v[13] = 5.0f;
  return v;
}

}  // namespace

TEST_CASE("smartidx: two kernels with one sign pattern make one pattern package; exact bytes", "[smartidx]") {
  std::vector<float> v = four_kernels();
  Tensor t = make_tensor("conv.weight", {4, 1, 3, 3}, v);
  const SmartIdxPackages pk = smartidx_select(v, t.info.shape, 19, 0.5);
  CHECK(pk.m == 9);
  CHECK(pk.kernels == 4);
  CHECK(pk.individual == std::vector<uint64_t>{13});
  REQUIRE(pk.patterns.size() == 1);
  CHECK(pk.patterns[0].kernels == std::vector<uint64_t>{0, 2});
  CHECK(pk.patterns[0].negative == std::vector<uint8_t>{0, 1, 0, 1, 1, 0, 0, 0, 1});
  // Header: LEB128 1, b_i, LEB128 1 (P), LEB128 2 (c), b_p = 5 bytes. Bits: gap 13 with b_i = 5
  // (q = 0: '1' + 5 bits = 6), the 9 pattern bits, kernel gaps 0 and 1 with b_p = 0 ('1', '01'):
  // 6 + 9 + 1 + 2 = 18 bits = 3 bytes.
  CHECK(golomb_parameter(36, 1) == 5);
  CHECK(golomb_parameter(4, 2) == 0);
  CHECK(smartidx_bits(pk, 36) == 5 * 8 + 18);
  RoundTrip r = roundtrip("smartidx(k=19)", t);
  REQUIRE(r.streams.find("index"));
  CHECK(r.streams.find("index")->bytes.size() == 8);
  CHECK(r.streams.find("value")->bytes.size() == 19 * 4);
  CHECK(r.stream_bytes == 8 + 19 * 4);
  const std::vector<uint8_t> want = {0x01, 0x05, 0x01, 0x02, 0x00,
                                     // 101101 010110001 1 01 + 000000 padding
                                     0b10110101, 0b01100011, 0b01000000};
  CHECK(r.streams.find("index")->bytes == want);
  CHECK(same_bits(values_of(r.decoded), expected(v, 9, 19, 0.5)));
}

TEST_CASE("smartidx: a promoted kernel sends its unselected elements; signs come back, -0 too", "[smartidx]") {
  std::vector<float> v = four_kernels();
  v[1] = -0.0f;  // kernel 0's pattern bit 1 is set (signbit), its magnitude is 0
  for (int e = 0; e < 5; ++e) v[27 + e] = -3.0f - static_cast<float>(e);  // 5 of 9: promoted at 0.5
  Tensor t = make_tensor("conv.weight", {4, 1, 3, 3}, v);
  // Top 23: kernel 2 (9), kernel 0 without its −0 (8), element 13, kernel 3's five (−3..−7).
  RoundTrip r = roundtrip("smartidx(k=23)", t);
  const auto want = expected(v, 9, 23, 0.5);
  CHECK(same_bits(values_of(r.decoded), want));
  CHECK(std::signbit(values_of(r.decoded)[1]) == std::signbit(want[1]));
  // Kernel 3 went whole: its 4 small unselected elements are decoded as well.
  for (int e = 5; e < 9; ++e) CHECK(values_of(r.decoded)[27 + e] == v[27 + e]);
  // At kernel=0.6 (6 of 9 needed) kernel 3 stays individual: the small ones are dropped.
  RoundTrip r6 = roundtrip("smartidx(k=23, kernel=0.6)", t);
  CHECK(same_bits(values_of(r6.decoded), expected(v, 9, 23, 0.6)));
  for (int e = 5; e < 9; ++e) CHECK(values_of(r6.decoded)[27 + e] == 0.0f);
}

TEST_CASE("smartidx round trips equal top-k with kernel promotion on random conv weights", "[smartidx]") {
  for (uint64_t seed : {1u, 2u, 3u}) {
    for (double kernel : {0.3, 0.5, 1.0}) {
      INFO("seed " << seed << " kernel " << kernel);
      const std::vector<uint64_t> shape = {8, 6, 3, 3};
      auto v = gaussian(432, seed);
      Tensor t = make_tensor("conv.weight", shape, v);
      const std::string text = "smartidx(ratio=0.25, kernel=" + std::to_string(kernel) + ")";
      RoundTrip r = roundtrip(text, t, seed);
      CHECK(same_bits(values_of(r.decoded), expected(v, 9, 108, kernel)));
      const SmartIdxPackages pk = smartidx_select(v, shape, 108, kernel);
      CHECK(r.streams.find("index")->bytes.size() == (smartidx_bits(pk, 432) + 7) / 8);
      uint64_t values = pk.individual.size();
      for (const auto& p : pk.patterns) values += p.kernels.size() * 9;
      CHECK(r.streams.find("value")->bytes.size() == values * 4);
      // Deterministic: the same bytes on a second run and under another seed.
      RoundTrip again = roundtrip(text, t, seed + 100);
      CHECK(again.streams.find("index")->bytes == r.streams.find("index")->bytes);
      CHECK(again.streams.find("value")->bytes == r.streams.find("value")->bytes);
    }
  }
}

TEST_CASE("smartidx on non-conv tensors: individual packages only, the golomb code plus one byte", "[smartidx]") {
  for (const std::vector<uint64_t>& shape : std::vector<std::vector<uint64_t>>{{64, 50}, {3200}, {8, 400, 1, 1}}) {
    auto v = gaussian(3200, 9);
    Tensor t = make_tensor("fc.weight", shape, v);
    RoundTrip s = roundtrip("smartidx(ratio=0.01)", t);
    RoundTrip g = roundtrip("topk(ratio=0.01) | golomb", t);
    CHECK(values_of(s.decoded) == values_of(g.decoded));
    // The same Rice code of the same gaps; smartidx adds LEB128 P = 0.
    CHECK(s.streams.find("index")->bytes.size() == g.streams.find("index")->bytes.size() + 1);
  }
}

TEST_CASE("smartidx package stream: write/read round trip and exact bits on known gaps", "[smartidx]") {
  SmartIdxPackages pk;
  pk.m = 4;
  pk.kernels = 25;  // d = 100
  pk.individual = {0, 1, 7, 50, 99};
  pk.patterns.push_back({{1, 0, 0, 1}, {3, 4, 20}});
  pk.patterns.push_back({{0, 0, 0, 0}, {10}});
  std::vector<uint8_t> s;
  smartidx_write(pk, 100, s);
  const unsigned bi = golomb_parameter(100, 5), b1 = golomb_parameter(25, 3), b2 = golomb_parameter(25, 1);
  CHECK(bi == 4);
  CHECK(b1 == 2);
  CHECK(b2 == 4);
  // Gaps 0, 0, 5, 42, 48 with b = 4: quotients 0, 0, 0, 2, 3 → 5·5 + 5 = 30 bits. Pattern 1:
  // 4 bits, gaps 3, 0, 15 with b = 2: quotients 0, 0, 3 → 3·3 + 3 = 12. Pattern 2: 4 bits, gap
  // 10 with b = 4: 5 bits. Header 1 + 1 + 1 + 2·2 = 7 bytes.
  const uint64_t bits = 7 * 8 + 30 + 4 + 12 + 4 + 5;
  CHECK(smartidx_bits(pk, 100) == bits);
  CHECK(s.size() == (bits + 7) / 8);
  const SmartIdxPackages back = smartidx_read(s, 100, 4);
  CHECK(back.individual == pk.individual);
  REQUIRE(back.patterns.size() == 2);
  CHECK(back.patterns[0].negative == pk.patterns[0].negative);
  CHECK(back.patterns[0].kernels == pk.patterns[0].kernels);
  CHECK(back.patterns[1].kernels == pk.patterns[1].kernels);
}

TEST_CASE("smartidx refuses corrupt package streams with Corrupt", "[smartidx]") {
  auto corrupt = [](const std::vector<uint8_t>& s, uint64_t d, uint64_t m, const char* why) {
    try {
      smartidx_read(s, d, m);
      FAIL("accepted: " << why);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Corrupt);
      CHECK(std::string(e.what()).find("smartidx") != std::string::npos);
    }
  };
  SmartIdxPackages pk;
  pk.m = 4, pk.kernels = 25;
  pk.individual = {2, 60};
  pk.patterns.push_back({{1, 0, 0, 1}, {3, 4}});
  std::vector<uint8_t> good;
  smartidx_write(pk, 100, good);
  REQUIRE_NOTHROW(smartidx_read(good, 100, 4));
  for (size_t cut = 0; cut < good.size(); ++cut)
    corrupt(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut)), 100, 4, "truncated");
  auto extra = good;
  extra.push_back(0);
  corrupt(extra, 100, 4, "trailing byte");
  corrupt({0x00, 0x00, 0x05}, 100, 4, "5 pattern packages in a stream with no room");
  corrupt({0x00, 0x00, 0x01, 0x00, 0x00, 0xFF}, 100, 4, "pattern package with no kernel");
  corrupt({0x00, 0x00, 0x01, 0x1A, 0x00, 0xFF, 0xFF, 0xFF, 0xFF}, 100, 4, "26 of 25 kernels");
  corrupt({0x00, 0x40, 0x00}, 100, 4, "Rice parameter 64");
  corrupt({0x00, 0x00, 0x01, 0x01, 0x00, 0x00}, 100, 1, "patterns in a tensor not cut into kernels");
  {  // kernel 3 in two pattern packages
    SmartIdxPackages two = pk;
    two.individual.clear();
    two.patterns.push_back({{0, 0, 0, 0}, {3}});
    std::vector<uint8_t> s;
    smartidx_write(two, 100, s);
    corrupt(s, 100, 4, "kernel in two packages");
  }
  {  // individual position 13 inside kernel 3's package
    SmartIdxPackages in = pk;
    in.individual = {13};
    std::vector<uint8_t> s;
    smartidx_write(in, 100, s);
    corrupt(s, 100, 4, "individual inside a kernel package");
  }
  {  // an individual gap past the end of the tensor
    SmartIdxPackages out = pk;
    out.individual = {2, 99};
    out.patterns.clear();
    std::vector<uint8_t> s;
    smartidx_write(out, 100, s);
    corrupt(s, 60, 4, "position beyond the tensor");
  }
}

TEST_CASE("smartidx preset and registry row", "[smartidx][registry]") {
  REQUIRE(find_preset("smartidx"));
  CHECK(Pipeline::preset("smartidx").text() == Pipeline::parse("smartidx(ratio=0.01, kernel=0.5)").text());
  CHECK_THROWS_WITH(Pipeline::parse("smartidx(ratio=0.1) | golomb"), Catch::Contains("golomb"));
  CHECK_THROWS_WITH(Pipeline::parse("smartidx(ratio=0.1, k=3)"), Catch::Contains("smartidx"));
}

TEST_CASE("smartidx refuses more values than the streams can hold before holding their positions", "[smartidx]") {
  // A [2^20, 2^10, 3, 3] weight (9.7e9 elements, 38 GB as f32) and a 110-byte package stream
  // naming 800 kernels: 7,200 values, which 114 bytes of streams cannot hold.
  TensorInfo info;
  info.name = "huge.weight";
  info.dtype = DType::F32;
  info.shape = {uint64_t{1} << 20, 1024, 3, 3};
  std::vector<uint8_t> s = {0x00, 0x00, 0x01, 0xA0, 0x06, 0x00};  // k_i 0, b_i 0, P 1, c 800, b_p 0
  BitWriter bw(s);
  bw.put(0, 9);                                  // the pattern
  for (int j = 0; j < 800; ++j) bw.bit(true);    // kernels 0..799: gaps 0 with b = 0
  bw.flush();
  const SmartIdxPackages pk = smartidx_read(s, info.elements(), 9);
  REQUIRE(pk.patterns.size() == 1);
  CHECK(pk.patterns[0].kernels.size() == 800);
  PipelineStages stages(Pipeline::parse("smartidx(ratio=0.01)"));
  Streams in;
  in.add("index").bytes = s;
  in.add("value", 4).bytes.assign(4, 0);
  StageContext ctx;
  ctx.info = &info;
  PipelineStages::TensorState state;
  try {
    stages.decode(info, std::move(in), true, ctx, state);
    FAIL("decoded");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Corrupt);
    CHECK_THAT(e.what(), Catch::Contains("cannot hold 7200 values"));
  }
}
