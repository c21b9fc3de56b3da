// SPDX-License-Identifier: BSD-3-Clause
// qsgd: unbiasedness, the variance bound per bucket, exact bit counts for both codings, sparse
// input, edge sizes and corrupt streams.
#include <catch2/catch.hpp>

#include "quantize/codes.hpp"
#include "quantize/expand.hpp"
#include "quantize/qsgd_levels.hpp"
#include "stages/quantize_support.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

using namespace gradcodec;
using namespace gradcodec::test;

namespace {
// Decoded level of a value: |x|·s/‖v‖, which decode() made from an integer l.
uint64_t level_of(float x, float norm, uint32_t s) {
  return norm > 0 ? static_cast<uint64_t>(std::llround(std::fabs(double(x)) * s / norm)) : 0;
}
// Σv² of a bucket as docs/stages.md "qsgd" orders it: sixteen partials (value i into partial
// i mod 16), then partials k and k + 8 added, then k and k + 4, k and k + 2, 0 and 1.
double rule_sum_squares(const float* x, size_t n) {
  double p[16] = {};
  for (size_t i = 0; i < n; ++i) p[i % 16] += double(x[i]) * x[i];
  double q[8], r[4], t[2];
  for (int k = 0; k < 8; ++k) q[k] = p[k] + p[k + 8];
  for (int k = 0; k < 4; ++k) r[k] = q[k] + q[k + 4];
  for (int k = 0; k < 2; ++k) t[k] = r[k] + r[k + 2];
  return t[0] + t[1];
}
// ‖v‖₂ of each bucket, rounded to f32 as the wire carries it.
std::vector<float> bucket_norms(const std::vector<float>& v, size_t bucket) {
  std::vector<float> out;
  const size_t size = bucket == 0 ? v.size() : bucket;
  for (size_t lo = 0; lo < v.size(); lo += size)
    out.push_back(static_cast<float>(std::sqrt(rule_sum_squares(v.data() + lo, std::min(v.size(), lo + size) - lo))));
  return out;
}
}  // namespace

TEST_CASE("qsgd is unbiased: the mean over seeds converges to g", "[quantize][qsgd]") {
  Tensor t = make_tensor("w", {1000}, gaussian(1000, 11));
  // ratio = ‖mean − g‖²·N/V is ≈ 1 for an unbiased code (see BiasStat): an average over 1000
  // coordinates, so its spread is a few percent; 1.5 leaves a wide margin, and any bias larger
  // than ~0.7·√(V/N) fails it. With N = 2000, ‖mean − g‖/‖g‖ itself is ≤ √(1.5·V/‖g‖²/N).
  for (const char* text : {"qsgd(levels=1, bucket=512)", "qsgd(levels=7, bucket=0, coding=elias)",
                           "qsgd(levels=3, bucket=100)"}) {
    INFO(text);
    BiasStat b = bias_over_seeds(text, t, 2000);
    CHECK(b.ratio < 1.5);
    CHECK(b.rel_err <= std::sqrt(1.5 * b.variance / 2000));
  }
}

TEST_CASE("qsgd's error stays within min(n/s^2, sqrt(n)/s)*||v||^2 per bucket", "[quantize][qsgd]") {
  // Two inputs: Gaussian, and equal magnitudes (±1), where the √n/s bound is nearly tight for s = 1.
  std::vector<float> equal(1100);
  for (size_t i = 0; i < equal.size(); ++i) equal[i] = (i % 3 == 0) ? -1.0f : 1.0f;
  const int seeds = 1000;
  for (const auto& v : {gaussian(1100, 5), equal}) {
    Tensor t = make_tensor("w", {v.size()}, v);
    for (uint32_t s : {1u, 7u, 127u}) {
      const size_t bucket = 512;  // buckets of 512, 512 and 76 values
      const std::string text = "qsgd(levels=" + std::to_string(s) + ", bucket=512)";
      INFO(text);
      const std::vector<float> norms = bucket_norms(v, bucket);
      std::vector<double> measured(norms.size(), 0.0);
      for (int seed = 1; seed <= seeds; ++seed) {
        Coded c = code_dense(text, t, seed);
        for (size_t i = 0; i < v.size(); ++i) measured[i / bucket] += (double(c.decoded[i]) - v[i]) * (double(c.decoded[i]) - v[i]);
      }
      for (size_t b = 0; b < norms.size(); ++b) {
        const size_t lo = b * bucket, hi = std::min(v.size(), lo + bucket);
        const double n = double(hi - lo), nv2 = double(norms[b]) * norms[b];
        // Exact expectation: Σ (‖v‖/s)²·f_i(1 − f_i), f_i = frac(|v_i|/‖v‖·s).
        double expected = 0;
        for (size_t i = lo; i < hi; ++i) {
          const double r = std::fabs(double(v[i])) / norms[b] * s;
          const double f = r - std::floor(r);
          expected += nv2 / (double(s) * s) * f * (1 - f);
        }
        const double bound = std::min(n / (double(s) * s), std::sqrt(n) / s) * nv2;
        CHECK(expected <= bound * (1 + 1e-9));
        // Sampling error: each seed's error is a sum of ≥ 76 independent terms whose relative
        // spread is at most ~4.4 each (s = 1, equal magnitudes), so the mean over 1000 seeds is
        // within ~1.6% (1 sd) of its expectation for the smallest bucket; 10% is > 6 sd.
        const double mean = measured[b] / seeds;
        CHECK(mean <= bound * 1.10);
        CHECK(std::fabs(mean - expected) <= 0.10 * expected + 1e-12);
      }
    }
  }
}

TEST_CASE("qsgd bit counts: fixed = sign + ceil(log2(s+1)) bits, elias = recount of the levels", "[quantize][qsgd]") {
  const std::vector<float> v = gaussian(1100, 8);
  Tensor t = make_tensor("w", {v.size()}, v);
  for (uint32_t s : {1u, 7u, 127u, 1000u}) {
    for (size_t bucket : {size_t{0}, size_t{512}, size_t{100}}) {
      const std::string params = "levels=" + std::to_string(s) + ", bucket=" + std::to_string(bucket);
      INFO(params);
      Coded fixed = code_dense("qsgd(" + params + ")", t, 3);
      Coded elias = code_dense("qsgd(" + params + ", coding=elias)", t, 3);
      const uint64_t buckets = bucket == 0 ? 1 : (v.size() + bucket - 1) / bucket;
      const unsigned width = 1 + static_cast<unsigned>(std::bit_width(uint64_t{s}));  // sign + ⌈log2(s+1)⌉
      CHECK(fixed.bytes("value") == (v.size() * width + 7) / 8);
      CHECK(fixed.bytes("scale") == 4 * buckets);
      CHECK(elias.bytes("scale") == 4 * buckets);
      // Same seed, same draws: both codings carry the same levels.
      REQUIRE(fixed.decoded == elias.decoded);
      const std::vector<float> norms = bucket_norms(v, bucket);
      const size_t size = bucket == 0 ? v.size() : bucket;
      uint64_t bits = 0;
      for (size_t i = 0; i < v.size(); ++i) {
        const float norm = norms[i / size];
        const uint64_t l = level_of(elias.decoded[i], norm, s);
        REQUIRE(l <= s);
        // The decoded value is exactly ±‖v‖·l/s.
        REQUIRE(std::fabs(elias.decoded[i]) == static_cast<float>(double(norm) / s * double(l)));
        bits += 2 * (std::bit_width(l + 1) - 1) + 1 + (l > 0 ? 1 : 0);
      }
      CHECK(elias.bytes("value") == (bits + 7) / 8);
    }
  }
}

TEST_CASE("qsgd codes a sparsifier's kept values, bucketed in value order", "[quantize][qsgd]") {
  SparseInput in;
  in.n = 5000;
  for (uint64_t i = 0; i < 700; ++i) in.index.push_back(7 * i);
  in.values = gaussian(700, 4);
  Coded c = code_sparse("qsgd(levels=7, bucket=256)", in, 9);
  CHECK(c.bytes("value") == (700 * 4 + 7) / 8);
  CHECK(c.bytes("scale") == 4 * 3);
  REQUIRE(c.decoded.size() == 700);
  for (size_t i = 0; i < 700; ++i)
    if (c.decoded[i] != 0) CHECK((c.decoded[i] < 0) == (in.values[i] < 0));
}

TEST_CASE("qsgd handles 0 and 1 values; one value is exact", "[quantize][qsgd]") {
  Coded empty = code_dense("qsgd", make_tensor("e", {0}, {}));
  CHECK(empty.decoded.empty());
  CHECK(empty.bytes("value") == 0);
  CHECK(empty.bytes("scale") == 0);
  for (float x : {3.25f, -0.7f, 0.0f}) {
    Coded one = code_dense("qsgd(levels=5, coding=elias)", make_tensor("s", {}, {x}));
    REQUIRE(one.decoded.size() == 1);
    CHECK(one.decoded[0] == x);  // |x|/‖x‖·s = s exactly
  }
}

TEST_CASE("qsgd refuses corrupt streams", "[quantize][qsgd]") {
  Tensor t = make_tensor("w", {300}, gaussian(300, 2));
  auto q = make_quantizer("qsgd(levels=5, bucket=128)");
  Payload p;
  p.source = &t, p.info = &t.info, p.n = 300;
  Streams s;
  q->encode(p, s, quant_ctx(t.info, 1));
  auto decode = [&](const Streams& in) { return decode_with(*q, in, t.info, false, {}, 1, false, 1); };
  SECTION("a level above s (3-bit code 7 with s = 5)") {
    Streams bad = s;
    bad.find("value")->bytes[0] = 0xff;
    CHECK_THROWS_MATCHES(decode(bad), Error, Catch::Matchers::Predicate<Error>([](const Error& e) {
                           return e.code() == ErrorCode::Corrupt && std::string(e.what()).rfind("qsgd:", 0) == 0;
                         }));
  }
  SECTION("an Elias code longer than the levels allow") {
    auto qe = make_quantizer("qsgd(levels=5, bucket=128, coding=elias)");
    Streams e;
    Payload pe;
    pe.source = &t, pe.info = &t.info, pe.n = 300;
    qe->encode(pe, e, quant_ctx(t.info, 1));
    e.find("value")->bytes[0] = 0x00;  // 8 leading zeros: more than ⌊log2 6⌋ = 2
    CHECK_THROWS_AS(decode_with(*qe, e, t.info, false, {}, 1, false, 1), Error);
  }
  SECTION("a count the streams cannot hold") {
    TensorInfo huge = t.info;
    huge.shape = {uint64_t{1} << 40};
    CHECK_THROWS_AS(decode_with(*q, s, huge, false, {}, 1, false, 1), Error);
  }
}

TEST_CASE("qsgd's fixed-width decode is the formula step·l·sign for every code, every width and tail",
          "[quantize][qsgd]") {
  // Widths 2, 4, 8 with levels = 2^k − 1 and byte-aligned buckets take decode's table path; the
  // others (width 3 or 5, levels 5, odd buckets, a bucket of 0 with an odd count) the general
  // loop. Both must give, bit for bit, float(‖bucket‖/s · l · ±1) read from the packed codes.
  for (uint32_t s : {1u, 3u, 5u, 7u, 15u, 127u})
    for (uint64_t bucket : {uint64_t{0}, uint64_t{2}, uint64_t{5}, uint64_t{6}, uint64_t{512}})
      for (uint64_t n : {uint64_t{1}, uint64_t{7}, uint64_t{1001}}) {
        const std::string text = "qsgd(levels=" + std::to_string(s) + ", bucket=" + std::to_string(bucket) + ")";
        INFO(text << " n=" << n);
        const std::vector<float> g = gaussian(n, 5 + n);
        Tensor t = make_tensor("w", {n}, g);
        Coded c = code_dense(text, t, 3);
        const unsigned level_bits = static_cast<unsigned>(std::bit_width(uint64_t{s}));
        const unsigned w = 1 + level_bits;
        const std::vector<uint8_t>& codes = c.streams.find("value")->bytes;
        REQUIRE(codes.size() == (n * w + 7) / 8);
        const std::vector<float> norms = bucket_norms(g, bucket);
        const uint64_t size = bucket == 0 ? n : bucket;
        REQUIRE(c.decoded.size() == n);
        for (uint64_t i = 0; i < n; ++i) {
          uint64_t code = 0;
          for (unsigned k = 0; k < w; ++k) {
            const uint64_t bit = i * w + k;
            code = code << 1 | ((codes[bit / 8] >> (7 - bit % 8)) & 1u);
          }
          const uint64_t l = code & ((uint64_t{1} << level_bits) - 1);
          const double sign = (code >> level_bits) ? 1.0 : -1.0;
          const float want = static_cast<float>(static_cast<double>(norms[i / size]) / s * static_cast<double>(l) * sign);
          REQUIRE(std::bit_cast<uint32_t>(c.decoded[i]) == std::bit_cast<uint32_t>(want));
        }
      }
}

TEST_CASE("code expansion: the vectorised loops give the portable loops' floats bit for bit", "[quantize][qsgd]") {
  // qsgd's 2-, 4- and 8-bit decodes run sixteen (eight) values per step where the CPU has
  // AVX-512; the floats must not depend on the machine. Tables hold -0, a NaN with a payload and
  // a denormal; counts cross the vector step, tails end mid-byte, sources start at odd offsets;
  // the 8-bit products include -0 (level 0, sign 0), step 0, overflow to Inf and f32 denormals.
  // (Swapping the nibble order, the shift mask or the 2-bit shifts, or dropping the -0, fails.)
  WARN("vectorised code expansion on this CPU: " << (stages::codes::expand_vectorised() ? "yes" : "no"));
  float table[16];
  for (unsigned c = 0; c < 16; ++c) table[c] = static_cast<float>(c) * 1.5f - 7.0f;
  table[3] = -0.0f;
  table[1] = std::bit_cast<float>(uint32_t{0x7fc01234});  // quiet NaN with a payload
  table[2] = std::numeric_limits<float>::denorm_min();
  Rng gen(4);
  std::vector<uint8_t> bytes(1400);
  for (auto& b : bytes) b = static_cast<uint8_t>(gen.next_u64());
  for (size_t c = 0; c < 256; ++c) bytes[c] = static_cast<uint8_t>(c);  // every 8-bit code
  const std::vector<uint64_t> counts = {0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 100, 1001, 1384};
  for (unsigned width : {2u, 4u})
    for (uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{3}})
      for (uint64_t count : counts) {
        INFO("width " << width << " count " << count << " offset " << offset);
        std::vector<float> a(count + 1, 42.0f), b(count + 1, 42.0f);
        stages::codes::expand_codes(bytes.data() + offset, count, width, table, a.data());
        stages::codes::expand_codes_portable(bytes.data() + offset, count, width, table, b.data());
        REQUIRE(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);  // the sentinel past the end too
        CHECK(a[count] == 42.0f);
        for (uint64_t i = 0; i < count; ++i) {  // and the portable loop is the rule: high bits first
          const uint64_t bit = i * width;
          const unsigned code = (bytes[offset + bit / 8] >> (8 - width - bit % 8)) & ((1u << width) - 1);
          REQUIRE(std::bit_cast<uint32_t>(b[i]) == std::bit_cast<uint32_t>(table[code]));
        }
      }
  double signed_level[256];
  for (unsigned c = 0; c < 256; ++c) signed_level[c] = static_cast<double>(c & 127) * ((c >> 7) ? 1.0 : -1.0);
  for (double step : {0.0, 1.0 / 127, 0.3, 1e-40, 3e36, 1e300})
    for (uint64_t offset : {uint64_t{0}, uint64_t{1}})
      for (uint64_t count : counts) {
        INFO("8-bit, step " << step << " count " << count << " offset " << offset);
        std::vector<float> a(count + 1, 42.0f), b(count + 1, 42.0f);
        stages::codes::scale_codes8(bytes.data() + offset, count, step, signed_level, a.data());
        stages::codes::scale_codes8_portable(bytes.data() + offset, count, step, signed_level, b.data());
        REQUIRE(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
        for (uint64_t i = 0; i < count; ++i) {
          const unsigned c = bytes[offset + i];
          const float want = static_cast<float>(step * static_cast<double>(c & 127) * ((c >> 7) ? 1.0 : -1.0));
          REQUIRE(std::bit_cast<uint32_t>(b[i]) == std::bit_cast<uint32_t>(want));
        }
      }
}

namespace {
// The rule's level of one value (docs/stages.md "qsgd"), written from the text: r = |x|·scale in
// f32, clamped to s (NaN: 0), ⌊r⌋ plus 1 when the 32-bit word w satisfies w·2⁻³² < r − ⌊r⌋ (in
// double: exact for both sides).
uint32_t rule_level(float x, float scale, uint32_t s, uint32_t w) {
  const float r = std::fabs(x) * scale;
  if (std::isnan(r)) return 0;
  if (r >= static_cast<float>(s)) return s;
  const double fl = std::floor(static_cast<double>(r));
  return static_cast<uint32_t>(fl) + (w * 0x1.0p-32 < static_cast<double>(r) - fl ? 1u : 0u);
}

// Word i of a stream: the low half of output i/2 for an even i, the high half for an odd i.
uint32_t word_of(const Rng& rng, uint64_t i) {
  const uint64_t out = rng.at(i / 2);
  return static_cast<uint32_t>(i % 2 == 0 ? out & 0xffffffffu : out >> 32);
}

// qsgd's encoder as the formula reads, one value at a time and a BitPacker: the value stream and
// norms the stage must reproduce byte for byte.
std::pair<std::vector<uint8_t>, std::vector<float>> reference_encode(const std::vector<float>& v, uint32_t s,
                                                                     uint64_t bucket, bool elias, const Rng& rng) {
  const unsigned level_bits = static_cast<unsigned>(std::bit_width(uint64_t{s}));
  std::vector<uint8_t> bytes;
  stages::codes::BitPacker bits(bytes, 0);
  const std::vector<float> norms = bucket_norms(v, bucket);
  const size_t size = bucket == 0 ? v.size() : bucket;
  for (size_t i = 0; i < v.size(); ++i) {
    const float norm = norms[i / size];
    // A norm below 2^-64: the bucket and its norm times 2^64 first.
    const float pre = norm > 0 && norm < std::ldexp(1.0f, -64) ? std::ldexp(1.0f, 64) : 1.0f;
    const float scale = norm > 0 ? static_cast<float>(s) / (norm * pre) : 0.0f;
    const uint64_t l = rule_level(v[i] * pre, scale, s, word_of(rng, i));
    const bool positive = !(v[i] < 0);
    if (!elias) {
      bits.put((uint64_t{positive} << level_bits) | l, 1 + level_bits);
    } else {
      const unsigned width = static_cast<unsigned>(std::bit_width(l + 1));
      bits.put(l + 1, 2 * width - 1);
      if (l > 0) bits.put(positive ? 1 : 0, 1);
    }
  }
  bits.finish();
  return {bytes, norms};
}
}  // namespace

TEST_CASE("qsgd's encoder gives the formula's bytes: every level width, bucket, run and tail", "[quantize][qsgd]") {
  // The stage codes runs of values (vectorised where the CPU allows) and packs them 32 bits at a
  // time; its streams must equal the one-value-at-a-time reference for levels from 1 to 2^24 − 1,
  // buckets summed 16 at a time (bucket 100: 30 buckets of 12 steps of 8 and a tail of 4),
  // buckets that end mid-run, counts that cross the runs, NaN/±Inf/−0/denormals and a value
  // at the bucket's norm (r = s).
  std::vector<float> g = gaussian(3001, 17);
  g[10] = -0.0f, g[11] = 0.0f, g[12] = std::numeric_limits<float>::denorm_min();
  g[700] = std::numeric_limits<float>::quiet_NaN(), g[701] = std::numeric_limits<float>::infinity();
  g[702] = -std::numeric_limits<float>::infinity();
  std::vector<float> lone(600, 0.0f);
  lone[300] = -2.5f;  // the only non-zero of its bucket: r = s exactly
  // Norms below 2^-64 (coded as the bucket times 2^64), denormal norms among them.
  std::vector<float> tiny = gaussian(1100, 19);
  for (size_t i = 0; i < tiny.size(); ++i) tiny[i] *= i < 550 ? 1e-22f : 1e-41f;
  for (uint32_t s : {1u, 3u, 5u, 7u, 127u, 255u, 16777215u})
    for (uint64_t bucket : {uint64_t{0}, uint64_t{5}, uint64_t{100}, uint64_t{300}, uint64_t{512}, uint64_t{101}})
      for (const std::vector<float>* src : {&g, &lone, &tiny})
        for (uint64_t n : {uint64_t{1}, uint64_t{9}, uint64_t{257}, uint64_t{src->size()}})
          for (bool elias : {false, true}) {
            const std::string text = "qsgd(levels=" + std::to_string(s) + ", bucket=" + std::to_string(bucket) +
                                     (elias ? ", coding=elias)" : ")");
            INFO(text << " n=" << n << (src == &lone ? " lone" : src == &tiny ? " tiny" : ""));
            const std::vector<float> v(src->begin(), src->begin() + static_cast<long>(n));
            Tensor t = make_tensor("w", {n}, v);
            auto q = make_quantizer(text);
            Payload p;
            p.source = &t;
            p.info = &t.info;
            p.n = n;
            p.exact = false;
            Streams out;
            const StageContext ctx = quant_ctx(t.info, 9);
            q->encode(p, out, ctx);
            const auto [bytes, norms] = reference_encode(v, s, bucket, elias, ctx.rng(RngPurpose::Round));
            REQUIRE(out.find("value")->bytes == bytes);
            const std::vector<uint8_t>& scale = out.find("scale")->bytes;
            REQUIRE(scale.size() == norms.size() * 4);
            CHECK(std::memcmp(scale.data(), norms.data(), scale.size()) == 0);
          }
}

TEST_CASE("qsgd level codes: the vectorised loop gives the portable loop's codes bit for bit", "[quantize][qsgd]") {
  // Sixteen values per step from an even value index where the CPU has AVX-512 (F+DQ). Inputs:
  // NaN, ±Inf, −0, denormals, values at, just under and above the top level, scale 0 and a scale
  // that overflows r to Inf; counts crossing the vector step; odd and even first indices (an odd
  // one starts on a high half); value indices near 2^64 (generator counters near 2^63).
  WARN("vectorised qsgd level codes on this CPU: " << (stages::codes::qsgd_codes_vectorised() ? "yes" : "no"));
  std::vector<float> x = gaussian(100, 23);
  x[0] = std::numeric_limits<float>::quiet_NaN(), x[1] = std::numeric_limits<float>::infinity();
  x[2] = -std::numeric_limits<float>::infinity(), x[3] = -0.0f, x[4] = 0.0f;
  x[5] = std::numeric_limits<float>::denorm_min(), x[6] = -std::numeric_limits<float>::denorm_min();
  x[7] = 1.0f, x[8] = -1.0f, x[9] = std::nextafter(1.0f, 0.0f), x[10] = std::nextafter(1.0f, 2.0f);
  x[11] = 0.5f, x[12] = -0.25f, x[13] = 1e-12f, x[14] = -3e-10f;  // fractions below 2^-32 of a level
  for (uint32_t s : {1u, 7u, 127u, 16777215u})
    for (float scale : {0.0f, 1.0f, static_cast<float>(s), 3.7f, 1e30f})
      for (uint64_t first : {uint64_t{0}, uint64_t{5}, uint64_t{6}, ~uint64_t{0} - 201})
        for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{15}, uint64_t{16}, uint64_t{17}, uint64_t{33}, uint64_t{100}}) {
          INFO("s " << s << " scale " << scale << " first " << first << " count " << count);
          const unsigned level_bits = static_cast<unsigned>(std::bit_width(uint64_t{s}));
          const uint64_t key = 0x123456789abcdefULL;
          std::vector<uint32_t> a(count + 1, 42u), b(count + 1, 42u);
          stages::codes::qsgd_codes(x.data(), count, scale, static_cast<float>(s), level_bits, key, first, a.data());
          stages::codes::qsgd_codes_portable(x.data(), count, scale, static_cast<float>(s), level_bits, key, first,
                                             b.data());
          REQUIRE(a == b);  // the sentinel past the end too
          const Rng rng(key);
          for (uint64_t j = 0; j < count; ++j) {  // and the portable loop is the rule
            REQUIRE(stages::codes::qsgd_word(key, first + j) == word_of(rng, first + j));
            const uint32_t l = rule_level(x[j], scale, s, word_of(rng, first + j));
            REQUIRE(b[j] == ((x[j] < 0 ? 0u : 1u << level_bits) | l));
          }
        }
}

TEST_CASE("qsgd's bucket sums: the vectorised loop gives the rule's order of additions bit for bit", "[quantize][qsgd]") {
  WARN("AVX2 qsgd sums on this CPU: " << (stages::codes::qsgd_sums_avx2() ? "yes" : "no"));
  // Values of very different magnitudes, so that another order of additions gives another
  // double; every length from 0 to 70 (whole steps of 16 and tails), and offsets that misalign.
  std::vector<float> x = gaussian(200, 29);
  for (size_t i = 0; i < x.size(); ++i) x[i] *= std::ldexp(1.0f, static_cast<int>(i * 7 % 60) - 30);
  x[50] = std::numeric_limits<float>::denorm_min(), x[51] = 3e38f, x[52] = -0.0f;
  for (size_t off : {size_t{0}, size_t{1}, size_t{3}})
    for (size_t n = 0; n <= 70; ++n) {
      INFO("offset " << off << " n " << n);
      const double want = rule_sum_squares(x.data() + off, n);
      const double a = stages::codes::qsgd_sum_squares(x.data() + off, n);
      const double b = stages::codes::qsgd_sum_squares_portable(x.data() + off, n);
      const double c = stages::codes::qsgd_sum_squares_avx2(x.data() + off, n);  // (CPUs without AVX-512)
      REQUIRE(std::memcmp(&a, &want, sizeof a) == 0);
      REQUIRE(std::memcmp(&b, &want, sizeof b) == 0);
      REQUIRE(std::memcmp(&c, &want, sizeof c) == 0);
    }
  // The order matters on these values: plain index order gives another double for some length.
  bool differs = false;
  for (size_t n = 17; n <= 70 && !differs; ++n) {
    double seq = 0;
    for (size_t i = 0; i < n; ++i) seq += double(x[i]) * x[i];
    differs = seq != rule_sum_squares(x.data(), n);
  }
  CHECK(differs);
}

TEST_CASE("qsgd's round-up probability is r - floor(r) to 2^-32: a fraction's share of words", "[quantize][qsgd]") {
  // Over 2^20 consecutive words the share that rounds a fixed fraction up is the fraction, within
  // the binomial spread (4.5σ) plus the 2^-32 step of the words; a rule that used the top 24 bits
  // or compared ≤ would still pass this, the unbiasedness test above checks the whole code.
  const uint64_t key = 0xfeedULL, n = uint64_t{1} << 20;
  for (float frac : {0.5f, 0.1f, 0.9f, 1e-3f, 0.0f}) {
    INFO("frac " << frac);
    const float xv = 3.0f + frac;  // r = x with scale 1 and s = 7: level 3 or 4
    std::vector<float> x(4096, xv);
    std::vector<uint32_t> c(x.size());
    uint64_t up = 0;
    for (uint64_t first = 0; first < n; first += x.size()) {
      stages::codes::qsgd_codes(x.data(), x.size(), 1.0f, 7.0f, 3, key, first, c.data());
      for (uint32_t code : c) up += (code & 7u) == 4u;
    }
    const double f = static_cast<double>(xv - 3.0f), sd = std::sqrt(f * (1 - f) / static_cast<double>(n));
    CHECK(std::fabs(static_cast<double>(up) / static_cast<double>(n) - f) <= 4.5 * sd + 0x1.0p-32);
    if (frac == 0.0f) CHECK(up == 0);
  }
}
