// SPDX-License-Identifier: BSD-3-Clause
// intN(bits) — uniform min/max quantization with deterministic rounding, for reference
// (docs/stages.md "intN").
//
// Over the coded values: lo = min, hi = max (sent as f32, so exact), L = 2^bits − 1,
//   q_i = ⌊(v_i − lo)/(hi − lo)·L + 1/2⌋ (round half up, clamped to [0, L]; 0 when hi = lo);
//   decoded lo + q_i·(hi − lo)/L (double, then f32).
// |decoded − v_i| ≤ (hi − lo)/(2L) plus f32 rounding of the result; hi = lo decodes exactly.
// Non-finite values give unspecified (but in-range) codes.
//
// Wire, version 1:
//   value  q_i in `bits` bits per value, MSB-first, zero-padded to a byte.
//   scale  lo then hi, f32 each (8 bytes; none when there are no values).
#pragma once
#include <gradcodec/plugin/params.hpp>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_intn(const Params& p, uint32_t version);
}
