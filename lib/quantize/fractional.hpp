// SPDX-License-Identifier: BSD-3-Clause
// fractional(P) — fractional quantization of TCS (Ozfatura, Ozfatura & Gündüz 2021 §II-F, eqs.
// 20–24; docs/stages.md "fractional").
//
// Over the coded values u: u_max = max |u_i|, u_min = min of the NONZERO |u_i| (the paper's
// u_min; zeros are excluded so the bound below means something — with u_min = 0, σ would be 0),
// σ = (u_min/u_max)^(1/P). Interval p = 1..P is I_p = [σ^p·u_max, σ^(p−1)·u_max]; a value with
// |u_i| on an edge goes to the lower-numbered interval. μ_p = mean of the |u_i| in I_p (double,
// sent as f32; 0 for an empty interval); decoded sign(u_i)·μ_p (sign(0) = +; a zero is exact,
// see `side`). Guarantee (eq. 23): |Q(u_i) − u_i| ≤ ((1 − σ)/σ)·|u_i| for every value, up to the
// f32 rounding of μ_p (one half-ulp).
// P need not be a power of two: the interval index takes ⌈log2 P⌉ bits and codes ≥ P are
// refused as corrupt. P = 1 is the scaled sign with the mean |u|.
// Cost: count·(⌈log2 P⌉ + 1) bits (padded to a byte) + 32·P bits, exactly the paper's
// d(log2 P + 1) + 32P for a power-of-two P and values without exact zeros.
//
// Wire, version 1:
//   value  per value, MSB-first, zero-padded: the sign bit (1 = non-negative), then p − 1 in
//          ⌈log2 P⌉ bits.
//   scale  μ_1 … μ_P, f32 each (4·P bytes; none when there are no values).
//   side   only when some value is exactly ±0: 1 bit per value, MSB-first, zero-padded, 1 = the
//          value is zero (decodes to 0; its code in `value` is sign 1, interval P). Absent
//          otherwise. (The paper's sign(0) = 0 has no code among its log2 P + 1 bits.)
#pragma once
#include <gradcodec/plugin/params.hpp>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_fractional(const Params& p, uint32_t version);
}
