// SPDX-License-Identifier: BSD-3-Clause
// MarsitSequence (gradcodec/merge.hpp): Marsit's global compensation and periodic full-precision
// synchronisation over frames (Marsit, Algorithm 1 lines 1, 9–13). The compensation rule
// c ← g + c − g_t, the reset at full-precision frames, the equivalence with plain marsit when
// turned off, and what the compensation buys: Σ_t g_t = Σ_t mean_t − mean_m c_T exactly (up to
// f32 rounding), so the accumulated error stays bounded where plain marsit's grows with T.
#include <gradcodec/merge.hpp>

#include "support.hpp"

#include <catch2/catch.hpp>

#include <cmath>

using namespace gradcodec;
using namespace gradcodec::test;

namespace {

// Frame t of worker m: a shared drift plus the worker's own noise (4 workers, n elements).
std::vector<std::vector<float>> frame(uint32_t t, size_t M, size_t n) {
  std::vector<std::vector<float>> w(M);
  const std::vector<float> common = gaussian(n, 100 + t, 0.5f);
  for (size_t m = 0; m < M; ++m) {
    w[m] = gaussian(n, 1000 * (m + 1) + t);
    for (size_t j = 0; j < n; ++j) w[m][j] += common[j] + 0.2f;  // a non-zero mean that signs lose
  }
  return w;
}

std::vector<std::span<const float>> spans(const std::vector<std::vector<float>>& w) {
  return {w.begin(), w.end()};
}

double accumulated_error(bool compensation, uint32_t frames, size_t M, size_t n) {
  MarsitSequence seq(1, {compensation, 0});
  std::vector<double> sum_mean(n, 0), sum_agg(n, 0);
  for (uint32_t t = 0; t < frames; ++t) {
    const auto w = frame(t, M, n);
    const MergedValues mv = seq.merge(spans(w), {7, t, 0});
    for (size_t j = 0; j < n; ++j) {
      double s = 0;
      for (const auto& x : w) s += x[j];
      sum_mean[j] += s / static_cast<double>(M);
      sum_agg[j] += mv.values[j];
    }
  }
  double diff = 0, ref = 0;
  for (size_t j = 0; j < n; ++j) diff += (sum_mean[j] - sum_agg[j]) * (sum_mean[j] - sum_agg[j]), ref += sum_mean[j] * sum_mean[j];
  return std::sqrt(diff / ref);
}

}  // namespace

TEST_CASE("marsit sequence: c <- g + c - g_t, signs of g + c, eta from |g|", "[merge][marsit]") {
  const size_t M = 3, n = 500;
  MarsitSequence seq(2, {true, 0});
  std::vector<std::vector<float>> c(M, std::vector<float>(n, 0.0f));
  for (uint32_t t = 0; t < 4; ++t) {
    const auto w = frame(t, M, n);
    // What the sequence must do: plain marsit of u = g + c (same key, so the same draws).
    std::vector<std::vector<float>> u(M, std::vector<float>(n));
    for (size_t m = 0; m < M; ++m)
      for (size_t j = 0; j < n; ++j) u[m][j] = w[m][j] + c[m][j];
    double eta = 0;  // the mean of the workers' mean |g| (not |g + c|)
    for (const auto& x : w) {
      double a = 0;
      for (float v : x) a += std::fabs(static_cast<double>(v));
      eta += a / static_cast<double>(n);
    }
    eta /= static_cast<double>(M);
    const MergedValues want = merge_values(MergeMethod::Marsit, spans(u), {5, t, 1}, eta);
    const MergedValues got = seq.merge(spans(w), {5, t, 1});
    REQUIRE(got.values == want.values);
    CHECK(got.hop_bits == want.hop_bits);
    for (size_t m = 0; m < M; ++m) {
      for (size_t j = 0; j < n; ++j) c[m][j] = u[m][j] - want.values[j];
      REQUIRE(seq.compensation(1, m) == c[m]);
    }
    CHECK(seq.compensation(0, 0).empty());  // tensor 0 never merged
  }
}

TEST_CASE("marsit sequence: without compensation every frame is plain marsit; full sync every K frames",
          "[merge][marsit]") {
  const size_t M = 4, n = 300;
  MarsitSequence off(1, {false, 0}), synced(1, {true, 3});
  for (uint32_t t = 0; t < 7; ++t) {
    const auto w = frame(t, M, n);
    CHECK(off.merge(spans(w), {2, t, 0}).values == merge_values(MergeMethod::Marsit, spans(w), {2, t, 0}).values);
    for (size_t m = 0; m < M; ++m)
      for (float x : off.compensation(0, m)) REQUIRE(x == 0.0f);
    const MergedValues s = synced.merge(spans(w), {2, t, 0});
    CHECK(synced.full_precision_frame(t) == (t % 3 == 0));
    if (t % 3 == 0) {  // frames 0, 3, 6: the mean, 32 bits per element per hop, compensation reset
      const MergedValues mean = merge_values(MergeMethod::Mean, spans(w), {2, t, 0});
      CHECK(s.values == mean.values);
      CHECK(s.hop_bits == mean.hop_bits);
      for (size_t m = 0; m < M; ++m)
        for (float x : synced.compensation(0, m)) REQUIRE(x == 0.0f);
    } else {
      CHECK(s.hop_bits == std::vector<uint64_t>(M - 1, n + 32));
      bool nonzero = false;
      for (float x : synced.compensation(0, 0)) nonzero = nonzero || x != 0.0f;
      CHECK(nonzero);
    }
  }
  CHECK_THROWS_AS(off.merge(spans(frame(7, M, n + 1)), {2, 7, 0}), Error);  // the tensor changed length
  CHECK_THROWS_AS(off.merge(spans(frame(7, M, n)), {2, 7, 1}), Error);      // beyond the sequence's tensors
}

TEST_CASE("marsit sequence: compensation keeps the accumulated error bounded", "[merge][marsit]") {
  const size_t M = 4, n = 2000;
  const double off8 = accumulated_error(false, 8, M, n), on8 = accumulated_error(true, 8, M, n);
  const double off32 = accumulated_error(false, 32, M, n), on32 = accumulated_error(true, 32, M, n);
  INFO("8 frames: " << on8 << " with, " << off8 << " without; 32 frames: " << on32 << " with, " << off32
                    << " without");
  CHECK(on8 < off8);
  CHECK(on32 < off32);
  CHECK(on32 < on8);  // Σ g_t − Σ mean_t = −mean_m c_T stays bounded while Σ mean_t grows
}
