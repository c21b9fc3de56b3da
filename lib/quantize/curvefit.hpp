// SPDX-License-Identifier: BSD-3-Clause
// curvefit(basis, degree, segments) — DeepReduce's curve-fit value coder (Kostopoulou's thesis,
// 2020, §4; docs/stages.md "curvefit").
//
// The kept values of a sparsifier are split into positives (v ≥ 0, with −0 and NaN: the wire's
// sign convention) and negatives; each group is sorted by |v| descending (ties: the lower
// position first) and its magnitude curve is fitted against the rank (curvefit_solver.hpp: poly,
// logit or dexp, in `segments` pieces, fp64 least squares with Eigen). Only the coefficients
// (fp64) and the count of positives are sent; the decoder evaluates the curves and gives the
// first npos values in value order +f(rank), the rest −f(rank). The positions must therefore
// travel in that value order: encode() reorders p.index (Payload::value_order), and the pipeline
// requires an index coder that keeps it (plain or varint) — the sorted, delta-coded index is no
// longer available, and the index stream's larger size is what the record (and bench) counts.
// Non-finite kept values are fitted as the group's largest finite magnitude.
// The RMSE of the decoded values against the coded ones is stored (informative) and reported as
// the figure `curvefit.rmse` by bench and inspect.
//
// Block payloads (bird, block randk): the positions are blocks and keep their ascending order;
// the curve fits each block's mean |v| in position order as one group, every value decodes to
// ± its block's fitted magnitude, and the signs go in `side` (one bit per value, 1 = v ≥ 0).
//
// Wire, version 1 (stream `value`, and `side` for block payloads):
//   LEB128 count            values coded (kept positions × block; must equal the decoder's)
//   LEB128 npos             positives (first in value order); negatives = count − npos;
//                           = count for block payloads (one group of count/block points)
//   f64    rmse             sqrt(Σ (decoded − v)² / count) over the finite v (0 when count = 0)
//   per group with values, positives first:
//     u8   S                segments, 1..64, S ≤ the group's count
//     per segment: u8 basis (0 poly, 1 dexp, 2 logit) · u8 n coefficients (poly/logit 1..16,
//                  dexp 4) · n × f64 (finite)
//   side (block payloads)   count sign bits, MSB-first, zero-padded
// Size: 8·(|count| + |npos| + 8 + Σ_groups (1 + Σ_segments (2 + 8·n))) bits (+ ⌈count/8⌉ bytes of side).
#pragma once
#include <gradcodec/plugin/params.hpp>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_curvefit(const Params& p, uint32_t version);
}
