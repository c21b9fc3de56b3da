// SPDX-License-Identifier: BSD-3-Clause
// topk(by_sign=true): the k largest non-negative values and the k most negative ones, each side
// ranked as topk ranks (|v| descending, ties to the lower index) — checked against a stable sort
// per side on tie-heavy tensors for every k; a short side is kept whole; scope=global refused.
#include <catch2/catch.hpp>

#include "sparsify/topk.hpp"
#include "support.hpp"

#include <gradcodec/error.hpp>
#include <gradcodec/rng.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

using namespace gradcodec;
using namespace gradcodec::test;

namespace {

std::vector<uint64_t> by_stable_sort(const std::vector<float>& v, uint64_t k) {
  std::vector<uint64_t> side[2], out;
  for (uint64_t i = 0; i < v.size(); ++i) side[v[i] < 0.0f].push_back(i);
  for (auto& s : side) {
    std::stable_sort(s.begin(), s.end(), [&](uint64_t a, uint64_t b) { return std::fabs(v[a]) > std::fabs(v[b]); });
    out.insert(out.end(), s.begin(), s.begin() + static_cast<std::ptrdiff_t>(std::min<uint64_t>(k, s.size())));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("topk_select_by_sign keeps the k largest of each sign, as a stable sort per side would", "[topk]") {
  // Values from a few magnitudes, both signs and ±0: many ties on each side; also far more of
  // one sign than the other, so that one side runs short for large k.
  for (int mix : {50, 90}) {
    std::vector<float> v(300);
    Rng rng(5, 0, static_cast<uint32_t>(mix), RngPurpose::Sample);
    for (float& x : v) {
      const float mag = std::ldexp(1.0f + std::floor(static_cast<float>(rng.uniform()) * 4.0f), -3);
      x = rng.uniform() * 100 < mix ? mag : -mag;
      if (rng.uniform() < 0.05) x = rng.uniform() < 0.5 ? 0.0f : -0.0f;
    }
    for (uint64_t k = 0; k <= v.size(); ++k) {
      INFO("mix " << mix << ", k = " << k);
      REQUIRE(stages::topk_select_by_sign(v, k) == by_stable_sort(v, k));
    }
  }
}

TEST_CASE("topk(by_sign=true) in a pipeline: k per sign; not with scope=global", "[topk]") {
  Tensor t = make_tensor("w", {2000}, gaussian(2000, 9));
  const std::vector<float> v = values_of(t);
  const std::vector<float> out = values_of(roundtrip("topk(k=30, by_sign=true)", t).decoded);
  std::vector<uint64_t> kept;
  for (uint64_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0.0f) continue;
    kept.push_back(i);
    REQUIRE(out[i] == v[i]);
  }
  CHECK(kept == by_stable_sort(v, 30));
  CHECK(kept.size() == 60);
  CHECK_THROWS_AS(roundtrip("topk(ratio=0.01, by_sign=true, scope=global)", t), Error);
}
