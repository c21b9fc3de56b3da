// SPDX-License-Identifier: BSD-3-Clause
// marsit (lib/aggregate/marsit.*): the bitwise operator of Marsit (Wu, He, Guo et al. 2022,
// eq. (2)), its unbiasedness P(final bit = 1) = (#workers with 1)/M, and determinism.
#include "aggregate/marsit.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <cmath>

using namespace gradcodec;
using namespace gradcodec::aggregate;

namespace {

// n elements; worker m has bit 1 at element j iff (m + j) mod M < k: every element has exactly k
// ones, at rotating positions of the ring (so every cyclic arrangement is exercised).
std::vector<std::vector<uint8_t>> rotating_bits(size_t M, size_t k, size_t n) {
  std::vector<std::vector<uint8_t>> bits(M, std::vector<uint8_t>(n));
  for (size_t m = 0; m < M; ++m)
    for (size_t j = 0; j < n; ++j) bits[m][j] = (m + j) % M < k ? 1 : 0;
  return bits;
}

std::vector<uint8_t> run(const std::vector<std::vector<uint8_t>>& bits, uint64_t seed, uint32_t tensor = 0) {
  std::vector<std::span<const uint8_t>> v(bits.begin(), bits.end());
  return marsit_bits(v, Rng(seed, 0, tensor, RngPurpose::Merge));
}

}  // namespace

TEST_CASE("marsit: P(final bit = 1) = #ones/M for M = 2..16 and every count", "[merge][marsit]") {
  // Each element is an independent trial (its own draws). Tolerance: 4.5 binomial sigmas of the
  // observed fraction, sqrt(p(1-p)/n); counts 0 and M must be exact (no disagreement, no draw).
  const size_t n = 40000;
  for (size_t M = 2; M <= 16; ++M) {
    for (size_t k = 0; k <= M; ++k) {
      const auto out = run(rotating_bits(M, k, n), 1000 + 31 * M + k);
      double ones = 0;
      for (uint8_t b : out) ones += b;
      const double p = static_cast<double>(k) / static_cast<double>(M);
      const double got = ones / static_cast<double>(n);
      INFO("M=" << M << " k=" << k << " p=" << p << " observed=" << got);
      if (k == 0 || k == M) {
        CHECK(got == p);
      } else {
        const double sigma = std::sqrt(p * (1 - p) / static_cast<double>(n));
        CHECK(std::fabs(got - p) <= 4.5 * sigma);
      }
    }
  }
}

TEST_CASE("marsit: the probability does not depend on where the ones sit in the ring", "[merge][marsit]") {
  // M = 5, k = 2 ones placed at the front, at the back, and spread; 4.5 sigma each.
  const size_t M = 5, n = 60000;
  const std::vector<std::vector<int>> placements = {{0, 1}, {3, 4}, {0, 4}, {1, 3}};
  for (const auto& ones_at : placements) {
    std::vector<std::vector<uint8_t>> bits(M, std::vector<uint8_t>(n, 0));
    for (int m : ones_at) std::fill(bits[m].begin(), bits[m].end(), 1);
    const auto out = run(bits, 77);
    double ones = 0;
    for (uint8_t b : out) ones += b;
    const double p = 0.4, sigma = std::sqrt(p * (1 - p) / n);
    INFO("ones at workers " << ones_at[0] << "," << ones_at[1] << ": " << ones / n);
    CHECK(std::fabs(ones / n - p) <= 4.5 * sigma);
  }
}

TEST_CASE("marsit: two workers — equal bits stay, different bits are a fair coin", "[merge][marsit]") {
  const size_t n = 50000;
  std::vector<std::vector<uint8_t>> same = {std::vector<uint8_t>(n, 1), std::vector<uint8_t>(n, 1)};
  for (uint8_t b : run(same, 5)) REQUIRE(b == 1);
  same = {std::vector<uint8_t>(n, 0), std::vector<uint8_t>(n, 0)};
  for (uint8_t b : run(same, 5)) REQUIRE(b == 0);
  // v = 1, v* = 0: b = (2-1)/2; v = 0, v* = 1: b = 1/2. Both 1/2 ± 4.5 sigma.
  for (int first = 0; first <= 1; ++first) {
    std::vector<std::vector<uint8_t>> diff = {std::vector<uint8_t>(n, static_cast<uint8_t>(first)),
                                              std::vector<uint8_t>(n, static_cast<uint8_t>(1 - first))};
    double ones = 0;
    for (uint8_t b : run(diff, 6)) ones += b;
    CHECK(std::fabs(ones / n - 0.5) <= 4.5 * std::sqrt(0.25 / n));
  }
}

TEST_CASE("marsit: same seed same bits, other seed or tensor other bits", "[merge][marsit]") {
  const auto bits = rotating_bits(7, 3, 5000);
  REQUIRE(run(bits, 9) == run(bits, 9));
  CHECK(run(bits, 9) != run(bits, 10));
  CHECK(run(bits, 9, 0) != run(bits, 9, 1));
}

TEST_CASE("marsit: values in, ±eta out, eta = mean of the workers' mean |g|", "[merge][marsit]") {
  const auto a = test::gaussian(1000, 1), b = test::gaussian(1000, 2, 3.0f), c = test::gaussian(1000, 3, 0.5f);
  std::vector<std::span<const float>> w = {a, b, c};
  auto mean_abs = [](const std::vector<float>& v) {
    double s = 0;
    for (float x : v) s += std::fabs(x);
    return s / v.size();
  };
  const double eta = (mean_abs(a) + mean_abs(b) + mean_abs(c)) / 3;
  const MergedValues mv = merge_values(MergeMethod::Marsit, w, {4, 0, 0});
  REQUIRE(mv.values.size() == 1000);
  for (float v : mv.values) REQUIRE(std::fabs(v) == static_cast<float>(eta));
  // Where all three workers agree the output has their sign.
  for (size_t j = 0; j < 1000; ++j)
    if ((a[j] >= 0) == (b[j] >= 0) && (b[j] >= 0) == (c[j] >= 0)) REQUIRE((mv.values[j] >= 0) == (a[j] >= 0));
  REQUIRE(mv.hop_bits == std::vector<uint64_t>{1032, 1032});
  const MergedValues given = merge_values(MergeMethod::Marsit, w, {4, 0, 0}, 0.25);
  for (size_t j = 0; j < 1000; ++j) REQUIRE(given.values[j] == (mv.values[j] >= 0 ? 0.25f : -0.25f));
}

TEST_CASE("marsit: the ring hop by hop (marsit_hop) gives merge_values' values bit for bit", "[merge][marsit]") {
  for (uint32_t M : {2u, 3u, 5u}) {
    std::vector<std::vector<float>> g;
    for (uint32_t m = 0; m < M; ++m) g.push_back(test::gaussian(3001, 40 + m, 0.5f + static_cast<float>(m)));
    std::vector<std::span<const float>> spans(g.begin(), g.end());
    const MergeKey key{17, 3, 5};
    const MergedValues whole = merge_values(MergeMethod::Marsit, spans, key);
    // Worker 1 starts the ring; every later worker applies its hop to what it received.
    std::vector<uint8_t> running = merge_sign_bits(g[0]);
    double scales = merge_scale(g[0]);
    for (uint32_t m = 2; m <= M; ++m) {
      marsit_hop(running, merge_sign_bits(g[m - 1]), m, M, key);
      scales += merge_scale(g[m - 1]);
    }
    const float eta = static_cast<float>(scales / M);
    REQUIRE(whole.values.size() == running.size());
    size_t differ = 0;
    for (size_t j = 0; j < running.size(); ++j) differ += whole.values[j] != (running[j] ? eta : -eta);
    CHECK(differ == 0);
  }
  std::vector<uint8_t> a(4, 1), b(5, 0);
  CHECK_THROWS_AS(marsit_hop(a, b, 2, 2, {}), Error);                      // unequal lengths
  CHECK_THROWS_AS(marsit_hop(a, std::vector<uint8_t>(4), 1, 2, {}), Error);  // m below 2
  CHECK_THROWS_AS(marsit_hop(a, std::vector<uint8_t>(4), 3, 2, {}), Error);  // m above M
}
