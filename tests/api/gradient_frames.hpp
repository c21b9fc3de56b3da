// SPDX-License-Identifier: BSD-3-Clause
// Test helpers of the Compressor and Decompressor tests: frames of a small model's gradients as
// TensorViews, and bit-for-bit comparison of decoded tensors.
#pragma once

#include <gradcodec/gradcodec.hpp>

#include "support.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

namespace gradcodec::test {

// One frame (or one rank's bucket in one step) of a small model's gradients: a weight matrix,
// its bias (BIRD's vector attached to its sibling weight), an f64 matrix, and an integer array
// every pipeline passes through.
struct GradFrame {
  std::vector<float> w, b;
  std::vector<double> h;
  std::vector<int64_t> steps;
  std::vector<TensorView> views() const {
    return {{"layer.weight", {64, 48}, w.data()},
            {"layer.bias", {48}, b.data()},
            {"head.weight", {10, 48}, h.data()},
            TensorView::other("steps", "<i8", {2}, steps.data(), steps.size() * 8)};
  }
};

// k frames that change from one to the next (a fixed direction plus noise of each frame's own).
inline std::vector<GradFrame> make_grad_frames(size_t k, uint64_t seed) {
  const auto base_w = gaussian(64 * 48, seed, 0.02f);
  const auto base_h = gaussian(10 * 48, seed + 1, 0.5f);
  std::vector<GradFrame> frames(k);
  for (size_t f = 0; f < k; ++f) {
    GradFrame& fr = frames[f];
    const auto nw = gaussian(64 * 48, seed * 1000 + 10 * f + 2, 0.01f);
    const auto nb = gaussian(48, seed * 1000 + 10 * f + 3, 0.1f);
    const auto nh = gaussian(10 * 48, seed * 1000 + 10 * f + 4, 0.2f);
    fr.w.resize(nw.size());
    for (size_t i = 0; i < nw.size(); ++i) fr.w[i] = base_w[i] + nw[i];
    fr.b = nb;
    fr.h.resize(nh.size());
    for (size_t i = 0; i < nh.size(); ++i) fr.h[i] = double(base_h[i]) + double(nh[i]) / 3.0;
    fr.steps = {int64_t(f), int64_t(1000 + f)};
  }
  return frames;
}

// The two tensors are the same, bit for bit, with the same metadata.
inline void check_same(const Tensor& got, const Tensor& want) {
  INFO("tensor " << want.name());
  CHECK(got.info.name == want.info.name);
  CHECK(got.info.dtype == want.info.dtype);
  CHECK(got.info.descr == want.info.descr);
  CHECK(got.info.big_endian == want.info.big_endian);
  CHECK(got.info.shape == want.info.shape);
  REQUIRE(got.data.size() == want.data.size());
  CHECK(std::memcmp(got.data.data(), want.data.data(), got.data.size()) == 0);
}

inline bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.data.size() == b.data.size() && std::memcmp(a.data.data(), b.data.data(), a.data.size()) == 0;
}

}  // namespace gradcodec::test
