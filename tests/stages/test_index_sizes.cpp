// SPDX-License-Identifier: BSD-3-Clause
// Index coder sizes against their formulas, each re-derived here independently of the library's
// size functions: golomb's b* and Σ(⌊g/2^b⌋ + 1 + b), tcspos' K·(log2 B + 1) + #blocks, bitmap's
// d bits, rle's minimising width, Elias code lengths; the size functions on universes ≥ 2^32; and
// the best coder on a uniformly random 1% set within 5% of log2 C(d, k).
#include <catch2/catch.hpp>

#include "index/gaps.hpp"
#include "stages/index_support.hpp"

#include <cmath>

using namespace gradcodec;
using namespace gradcodec::stages;
using namespace gradcodec::test::ix;
namespace idx = gradcodec::stages::idx;

namespace {

std::vector<uint64_t> gaps_of(const std::vector<uint64_t>& pos) {
  std::vector<uint64_t> g;
  uint64_t next = 0;
  for (uint64_t x : pos) g.push_back(x - next), next = x + 1;
  return g;
}

// b* = 1 + ⌊log2(ln(φ − 1)/ln(1 − p))⌋ in long double, clamped at 0 (SBC).
int sbc_b(uint64_t d, uint64_t k) {
  const long double phi = (1.0L + std::sqrt(5.0L)) / 2.0L;
  const long double p = static_cast<long double>(k) / d;
  const long double b = 1 + std::floor(std::log2(std::log(phi - 1) / std::log1p(-p)));
  return b < 0 ? 0 : static_cast<int>(b);
}

// Bytes before the payload: the LEB128 count and `fields` one-byte parameters.
size_t header_bytes(uint64_t k, unsigned fields) { return idx::leb128_size(k) + fields; }

// log2 C(d, k) via lgamma.
double log2_binomial(double d, double k) {
  return (std::lgamma(d + 1) - std::lgamma(k + 1) - std::lgamma(d - k + 1)) / std::log(2.0);
}

}  // namespace

TEST_CASE("golomb uses SBC's b* and costs Σ(⌊g/2^b⌋ + 1 + b) bits plus its header", "[index]") {
  // Known values: p = 1% → ln(0.618)/ln(0.99) = 47.9 → b* = 1 + 5 = 6.
  CHECK(golomb_parameter(1'000'000, 10'000) == 6);
  CHECK(golomb_parameter(1'000'000, 1'000) == 9);
  CHECK(golomb_parameter(1'000'000, 100'000) == 3);
  CHECK(golomb_parameter(1'000'000, 500'000) == 0);   // formula < 0: clamped
  CHECK(golomb_parameter(1'000'000, 1'000'000) == 0);  // p = 1
  auto coder = make_coder({"golomb", ""});
  uint64_t seed = 1;
  for (uint64_t d : {uint64_t{1000}, uint64_t{100'003}, uint64_t{2'000'000}})
    for (double rho : {1e-4, 1e-3, 0.01, 0.05, 0.2, 0.5, 0.9}) {
      auto pos = bernoulli(d, rho, seed++);
      INFO("d=" << d << " rho=" << rho << " k=" << pos.size());
      auto bytes = encode(*coder, d, pos);
      const int b = pos.empty() ? 0 : sbc_b(d, pos.size());
      CHECK(golomb_parameter(d, pos.size()) == static_cast<unsigned>(b));
      const size_t h = header_bytes(pos.size(), 1);
      REQUIRE(bytes.size() >= h);
      CHECK(bytes[h - 1] == b);  // b is stored after the count
      uint64_t payload = 0;
      for (uint64_t g : gaps_of(pos)) payload += (g >> b) + 1 + b;
      CHECK(bytes.size() == h + (payload + 7) / 8);
      CHECK(golomb_bits(d, pos) == 8 * h + payload);
      // b* is (near) the best Rice parameter for such uniform sets: within 1% of the best b.
      if (pos.size() >= 100) {
        uint64_t best = UINT64_MAX;
        for (unsigned bb = 0; bb < 30; ++bb) best = std::min(best, golomb_payload_bits(pos, bb));
        CHECK(payload <= best * 1.01);
      }
    }
}

TEST_CASE("tcspos costs K·(log2 B + 1) + #blocks bits plus a 2-byte header", "[index]") {
  // The paper's example (TCS, Ozfatura, Ozfatura & Gündüz 2021, eq. (18)): d = 12, φ = 1/4,
  // positions 1, 3, 10 (1-based).
  auto coder = make_coder({"tcspos", ""});
  auto ex = encode(*coder, 12, {0, 2, 9});
  REQUIRE(ex.size() == 2 + 2);
  CHECK(ex[1] == 2);  // log2 B = 2
  // 1 00 1 10 0 | 0 | 1 01 0  → 10011000 1010 + 4 padding zeros
  CHECK(ex[2] == 0b10011000);
  CHECK(ex[3] == 0b10100000);
  uint64_t seed = 3;
  for (uint64_t d : {uint64_t{1}, uint64_t{12}, uint64_t{1000}, uint64_t{100'003}, uint64_t{2'000'003}})
    for (double rho : {1e-5, 1e-3, 0.01, 0.1, 0.5, 1.0}) {
      const uint64_t k = static_cast<uint64_t>(std::llround(rho * static_cast<double>(d)));
      if (k == 0) continue;
      auto pos = uniform_k(d, k, seed++);
      INFO("d=" << d << " k=" << k);
      // L = ⌈log2(1/φ)⌉ = ⌈log2(d/k)⌉ (floating check; the library uses exact integers).
      const unsigned l = static_cast<unsigned>(std::ceil(std::log2(static_cast<long double>(d) / k) - 1e-12L));
      CHECK(tcspos_log2_block(d, k) == l);
      const uint64_t blocks = (d + (uint64_t{1} << l) - 1) >> l;
      auto bytes = encode(*coder, d, pos);
      const size_t h = header_bytes(k, 1);
      CHECK(bytes[h - 1] == l);  // B is stored: the decoder never recomputes φ
      const uint64_t payload = k * (l + 1) + blocks;
      CHECK(bytes.size() == h + (payload + 7) / 8);
      CHECK(tcspos_bits(d, k) == 8 * h + payload);
    }
  CHECK(tcspos_bits(12345, 0) == 16);  // k = 0: header only, no blocks
}

TEST_CASE("bitmap costs d bits plus the count; rle picks the width that minimises its size", "[index]") {
  auto bitmap = make_coder({"bitmap", ""});
  auto rle = make_coder({"rle", ""});
  uint64_t seed = 5;
  for (uint64_t d : {uint64_t{1}, uint64_t{9}, uint64_t{4096}, uint64_t{100'003}})
    for (double rho : {0.0, 1e-3, 0.01, 0.3, 1.0}) {
      auto pos = bernoulli(d, rho, seed++);
      INFO("d=" << d << " rho=" << rho);
      CHECK(encode(*bitmap, d, pos).size() == idx::leb128_size(pos.size()) + (d + 7) / 8);
      auto bytes = encode(*rle, d, pos);
      const size_t h = header_bytes(pos.size(), 1);
      const unsigned w = bytes[h - 1];
      // Brute force over every width, counting codes from the gaps.
      uint64_t best = UINT64_MAX;
      unsigned best_w = 0;
      for (unsigned ww = 1; ww <= 64; ++ww) {
        const uint64_t m = ww == 64 ? UINT64_MAX : (uint64_t{1} << ww) - 1;
        uint64_t codes = 0;
        for (uint64_t g : gaps_of(pos)) codes += g / m + 1;
        if (codes * ww < best) best = codes * ww, best_w = ww;
      }
      CHECK(w == best_w);
      CHECK(bytes.size() == h + (best + 7) / 8);
    }
  // DeepReduce's Figure 1 stream A, zeros counted: gaps 1, 0, 2, 1, 3, 0.
  const std::vector<uint64_t> a = {1, 2, 5, 7, 11, 12};
  CHECK(rle_payload_bits(a, 1) == 13);  // 7 escapes + 6 codes: the bitmap up to the last 1
  CHECK(rle_payload_bits(a, 2) == 14);  // 3 = escape then 0: 7 codes
  CHECK(rle_payload_bits(a, 3) == 18);
  CHECK(rle_best_width(a) == 1);
}

TEST_CASE("Elias code lengths and plain/varint sizes", "[index]") {
  CHECK(elias_code_bits(EliasKind::Gamma, 1) == 1);
  CHECK(elias_code_bits(EliasKind::Gamma, 2) == 3);
  CHECK(elias_code_bits(EliasKind::Gamma, 5) == 5);
  CHECK(elias_code_bits(EliasKind::Gamma, UINT64_MAX) == 127);
  CHECK(elias_code_bits(EliasKind::Delta, 1) == 1);
  CHECK(elias_code_bits(EliasKind::Delta, 2) == 4);
  CHECK(elias_code_bits(EliasKind::Delta, 17) == 9);  // 001 01 0001
  CHECK(elias_code_bits(EliasKind::Delta, UINT64_MAX) == 64 + 2 * 6);
  // gamma: gaps 0, 0, 3 → v = 1, 1, 4 → "1" "1" "00100"
  auto g = encode(*make_coder({"elias", "gamma"}), 100, {0, 1, 5});
  REQUIRE(g.size() == 2);
  CHECK(g[1] == 0b11001000);
  // plain: k words + flags; varint: count + flags + one byte per small gap.
  CHECK(plain_bits(1000, 7) == 8 * (7 * 4 + 1));
  CHECK(plain_bits(uint64_t{1} << 32, 7) == 8 * (7 * 8 + 1));
  const std::vector<uint64_t> v = {0, 127, 255, 100'000};  // gaps 0, 126, 127, 99744
  CHECK(varint_bits(v) == 8 * (1 + 1 + 1 + 1 + 1 + 3));
  CHECK(encode(*make_coder({"varint", ""}), 200'000, v).size() == 8);
}

TEST_CASE("size functions work on universes beyond 2^32 without allocating d", "[index]") {
  const uint64_t d = uint64_t{1} << 40;
  const auto pos = sparse_draws(d, 20'000, 9);  // density ~2e-8
  const uint64_t k = pos.size();
  // The gap coders cost about log2(1/p) + O(1) bits per position, whatever d is.
  const double per = std::log2(static_cast<double>(d) / static_cast<double>(k));
  CHECK(golomb_bits(d, pos) / static_cast<double>(k) == Approx(per + 1.5).margin(0.6));
  CHECK(tcspos_bits(d, k) / static_cast<double>(k) == Approx(per + 2).margin(1.0));
  CHECK(rle_bits(pos) / static_cast<double>(k) < per + 3);  // fixed width: ≈ per + 2.5
  CHECK(elias_bits(EliasKind::Delta, pos) / static_cast<double>(k) < per + 2 * std::log2(per) + 2);
  CHECK(plain_bits(d, k) == 8 * (8 * k + 1));
  CHECK(bitmap_bits(d, k) == d + 8 * idx::leb128_size(k));
  CHECK(tcspos_log2_block(d, k) == static_cast<unsigned>(std::ceil(per)));
  CHECK(tcspos_log2_block(UINT64_MAX, 1) == 63);  // capped: B = 2^63, two blocks
}

TEST_CASE("the best coder on a uniformly random 1% set is within 5% of log2 C(d, k)", "[index]") {
  const uint64_t d = 1'000'000, k = 10'000;
  auto pos = uniform_k(d, k, 2024);
  const double bound = log2_binomial(static_cast<double>(d), static_cast<double>(k));
  uint64_t best = UINT64_MAX;
  std::string best_name;
  for (const auto& c : all_coders()) {
    const uint64_t bits = encode(*make_coder(c), d, pos).size() * 8;
    if (bits < best) best = bits, best_name = c.label();
  }
  INFO("best " << best_name << " " << best << " bits; log2 C(d,k) = " << bound);
  CHECK(best <= 1.05 * bound);
  CHECK(best >= 0.99 * bound);  // nothing beats the counting bound by more than chance
  CHECK(best_name == "golomb");
}
