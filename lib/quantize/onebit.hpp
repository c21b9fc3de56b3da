// SPDX-License-Identifier: BSD-3-Clause
// onebit(per=column|tensor) — 1-bit SGD quantization (Seide et al., Interspeech 2014; Makkar
// 2023 (survey) §2.3; docs/stages.md "onebit"). Meant to follow `ef` (the preset `onebit` =
// "ef | onebit").
//
// Groups: per=column views a dense tensor of rank ≥ 2 as the C-order matrix [R = shape[0],
// C = n/R] and makes each column j (elements i·C + j, i < R) a group; a 1-D or 0-d tensor, a
// sparsifier's kept values, a low-rank stage's factors, and per=tensor (as GRACE does) make one
// group of all the coded values.
// In each group: bit_i = (v_i ≥ 0) (0 counts as non-negative); μ0 = mean of the values with bit 0,
// μ1 = mean of the values with bit 1 (computed in double, sent as f32; 0 for an empty side);
// decoded v_i = μ_{bit_i}.
//
// Wire, version 1:
//   value  1 bit per value in value order (row-major for a matrix), MSB-first, zero-padded.
//   scale  per group in order (column 0, 1, ...): μ0 then μ1, f32 each (8 bytes per group; none
//          when there are no values).
#pragma once
#include <gradcodec/plugin/params.hpp>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_onebit(const Params& p, uint32_t version);
}
