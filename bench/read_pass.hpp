// SPDX-License-Identifier: BSD-3-Clause
// The read pass the benchmarks set encoders against: a sum of |x| over d floats, one pass, eight
// independent accumulators (the compiler vectorises it). Nothing that reads every input value
// once can be faster on the same memory.
#pragma once

#include <cmath>
#include <cstddef>

namespace gradcodec::bench {

inline float abs_sum(const float* x, size_t d) {
  float acc[8] = {};
  for (size_t i = 0; i + 8 <= d; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += std::fabs(x[i + k]);
  float s = 0;
  for (float a : acc) s += a;
  return s;
}

}  // namespace gradcodec::bench
