// SPDX-License-Identifier: BSD-3-Clause
// powersgd: on a fixed matrix repeated over frames, the warm start drives ‖M − M̂‖ to within 1%
// of the rank-r truncated-SVD error (Eigen's SVD as the reference) — which a cold start (every
// frame a keyframe) does not reach; the factors cost exactly r'(n + m) values, so the ratio per
// matrix is nm / (r'(n + m)); 1-D tensors and tensors failing 2(n + m)r' < nm are sent dense and
// exact; zero and rank-deficient matrices give no NaN and the stage recovers after them; error
// feedback is the paper's (the next frame codes g + (M − decoded)); the ResNet-18 (CIFAR) ratios
// at ranks 1, 2, 4 are the survey's 243x, 136x, 72x; the same bytes for any thread count.
#include <catch2/catch.hpp>

#include "lowrank/powersgd.hpp"
#include "sequence_support.hpp"

#include <Eigen/Dense>

#include <cmath>

using namespace gradcodec;
using namespace gradcodec::test;
using gradcodec::stages::powersgd_view;

namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

Tensor matrix_tensor(const std::string& name, const Eigen::MatrixXf& M) {
  RowMat R = M;
  std::vector<float> v(R.data(), R.data() + R.size());
  return make_tensor(name, {static_cast<uint64_t>(M.rows()), static_cast<uint64_t>(M.cols())}, v);
}

Eigen::MatrixXf as_matrix(const std::vector<float>& v, Eigen::Index n, Eigen::Index m) {
  return Eigen::Map<const RowMat>(v.data(), n, m);
}

Eigen::MatrixXf random_orthonormal(Eigen::Index n, uint64_t seed) {
  auto g = gaussian(static_cast<size_t>(n * n), seed);
  Eigen::MatrixXf A = Eigen::Map<Eigen::MatrixXf>(g.data(), n, n);
  return Eigen::HouseholderQR<Eigen::MatrixXf>(A).householderQ();
}

// M = U diag(σ) Vᵀ with σ_i = scale · decay^i (a clear gap between consecutive values).
Eigen::MatrixXf spectrum_matrix(Eigen::Index n, Eigen::Index m, double decay, uint64_t seed, float scale = 10) {
  Eigen::MatrixXf U = random_orthonormal(n, seed), V = random_orthonormal(m, seed + 1);
  const Eigen::Index k = std::min(n, m);
  Eigen::VectorXf s(k);
  for (Eigen::Index i = 0; i < k; ++i) s(i) = scale * static_cast<float>(std::pow(decay, double(i)));
  return U.leftCols(k) * s.asDiagonal() * V.leftCols(k).transpose();
}

// Error of the best rank-r approximation, from Eigen's SVD of M (f64).
double svd_error(const Eigen::MatrixXf& M, Eigen::Index r) {
  Eigen::JacobiSVD<Eigen::MatrixXd> svd(M.cast<double>());
  const auto& s = svd.singularValues();
  double e = 0;
  for (Eigen::Index i = r; i < s.size(); ++i) e += s(i) * s(i);
  return std::sqrt(e);
}

double frob(const Eigen::MatrixXf& A) { return A.cast<double>().norm(); }

bool all_finite(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
}

}  // namespace

TEST_CASE("powersgd: warm start drives the error to the truncated-SVD error", "[powersgd]") {
  const Eigen::Index n = 48, m = 36;
  const Eigen::MatrixXf M = spectrum_matrix(n, m, 0.8, 21);
  const Tensor t = matrix_tensor("layer.weight", M);
  for (int r : {1, 2, 4}) {
    INFO("rank " << r);
    const std::string text = "powersgd(rank=" + std::to_string(r) + ", ef=false)";
    const std::vector<Tensor> frames(40, t);
    const auto out = sequence_roundtrip(text, frames, 9);
    const double ref = svd_error(M, r);
    const double first = frob(M - as_matrix(values_of(out.front()), n, m));
    const double last = frob(M - as_matrix(values_of(out.back()), n, m));
    INFO("SVD error " << ref << ", frame 0 " << first << ", frame 39 " << last);
    CHECK(last <= 1.01 * ref);
    CHECK(last >= 0.999 * ref);  // nothing beats the SVD (a sanity check of the measurement)
    CHECK(first > 1.05 * ref);   // one power iteration from a random Q is not there yet
    // Cold starts (every frame a keyframe: a fresh random Q each frame) stay where frame 0 was.
    auto seq = encode_sequence(text, frames, 1, 9);
    ContainerReader rd(InputFile::from_bytes(seq.bytes, "psgd.gcz"));
    SequenceDecoder dec(rd);
    CHECK(frob(M - as_matrix(values_of(dec.decode(39, 0)), n, m)) > 1.05 * ref);
    // With the warm start through the real container: the same as in memory.
    auto warm = encode_sequence(text, frames, 0, 9);
    ContainerReader rw(InputFile::from_bytes(warm.bytes, "psgd.gcz"));
    CHECK(values_of(SequenceDecoder(rw).decode(39, 0)) == values_of(out.back()));
  }
}

TEST_CASE("powersgd: factors cost r'(n + m) values, a ratio of nm / (r'(n + m))", "[powersgd]") {
  const std::vector<std::vector<uint64_t>> shapes = {
      {64, 3, 3, 3}, {128, 64, 1, 1}, {10, 512}, {256, 128, 3, 3}, {5, 5}};
  for (const auto& shape : shapes) {
    const uint64_t total = shape_elements(shape), n = shape[0], m = total / n;
    const Tensor t = make_tensor("w", shape, gaussian(total, 5 + total));
    for (uint32_t r : {1u, 2u, 4u}) {
      INFO(shape_string(shape) << " rank " << r);
      const auto v = powersgd_view(shape, r);
      const uint64_t rr = std::min<uint64_t>({n, m, r});
      REQUIRE(v.rank == rr);
      REQUIRE(v.compressed == (2 * (n + m) * rr < n * m));
      if (!v.compressed) continue;
      RoundTrip rt = roundtrip("powersgd(rank=" + std::to_string(r) + ")", t, 4);
      const uint64_t bytes = rt.streams.get(kValueStream).size();
      CHECK(bytes == 4 * rr * (n + m));
      CHECK(double(4 * total) / double(bytes) == double(n * m) / double(rr * (n + m)));
      CHECK(all_finite(values_of(rt.decoded)));
    }
  }
}

TEST_CASE("powersgd: 1-D tensors and tensors failing the min-compression rule are sent dense", "[powersgd]") {
  struct Case {
    std::vector<uint64_t> shape;
    uint32_t rank;
  };
  // {4,4} r=1: 2·8·1 = 16 is not < 16; {3,100} r=4 → r'=3: 618 ≥ 300; {4,1000} r=8 → r'=4.
  for (const Case& c : {Case{{}, 1}, Case{{10}, 1}, Case{{4096}, 4}, Case{{4, 3}, 1}, Case{{4, 4}, 1},
                        Case{{3, 100}, 4}, Case{{4, 1000}, 8}, Case{{2, 2, 2}, 1}}) {
    INFO(shape_string(c.shape) << " rank " << c.rank);
    REQUIRE_FALSE(powersgd_view(c.shape, c.rank).compressed);
    const uint64_t n = shape_elements(c.shape);
    const Tensor t = make_tensor("b", c.shape, gaussian(n, 77));
    RoundTrip rt = roundtrip("powersgd(rank=" + std::to_string(c.rank) + ")", t, 2);
    CHECK(rt.streams.get(kValueStream).size() == 4 * n);
    CHECK(values_of(rt.decoded) == values_of(t));
    // Over frames too (error feedback leaves nothing behind on an exact dense record).
    for (const Tensor& out : sequence_roundtrip("powersgd(rank=" + std::to_string(c.rank) + ")", {t, t, t}))
      CHECK(values_of(out) == values_of(t));
  }
  CHECK(powersgd_view({5, 5}, 1).compressed);  // 20 < 25
}

TEST_CASE("powersgd: zero and rank-deficient matrices never produce NaN", "[powersgd]") {
  SECTION("zero frames, then a matrix: the zero columns of Q are drawn again") {
    const Eigen::Index n = 20, m = 15;
    const Eigen::MatrixXf M = spectrum_matrix(n, m, 0.6, 5);
    std::vector<Tensor> frames(4, matrix_tensor("w", Eigen::MatrixXf::Zero(n, m)));
    for (int f = 0; f < 25; ++f) frames.push_back(matrix_tensor("w", M));
    for (bool ef : {false, true}) {
      INFO("ef " << ef);
      const auto out = sequence_roundtrip(std::string("powersgd(rank=2, ef=") + (ef ? "true" : "false") + ")", frames);
      for (size_t f = 0; f < out.size(); ++f) {
        const auto v = values_of(out[f]);
        REQUIRE(all_finite(v));
        if (f < 4) CHECK(std::all_of(v.begin(), v.end(), [](float x) { return x == 0.0f; }));
      }
      if (!ef) CHECK(frob(M - as_matrix(values_of(out.back()), n, m)) <= 1.01 * svd_error(M, 2));
    }
  }
  SECTION("rank-1 and rank-2 matrices at rank 4: exact up to rounding, no NaN") {
    for (int true_rank : {1, 2}) {
      INFO("true rank " << true_rank);
      const Eigen::Index n = 30, m = 20;
      auto a = gaussian(n * true_rank, 3), b = gaussian(m * true_rank, 4);
      const Eigen::MatrixXf M = Eigen::Map<Eigen::MatrixXf>(a.data(), n, true_rank) *
                                Eigen::Map<Eigen::MatrixXf>(b.data(), m, true_rank).transpose();
      const std::vector<Tensor> frames(3, matrix_tensor("w", M));
      for (const Tensor& out : sequence_roundtrip("powersgd(rank=4, ef=false)", frames)) {
        const auto v = values_of(out);
        REQUIRE(all_finite(v));
        CHECK(frob(M - as_matrix(v, n, m)) <= 1e-5 * frob(M));
      }
    }
  }
  SECTION("a constant column and a single nonzero entry") {
    Eigen::MatrixXf M = Eigen::MatrixXf::Zero(12, 9);
    M(3, 4) = 2.5f;
    for (const Tensor& out : sequence_roundtrip("powersgd(rank=3)", std::vector<Tensor>(3, matrix_tensor("w", M)))) {
      const auto v = values_of(out);
      REQUIRE(all_finite(v));
      CHECK(frob(M - as_matrix(v, 12, 9)) <= 1e-6);
    }
  }
}

TEST_CASE("powersgd: error feedback codes M + (previous M - decoded), as Algorithm 2 does", "[powersgd]") {
  const Eigen::Index n = 32, m = 24;
  const Tensor m0 = matrix_tensor("w", spectrum_matrix(n, m, 0.9, 31));
  const Tensor m1 = matrix_tensor("w", spectrum_matrix(n, m, 0.9, 41));
  const auto a = sequence_roundtrip("powersgd(rank=1)", {m0, m1});
  // Without error feedback, coding M1 + e by hand, e = M0 − decoded(M0), gives the same bytes.
  const auto v0 = values_of(m0), d0 = values_of(a[0]);
  auto v1 = values_of(m1);
  for (size_t i = 0; i < v1.size(); ++i) v1[i] = v1[i] + (v0[i] - d0[i]);
  const auto b = sequence_roundtrip("powersgd(rank=1, ef=false)", {m0, make_tensor("w", m1.info.shape, v1)});
  CHECK(values_of(b[0]) == d0);
  CHECK(values_of(b[1]) == values_of(a[1]));

  // Over many frames the memory keeps Σ g − Σ ĝ (= e) bounded; without it the part each frame
  // loses adds up linearly.
  std::vector<Tensor> frames;
  const Eigen::MatrixXf base = spectrum_matrix(n, m, 0.9, 51, 1);
  for (int f = 0; f < 60; ++f) {
    auto noise = gaussian(n * m, 600 + f, 0.05f);
    Eigen::MatrixXf g = base + Eigen::Map<Eigen::MatrixXf>(noise.data(), n, m);
    frames.push_back(matrix_tensor("w", g));
  }
  auto drift = [&](const std::string& text) {  // ‖Σ_{t≤T} (g_t − ĝ_t)‖ after T = 30 and T = 60 frames
    Eigen::MatrixXd sum = Eigen::MatrixXd::Zero(n, m);
    const auto out = sequence_roundtrip(text, frames);
    std::vector<double> at;
    for (size_t f = 0; f < frames.size(); ++f) {
      sum += (as_matrix(values_of(frames[f]), n, m) - as_matrix(values_of(out[f]), n, m)).cast<double>();
      if (f == 29 || f == 59) at.push_back(sum.norm());
    }
    return at;
  };
  const auto with = drift("powersgd(rank=1)"), without = drift("powersgd(rank=1, ef=false)");
  INFO("|sum g - sum decoded| after 30 and 60 frames: with error feedback " << with[0] << ", " << with[1]
                                                                           << "; without " << without[0] << ", "
                                                                           << without[1]);
  CHECK(without[1] > 1.9 * without[0]);  // grows linearly
  CHECK(with[1] < 1.2 * with[0]);        // bounded
  CHECK(with[1] < 0.5 * without[1]);
}

TEST_CASE("powersgd: ResNet-18 (CIFAR) ratios at ranks 1, 2, 4 are the survey's 243x, 136x, 72x", "[powersgd]") {
  const auto shapes = resnet18_cifar_shapes();
  const double published[3] = {243, 136, 72};
  int k = 0;
  for (uint32_t r : {1u, 2u, 4u}) {
    uint64_t in = 0, sent = 0;
    for (const auto& [name, shape] : shapes) {
      const auto v = powersgd_view(shape, r);
      const uint64_t total = shape_elements(shape);
      in += total;
      sent += v.compressed ? v.factor_values() : total;  // dense tensors go as they are
    }
    const double ratio = double(in) / double(sent);
    WARN("powersgd rank " << r << ": ResNet-18 ratio " << ratio << " (values sent: " << sent << " of " << in << ")");
    CHECK(std::fabs(ratio - published[k++]) < 0.5);
  }
}

TEST_CASE("powersgd: the same bytes for any thread count; the seed only moves the initial Q", "[powersgd]") {
  std::vector<std::vector<Tensor>> frames(3);
  for (size_t f = 0; f < 3; ++f)
    frames[f] = {make_tensor("a.weight", {16, 4, 3, 3}, gaussian(576, 10 + f)),
                 make_tensor("a.bias", {16}, gaussian(16, 20 + f)),
                 make_tensor("b.weight", {20, 30}, gaussian(600, 30 + f))};
  const auto one = encode_sequence("powersgd(rank=2, iters=2)", frames, 0, 1, 1).bytes;
  CHECK(encode_sequence("powersgd(rank=2, iters=2)", frames, 0, 1, 3).bytes == one);
  CHECK(encode_sequence("powersgd(rank=2, iters=2)", frames, 0, 2, 1).bytes != one);
}
