// SPDX-License-Identifier: BSD-3-Clause
#include "quantize/curvefit_solver.hpp"

#include <Eigen/Dense>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>

namespace gradcodec::stages::curvefit {

namespace {

constexpr double kMaxRate = 60.0;  // |w_1|, |w_3| ≤ 60: e^{60} stays far from overflow

// The local coordinate t of rank i in a segment of length L, per basis (see the header).
double coordinate(Basis b, uint64_t i, uint64_t L) noexcept {
  if (L <= 1) return 0.0;
  const double x = static_cast<double>(i), n = static_cast<double>(L);
  switch (b) {
    case Basis::Poly: return 2.0 * x / (n - 1.0) - 1.0;
    case Basis::Dexp: return x / (n - 1.0);
    case Basis::Logit: {
      // logit((i + ½)/L), scaled by its largest value ln(2L − 1) into [−1, 1] (the same function
      // space as the unscaled logit; only the conditioning of the powers improves).
      const double l = std::log((x + 0.5) / (n - x - 0.5));
      return l / std::log(2.0 * n - 1.0);
    }
  }
  return 0.0;
}

bool all_finite(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

// Linear least squares in powers of the basis coordinate, lowering the degree until the design
// matrix has full rank and the coefficients are finite; the mean as the last resort.
Segment fit_linear(std::span<const double> y, Basis basis, unsigned degree) {
  const uint64_t L = y.size();
  Eigen::Map<const Eigen::VectorXd> Y(y.data(), static_cast<Eigen::Index>(L));
  std::vector<double> t(L);
  for (uint64_t i = 0; i < L; ++i) t[i] = coordinate(basis, i, L);
  for (int d = static_cast<int>(std::min<uint64_t>(degree, L - 1)); d >= 0; --d) {
    Eigen::MatrixXd X(static_cast<Eigen::Index>(L), d + 1);
    for (uint64_t i = 0; i < L; ++i) {
      double v = 1.0;
      for (int j = 0; j <= d; ++j, v *= t[i]) X(static_cast<Eigen::Index>(i), j) = v;
    }
    Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(X);
    if (qr.rank() < d + 1) continue;
    Eigen::VectorXd w = qr.solve(Y);
    Segment s{basis, std::vector<double>(w.data(), w.data() + w.size())};
    if (all_finite(s.coef)) return s;
  }
  double mean = 0;
  for (double v : y) mean += v / static_cast<double>(L);
  return Segment{Basis::Poly, {std::isfinite(mean) ? mean : 0.0}};
}

double dexp_sse(std::span<const double> t, std::span<const double> y, const double w[4]) {
  double sse = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const double r = y[i] - (w[0] * std::exp(w[1] * t[i]) + w[2] * std::exp(w[3] * t[i]));
    sse += r * r;
  }
  return std::isfinite(sse) ? sse : std::numeric_limits<double>::infinity();
}

// Levenberg–Marquardt from w (in place); returns the final squared error.
double levenberg_marquardt(std::span<const double> t, std::span<const double> y, double w[4]) {
  double sse = dexp_sse(t, y, w);
  if (!std::isfinite(sse)) return sse;
  double lambda = 1e-3;
  for (unsigned it = 0; it < kDexpIterations; ++it) {
    Eigen::Matrix4d A = Eigen::Matrix4d::Zero();
    Eigen::Vector4d g = Eigen::Vector4d::Zero();
    for (size_t i = 0; i < t.size(); ++i) {
      const double e1 = std::exp(w[1] * t[i]), e3 = std::exp(w[3] * t[i]);
      const Eigen::Vector4d J(e1, w[0] * t[i] * e1, e3, w[2] * t[i] * e3);
      const double r = y[i] - (w[0] * e1 + w[2] * e3);
      A.noalias() += J * J.transpose();
      g += J * r;
    }
    const double scale = std::max(A.diagonal().maxCoeff(), 1e-300);
    bool accepted = false;
    for (int tries = 0; tries < 20 && !accepted; ++tries) {
      Eigen::Matrix4d M = A;
      for (int j = 0; j < 4; ++j) M(j, j) += lambda * std::max(A(j, j), 1e-12 * scale);
      const Eigen::Vector4d delta = M.ldlt().solve(g);
      double trial[4];
      for (int j = 0; j < 4; ++j) trial[j] = w[j] + delta[j];
      trial[1] = std::clamp(trial[1], -kMaxRate, kMaxRate);
      trial[3] = std::clamp(trial[3], -kMaxRate, kMaxRate);
      const bool finite = std::isfinite(trial[0]) && std::isfinite(trial[1]) && std::isfinite(trial[2]) &&
                          std::isfinite(trial[3]);
      const double s = finite ? dexp_sse(t, y, trial) : std::numeric_limits<double>::infinity();
      if (s < sse) {
        const double gain = sse - s;
        std::copy(trial, trial + 4, w);
        sse = s;
        lambda = std::max(lambda / 3.0, 1e-12);
        accepted = true;
        if (gain <= 1e-12 * s) return sse;  // converged
      } else {
        lambda *= 4.0;
      }
    }
    if (!accepted) break;
  }
  return sse;
}

}  // namespace

bool fit_dexp(std::span<const double> t, std::span<const double> y, double w[4]) {
  // Start from one exponential fitted to ln y (the positive y), split into a fast and a slow part.
  double st = 0, sy = 0, stt = 0, sty = 0, n = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    if (!(y[i] > 0)) continue;
    const double ly = std::log(y[i]);
    st += t[i], sy += ly, stt += t[i] * t[i], sty += t[i] * ly, n += 1;
  }
  if (n == 0) {  // all zero: the zero curve is exact
    std::fill(w, w + 4, 0.0);
    return true;
  }
  const double den = n * stt - st * st;
  double B = den > 0 ? (n * sty - st * sy) / den : 0.0;
  double A = std::exp((sy - B * st) / n);
  B = std::clamp(std::isfinite(B) ? B : 0.0, -kMaxRate / 2, kMaxRate / 2);
  if (!std::isfinite(A)) A = 0;
  const double starts[2][4] = {{0.5 * A, 2.0 * B - 1.0, 0.5 * A, 0.5 * B}, {A, B, 0.0, 0.0}};
  double best = std::numeric_limits<double>::infinity();
  for (const auto& s0 : starts) {
    double v[4] = {s0[0], s0[1], s0[2], s0[3]};
    const double sse = levenberg_marquardt(t, y, v);
    if (sse < best) best = sse, std::copy(v, v + 4, w);
  }
  return std::isfinite(best);
}

double evaluate(const Segment& s, uint64_t i, uint64_t L) noexcept {
  const double t = coordinate(s.basis, i, L);
  if (s.basis == Basis::Dexp) {
    if (s.coef.size() != 4) return 0.0;
    return s.coef[0] * std::exp(s.coef[1] * t) + s.coef[2] * std::exp(s.coef[3] * t);
  }
  double v = 0;
  for (size_t j = s.coef.size(); j-- > 0;) v = v * t + s.coef[j];
  return v;
}

std::vector<Segment> fit_group(std::span<const double> y, Basis basis, unsigned degree, unsigned segments) {
  const uint64_t c = y.size();
  std::vector<Segment> out;
  if (c == 0) return out;
  degree = std::min(degree, kMaxDegree);
  // At least 4 values per coefficient in every segment: a segment's coefficients (8n + 2 bytes)
  // then cost about half of its values as f32, and no segment is shorter than its coefficients.
  const uint64_t n = basis == Basis::Dexp ? 4 : degree + 1;
  const uint64_t S = std::clamp<uint64_t>(std::min<uint64_t>(segments, c / (4 * n)), 1, kMaxSegments);
  for (uint64_t s = 0; s < S; ++s) {
    const uint64_t a = segment_start(s, S, c), b = segment_start(s + 1, S, c);
    std::span<const double> ys = y.subspan(a, b - a);
    const uint64_t L = ys.size();
    if (basis == Basis::Dexp && L >= 4) {
      std::vector<double> t(L);
      for (uint64_t i = 0; i < L; ++i) t[i] = coordinate(Basis::Dexp, i, L);
      double w[4];
      if (fit_dexp(t, ys, w)) {
        out.push_back(Segment{Basis::Dexp, {w[0], w[1], w[2], w[3]}});
        continue;
      }
    }
    out.push_back(fit_linear(ys, basis == Basis::Dexp ? Basis::Poly : basis, degree));
  }
  return out;
}

void evaluate_group(const std::vector<Segment>& segs, uint64_t c, float* out) {
  const uint64_t S = segs.size();
  for (uint64_t s = 0; s < S; ++s) {
    const uint64_t a = segment_start(s, S, c), b = segment_start(s + 1, S, c);
    for (uint64_t i = a; i < b; ++i) {
      const double v = evaluate(segs[s], i - a, b - a);
      out[i] = v > 0 ? static_cast<float>(std::min(v, static_cast<double>(FLT_MAX))) : 0.0f;
    }
  }
}

}  // namespace gradcodec::stages::curvefit
