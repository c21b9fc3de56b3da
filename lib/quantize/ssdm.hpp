// SPDX-License-Identifier: BSD-3-Clause
// ssdm — stochastic sign (Safaryan & Richtárik, ICML 2021 "Stochastic Sign Descent Methods";
// as used by Marsit, Wu, He, Guo et al. 2022 §III and appendix A; docs/stages.md "ssdm").
//
// Over the coded values g: N = ‖g‖₂ rounded to f32 (both sides use that value);
//   s_i = +1 with probability 1/2 + g_i/(2N), else −1;   decoded N·s_i.
// E[N·s_i] = g_i: unbiased. (Marsit's §III text writes 1/2 + |g_i|/‖g‖₂, which can exceed 1; the
// factor 2 and the signed g_i are the SSDM paper's and Marsit's appendix A — the reading
// docs/stages.md "ssdm" settles.) The probability is clamped to [0, 1] (f32 rounding of N can
// push it past by an ulp). N = 0 (all values zero) decodes every value to 0 whatever the bits.
// Variance: E‖Q(g) − g‖² = (count − 1)·‖g‖² — large; the price of one unbiased bit.
//
// Wire, version 1:
//   value  1 bit per value, MSB-first, zero-padded: 1 = +1, 0 = −1.
//   scale  N as one f32 (0 bytes when there are no values).
// Randomness: one uniform of ctx.rng(Round) per value, in value order.
#pragma once
#include <gradcodec/plugin/params.hpp>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_ssdm(const Params& p, uint32_t version);
}
