// SPDX-License-Identifier: BSD-3-Clause
// The `sbc` preset as Sattler et al. 2019, Algorithm 1, on the bundled real gradients: with
// sparsity p, val+ = the top p·d positive values, val− = the top p·d negative values by
// magnitude, μ+ = mean(val+), μ− = mean(|val−|); the side with the larger mean is sent, its p·d
// positions and the one value ±μ.
#include <catch2/catch.hpp>

#include "support.hpp"

#include <gradcodec/formats/snapshot_io.hpp>
#include <gradcodec/plugin/registry.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

using namespace gradcodec;
using namespace gradcodec::test;

namespace {

// The expected kept side, computed the slow way: a stable sort of each sign by |v| descending
// (ties to the lower index), the first k of each, their means, the larger one's positions.
struct Expected {
  std::vector<uint64_t> positions;  // ascending
  double value = 0;                 // +μ+ or −μ−
};

Expected paper_sbc(const std::vector<float>& v, double ratio) {
  const uint64_t d = v.size();
  const uint64_t k = std::clamp<uint64_t>(static_cast<uint64_t>(std::llround(ratio * static_cast<double>(d))), 1, d);
  std::vector<uint64_t> side[2];  // 0: v ≥ 0 (the wire's sign convention), 1: v < 0
  for (uint64_t i = 0; i < d; ++i) side[v[i] < 0.0f].push_back(i);
  double mean[2] = {0, 0};
  for (auto& s : side) {
    std::stable_sort(s.begin(), s.end(), [&](uint64_t a, uint64_t b) { return std::fabs(v[a]) > std::fabs(v[b]); });
    if (s.size() > k) s.resize(k);
  }
  for (int s = 0; s < 2; ++s) {
    for (uint64_t i : side[s]) mean[s] += std::fabs(static_cast<double>(v[i]));
    if (!side[s].empty()) mean[s] /= static_cast<double>(side[s].size());
  }
  const int keep = mean[0] >= mean[1] ? 0 : 1;  // μ+ ≥ μ− sends the positive side
  Expected e;
  e.positions = side[keep];
  std::sort(e.positions.begin(), e.positions.end());
  e.value = keep == 0 ? mean[0] : -mean[1];
  return e;
}

}  // namespace

TEST_CASE("the sbc preset sends p*d positions of one sign, all +-mu of that side (Sattler et al. 2019 Alg. 1)",
          "[quantize][sbc]") {
  const Preset* preset = find_preset("sbc");
  REQUIRE(preset != nullptr);
  const double p = 0.01;  // the preset's sparsity
  size_t checked = 0, negative_sides = 0;
  for (const char* step : {"step_000", "step_001", "step_002", "step_003"}) {
    auto reader = formats::open_snapshot(std::string(GRADCODEC_SOURCE_DIR) + "/test_data/snapshots/" + step + ".npz");
    for (size_t i = 0; i < reader->arrays().size(); ++i) {
      if (!is_float(reader->arrays()[i].dtype)) continue;
      Tensor t = reader->read(i);
      const std::vector<float> v = values_of(t);
      if (v.size() < 1000) continue;  // p·d ≥ 10 positions
      const Expected want = paper_sbc(v, p);
      INFO(step << " " << t.name() << ": d = " << v.size() << ", mu = " << want.value);
      const std::vector<float> out = values_of(roundtrip(preset->pipeline, t, 3).decoded);
      REQUIRE(out.size() == v.size());
      std::vector<uint64_t> got;
      const float mu = static_cast<float>(want.value);
      for (uint64_t j = 0; j < out.size(); ++j) {
        if (out[j] == 0.0f) continue;
        got.push_back(j);
        REQUIRE(out[j] == Approx(mu).epsilon(1e-6));  // one value: ±μ of the chosen side
      }
      // p·d positions (the side has more than p·d values on every tensor checked), exactly the
      // top p·d of that side.
      CHECK(double(got.size()) == Approx(p * double(v.size())).margin(0.5));
      CHECK(got == want.positions);
      negative_sides += want.value < 0;
      ++checked;
    }
  }
  CHECK(checked >= 40);
  CHECK(negative_sides > 0);  // both branches of the choice are exercised
  CHECK(negative_sides < checked);
}
