// SPDX-License-Identifier: BSD-3-Clause
// The fitting behind curvefit (DeepReduce, Kostopoulou 2020 §4): least-squares fits of a sorted
// magnitude curve y_0 ≥ y_1 ≥ … against the rank, in fp64, with Eigen.
//
// A group of c magnitudes (ranks 0..c−1) is cut into S contiguous segments of near-equal length
// (segment s covers ranks ⌊s·c/S⌋ .. ⌊(s+1)·c/S⌋ − 1); each segment is fitted on its own against a
// local coordinate of the local rank i of a segment of length L:
//   poly   Σ_j w_j t^j,             t = 2i/(L−1) − 1 ∈ [−1, 1]   (t = 0 when L = 1), j = 0..degree
//   logit  Σ_j w_j t^j,             t = ln(u/(1−u)), u = (i + ½)/L (the logit of §4.2.1)
//   dexp   w_0 e^{w_1 t} + w_2 e^{w_3 t},  t = i/(L−1) ∈ [0, 1]      (§4.3.1)
// poly and logit are linear least squares (column-pivoting Householder QR); dexp is non-linear
// and is solved by Levenberg–Marquardt (at most 100 iterations, a step is taken only when it
// lowers the squared error and everything stays finite, rates clamped to [−60, 60]).
// Fallbacks instead of failures: fewer segments, S = min(segments, max(1, ⌊c / (4n)⌋)) with n
// the coefficient count (degree + 1, or 4 for dexp), so that every segment has at least 4 values
// per coefficient (and none is shorter than its coefficients); a lower degree when the design matrix is rank-deficient; poly in place of
// dexp on a segment shorter than 4 or when the solver cannot produce a finite fit; a constant
// (the mean) as the last resort. A decoded magnitude is the fitted value clamped to [0, FLT_MAX]
// (negative or NaN → 0), rounded to f32.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace gradcodec::stages::curvefit {

enum class Basis : uint8_t { Poly = 0, Dexp = 1, Logit = 2 };

inline constexpr unsigned kMaxDegree = 15;    // poly and logit: at most 16 coefficients
inline constexpr unsigned kMaxSegments = 64;
inline constexpr unsigned kDexpIterations = 100;

struct Segment {
  Basis basis = Basis::Poly;
  std::vector<double> coef;  // poly/logit: w_0..w_degree; dexp: w_0..w_3
};

// First rank of segment s of S over c values.
inline uint64_t segment_start(uint64_t s, uint64_t S, uint64_t c) noexcept {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(s) * c) / S);
}

// Fits the magnitudes y (finite, ≥ 0, in rank order) with up to `segments` segments.
std::vector<Segment> fit_group(std::span<const double> y, Basis basis, unsigned degree, unsigned segments);

// The decoded magnitudes of a group of c values (see the header comment for the clamping).
void evaluate_group(const std::vector<Segment>& segs, uint64_t c, float* out);

// The fitted value at local rank i of a segment of length L (before clamping).
double evaluate(const Segment& s, uint64_t i, uint64_t L) noexcept;

// Levenberg–Marquardt fit of w_0 e^{w_1 t} + w_2 e^{w_3 t} to (t, y); false when no finite fit.
bool fit_dexp(std::span<const double> t, std::span<const double> y, double w[4]);

}  // namespace gradcodec::stages::curvefit
