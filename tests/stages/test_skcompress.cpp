// SPDX-License-Identifier: BSD-3-Clause
// skcompress and deltabin (docs/stages.md "skcompress"): exact wire bytes on constructed inputs,
// the MinMaxSketch's collision rule checked against a brute-force model of the hash rows (the
// estimate never exceeds the true bucket, equals it when one row holds no smaller index), the
// error bound without collisions, Huffman lengths and bit counts, deltabin's exact bits, and
// refusal of corrupt streams.
#include <catch2/catch.hpp>

#include "index/deltabin.hpp"
#include "quantize/skcompress.hpp"
#include "support.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace gradcodec;
using namespace gradcodec::stages;
using namespace gradcodec::test;

namespace {

// The estimate of key x by brute force: per row, the smallest bucket among all keys sharing x's
// cell; the largest of those over the rows.
uint32_t brute_estimate(const std::vector<uint64_t>& keys, const std::vector<uint32_t>& bucket, uint64_t x,
                        unsigned rows, uint64_t w) {
  uint32_t est = 0;
  for (unsigned j = 0; j < rows; ++j) {
    uint32_t m = UINT32_MAX;
    for (size_t i = 0; i < keys.size(); ++i)
      if (sk_cell(keys[i], j, w) == sk_cell(x, j, w)) m = std::min(m, bucket[i]);
    est = std::max(est, m);
  }
  return est;
}

std::vector<float> f32s(const Stream& s) {
  std::vector<float> out(s.bytes.size() / 4);
  std::memcpy(out.data(), s.bytes.data(), out.size() * 4);
  return out;
}

// Decodes `streams` for tensor `t` under `text`; returns the error code (or -1 when accepted).
int decode_code(const std::string& text, const Tensor& t, Streams streams) {
  PipelineStages stages(Pipeline::parse(text));
  PipelineStages::TensorState state;
  StageContext ctx;
  ctx.info = &t.info;
  try {
    stages.decode(t.info, std::move(streams), true, ctx, state);
  } catch (const Error& e) {
    return static_cast<int>(e.code());
  }
  return -1;
}

}  // namespace

TEST_CASE("skcompress: one cell per row is every collision: all values decay to bucket 0; exact bytes", "[skcompress]") {
  // n = 4, Q = 2: sorted magnitudes 1 2 3 4, split s_1 = a[2] = 3; buckets 0 0 1 1, means 1.5 and
  // 3.5. W = ceil(0.1·4) = 1: the one cell holds min(0, 0, 1, 1) = 0, every query reads 0.
  Tensor t = make_tensor("w", {4}, {1.0f, -2.0f, 3.0f, -4.0f});
  RoundTrip r = roundtrip("skcompress(buckets=2, rows=1, cols=0.1)", t);
  // Bits: signs 1010, lengths 00001 00000 (only symbol 0 used: length 1), the cell '0' → 15 bits.
  CHECK(r.streams.find("value")->bytes == std::vector<uint8_t>{0b10100000, 0b10000000});
  CHECK(f32s(*r.streams.find("scale")) == std::vector<float>{1.5f, 3.5f});
  CHECK(r.stream_bytes == 2 + 8);
  CHECK(values_of(r.decoded) == std::vector<float>{1.5f, -1.5f, 1.5f, -1.5f});
  // With enough cells the same input keeps its buckets (checked against the hash rows below).
  RoundTrip wide = roundtrip("skcompress(buckets=2, rows=2, cols=8)", t);
  const std::vector<uint64_t> keys = {0, 1, 2, 3};
  const std::vector<uint32_t> bucket = {0, 0, 1, 1};
  for (uint64_t i = 0; i < 4; ++i) {
    const uint32_t est = brute_estimate(keys, bucket, i, 2, 32);
    CHECK(std::fabs(values_of(wide.decoded)[i]) == (est == 0 ? 1.5f : 3.5f));
  }
}

TEST_CASE("skcompress: the MinMax rule on constructed collisions matches a brute-force model", "[skcompress]") {
  for (const char* shape : {"dense", "sparse"}) {
    for (double cols : {0.05, 0.3, 1.0}) {
      INFO(shape << " cols " << cols);
      auto v = gaussian(2000, 7);
      const bool sparse = std::string(shape) == "sparse";
      const std::string text = std::string(sparse ? "topk(ratio=0.1) | " : "") + "skcompress(buckets=16, rows=2, cols=" +
                               std::to_string(cols) + ")" + (sparse ? " | deltabin" : "");
      Tensor t = make_tensor("w", {2000}, v);
      RoundTrip r = roundtrip(text, t);
      const auto dec = values_of(r.decoded);
      std::vector<uint64_t> keys;
      std::vector<float> kept;
      for (uint64_t i = 0; i < 2000; ++i)
        if (!sparse || dec[i] != 0.0f) keys.push_back(i), kept.push_back(v[i]);
      if (sparse) REQUIRE(keys.size() == 200);
      const SkBuckets b = sk_buckets(kept, 16);
      const uint64_t w = sk_width(keys.size(), cols);
      CHECK(f32s(*r.streams.find("scale")) == b.mean);
      uint64_t exact = 0, lowered = 0;
      for (size_t i = 0; i < keys.size(); ++i) {
        const uint32_t est = brute_estimate(keys, b.bucket, keys[i], 2, w);
        REQUIRE(est <= b.bucket[i]);  // never overstated
        const float want = kept[i] < 0 ? -b.mean[est] : b.mean[est];
        CHECK(dec[keys[i]] == want);
        CHECK(std::fabs(dec[keys[i]]) <= b.mean[b.bucket[i]]);  // the magnitude only decays
        (est == b.bucket[i] ? exact : lowered)++;
      }
      // The constructed loads collide: at 0.05 cells per value most estimates are lowered.
      if (cols < 0.1) CHECK(lowered > exact);
      if (cols == 1.0) CHECK(exact > lowered);
      // Exact wire size: signs, 5-bit lengths, Huffman-coded cells.
      const auto cells = sk_sketch(keys, b.bucket, 2, w);
      std::vector<uint64_t> freq(16, 0);
      for (uint32_t c : cells) ++freq[c];
      const auto lengths = sk_huffman_lengths(freq);
      CHECK(r.streams.find("value")->bytes.size() == (skcompress_value_bits(keys.size(), lengths, cells) + 7) / 8);
      // Deterministic under another seed.
      RoundTrip again = roundtrip(text, t, 99);
      CHECK(again.streams.find("value")->bytes == r.streams.find("value")->bytes);
    }
  }
}

TEST_CASE("skcompress: without collisions each value is within its bucket's width, sign kept", "[skcompress]") {
  auto v = gaussian(5000, 3);
  Tensor t = make_tensor("w", {5000}, v);
  RoundTrip r = roundtrip("topk(ratio=0.05) | skcompress(buckets=64, rows=2, cols=64) | deltabin", t);
  const auto dec = values_of(r.decoded);
  std::vector<uint64_t> keys;
  std::vector<float> kept;
  for (uint64_t i = 0; i < 5000; ++i)
    if (dec[i] != 0.0f) keys.push_back(i), kept.push_back(v[i]);
  REQUIRE(keys.size() == 250);
  const SkBuckets b = sk_buckets(kept, 64);
  const uint64_t w = sk_width(250, 64);
  uint64_t alone = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (brute_estimate(keys, b.bucket, keys[i], 2, w) != b.bucket[i]) continue;
    ++alone;
    const uint32_t k = b.bucket[i];
    const float lo = k == 0 ? 0.0f : b.split[k - 1];
    float top = 0;  // the largest magnitude bounds the last bucket
    for (float x : kept) top = std::max(top, std::fabs(x));
    const float hi = k + 1 < 64 ? b.split[k] : top;
    CHECK(std::signbit(dec[keys[i]]) == std::signbit(kept[i]));
    CHECK(std::fabs(std::fabs(dec[keys[i]]) - std::fabs(kept[i])) <= hi - lo);
  }
  CHECK(alone >= 249);  // 16,000 cells per row for 250 keys
}

TEST_CASE("skcompress: repeated magnitudes leave buckets empty, bucket 0 among them; their means", "[skcompress]") {
  // 10 equal magnitudes, 4 buckets: every split is 0.5, every value lands in bucket 3.
  const std::vector<float> v = {0.5f, -0.5f, 0.5f, 0.5f, -0.5f, 0.5f, -0.5f, 0.5f, 0.5f, -0.5f};
  const SkBuckets b = sk_buckets(v, 4);
  REQUIRE(b.mean.size() == 4);
  for (float m : b.mean) CHECK(m == 0.5f);
  for (uint32_t k : b.bucket) CHECK(k == 3);
  // Ties at the bottom only: 0.25 six times, then 1, 2, 3, 4 (split 1 = a[2] = 0.25).
  const std::vector<float> w = {0.25f, 1.0f, 0.25f, 2.0f, 0.25f, 3.0f, 0.25f, 4.0f, 0.25f, 0.25f};
  const SkBuckets c = sk_buckets(w, 4);
  CHECK(c.mean[0] == 0.25f);  // empty: a[0]
  CHECK(c.bucket[0] != 0);
}

TEST_CASE("skcompress: Huffman lengths, canonical bit counts, a lone symbol, the length limit", "[skcompress]") {
  // Merges (ties to the lower node): 1+1 (symbols 2, 3), symbol 4 (2) + that node, then symbol 0.
  const std::vector<uint64_t> freq = {5, 0, 1, 1, 2};
  const auto len = sk_huffman_lengths(freq);
  CHECK(len == std::vector<uint8_t>{1, 0, 3, 3, 2});
  const std::vector<uint32_t> syms = {0, 0, 0, 0, 0, 2, 3, 4, 4};
  CHECK(sk_huffman_bits(len, syms) == 5 + 3 + 3 + 2 + 2);
  CHECK(sk_huffman_lengths(std::vector<uint64_t>{0, 7, 0}) == std::vector<uint8_t>{0, 1, 0});
  // Fibonacci frequencies would give a 39-bit code: halving brings the longest to 24 or less.
  std::vector<uint64_t> fib = {1, 1};
  while (fib.size() < 40) fib.push_back(fib[fib.size() - 1] + fib[fib.size() - 2]);
  const auto limited = sk_huffman_lengths(fib);
  CHECK(*std::max_element(limited.begin(), limited.end()) <= kSkMaxCodeLength);
  double kraft = 0;
  for (uint8_t l : limited) kraft += std::ldexp(1.0, -l);
  CHECK(kraft == 1.0);
}

TEST_CASE("deltabin: exact bits and bytes of known gaps, round trip", "[skcompress][deltabin]") {
  const std::vector<uint64_t> pos = {0, 1, 7, 50, 99, 200, 201, 300, 1000};
  // Gaps 0 0 5 42 | 48 100 0 98 | 699 with G = 4: widths 6, 7, 10 → (6+24) + (6+28) + (6+10) = 80
  // bits after LEB128 9.
  CHECK(deltabin_bits(pos, 4) == 8 + 80);
  std::vector<float> v(1024, 0.0f);
  for (size_t i = 0; i < pos.size(); ++i) v[pos[i]] = 1.0f + static_cast<float>(i);
  Tensor t = make_tensor("w", {1024}, v);
  RoundTrip r = roundtrip("topk(k=9) | deltabin(group=4)", t);
  const auto& s = r.streams.find("index")->bytes;
  REQUIRE(s.size() == 11);
  // 09, then 000110 000000 000000 000101 101010 ...
  CHECK(s[0] == 0x09);
  CHECK(s[1] == 0b00011000);
  CHECK(s[2] == 0b00000000);
  CHECK(s[3] == 0b00000101);
  CHECK(values_of(r.decoded) == v);
  // Group 1: one prefix per gap.
  CHECK(deltabin_bits(pos, 1) == 8 + 9 * 6 + 0 + 0 + 3 + 6 + 6 + 7 + 0 + 7 + 10);
}

TEST_CASE("skcompress and deltabin refuse corrupt streams with Corrupt", "[skcompress]") {
  auto v = gaussian(400, 5);
  Tensor t = make_tensor("w", {400}, v);
  const std::string text = "topk(ratio=0.1) | skcompress(buckets=8, rows=2, cols=0.5) | deltabin(group=4)";
  PipelineStages stages(Pipeline::parse(text));
  PipelineStages::TensorState st;
  StageContext ctx;
  ctx.info = &t.info;
  const Streams good = stages.encode(t, ctx, st).streams;
  REQUIRE(decode_code(text, t, good) == -1);
  const int corrupt = static_cast<int>(ErrorCode::Corrupt);
  for (const char* name : {"index", "value", "scale"}) {
    const auto& bytes = good.find(name)->bytes;
    for (size_t cut = 0; cut < bytes.size(); ++cut) {
      Streams s = good;
      s.find(name)->bytes.resize(cut);
      INFO(name << " cut to " << cut);
      CHECK(decode_code(text, t, s) == corrupt);
    }
    Streams s = good;
    s.find(name)->bytes.push_back(0);
    INFO(name << " trailing byte");
    CHECK(decode_code(text, t, s) == corrupt);
  }
  {  // a NaN bucket mean
    Streams s = good;
    const float nan = std::nanf("");
    std::memcpy(s.find("scale")->bytes.data(), &nan, 4);
    CHECK(decode_code(text, t, s) == corrupt);
  }
  {  // code lengths 1, 1, 1: Kraft sum 3/2 (the lengths start after the 40 sign bits)
    Streams s = good;
    auto& b = s.find("value")->bytes;
    b[5] = 0b00001000;
    b[6] = 0b01000010;
    CHECK(decode_code(text, t, s) == corrupt);
  }
  {  // a code length of 31
    Streams s = good;
    s.find("value")->bytes[5] = 0xF8;
    CHECK(decode_code(text, t, s) == corrupt);
  }
  {  // deltabin: a count of 2^20 positions in a tensor of 400
    Streams s = good;
    auto& b = s.find("index")->bytes;
    b.erase(b.begin());
    b.insert(b.begin(), {0x80, 0x80, 0x40});
    CHECK(decode_code(text, t, s) == corrupt);
  }
  {  // deltabin: a gap past the tensor (a group of width 63)
    Streams s = good;
    s.find("index")->bytes[1] = 0xFC;
    CHECK(decode_code(text, t, s) == corrupt);
  }
}

TEST_CASE("skcompress preset and registry rows", "[skcompress][registry]") {
  REQUIRE(find_preset("skcompress"));
  CHECK(Pipeline::preset("skcompress").text() ==
        Pipeline::parse("topk(ratio=0.01) | skcompress(buckets=256, rows=2, cols=0.5) | deltabin(group=8)").text());
  CHECK_THROWS_WITH(Pipeline::parse("topk | skcompress(buckets=0)"), Catch::Contains("buckets"));
  CHECK_THROWS_WITH(Pipeline::parse("topk | skcompress(cols=0)"), Catch::Contains("cols"));
  CHECK_THROWS_WITH(Pipeline::parse("topk | deltabin(group=0)"), Catch::Contains("group"));
}
