// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — error metrics between a tensor g and its reconstruction ĝ (docs/bench.md "Fields").
// Accumulate over any number of tensors, then read the totals.
#pragma once

#include <gradcodec/tensor.hpp>

#include <cstdint>
#include <vector>

namespace gradcodec {

struct ErrorMetrics {
  double sum_sq_err = 0;   // Σ (g − ĝ)²
  double sum_sq_ref = 0;   // Σ g²
  double sum_sq_dec = 0;   // Σ ĝ²
  double dot = 0;          // Σ g·ĝ
  double max_abs = 0;      // max |g − ĝ| over finite pairs
  uint64_t count = 0;      // finite pairs compared
  uint64_t sign_agree = 0; // sign(g) == sign(ĝ), with 0 counted as + (the wire's sign convention)
  uint64_t nonfinite = 0;  // pairs with a NaN or Inf on either side (left out of the sums)

  // Adds one tensor pair (same element count; any floating dtypes).
  void add(const Tensor& reference, const Tensor& decoded);
  void add(const float* g, const float* gh, uint64_t n);
  ErrorMetrics& operator+=(const ErrorMetrics& o);

  double rel_l2() const;          // ‖g − ĝ‖₂ / ‖g‖₂ (0 when both are 0)
  double cosine() const;          // g·ĝ / (‖g‖‖ĝ‖) (1 when both are 0)
  double sign_agreement() const;  // fraction in [0, 1]
};

// True when two tensors hold the same dtype, shape and bytes.
bool bit_identical(const Tensor& a, const Tensor& b);

}  // namespace gradcodec
