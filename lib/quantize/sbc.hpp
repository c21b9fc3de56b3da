// SPDX-License-Identifier: BSD-3-Clause
// sbc — Sparse Binary Compression's value coding (Sattler et al., IJCNN 2019, Algorithm 1; Wu et
// al. 2023 (BIRD+) §II "Hybrid approaches"). Meant to follow topk's by-sign selection and precede
// golomb: the preset `sbc` = "topk(ratio=0.01, by_sign=true) | sbc | golomb". topk(by_sign=true)
// hands over val+ (the top p·d positive values) and val− (the top p·d negative ones); this stage
// keeps the side with the larger mean magnitude, so p·d positions and one value go out —
// Algorithm 1. After a plain topk (the top p·d of |g|, both signs mixed) it keeps one side of that
// set, about p·d/2 positions: not the paper's rule, but still a valid pipeline.
//
// Over the coded values: μ+ = mean of the non-negative values (0 counts as +), μ− = mean of the
// negative ones (double, sent as f32). The side with the larger |μ| is kept (a tie, or no
// negative value, keeps +; no non-negative value keeps −); every kept value becomes that one mean,
// the other side's values become 0.
// Two modes, chosen from the payload alone (the decoder sees the same flags):
//   drop    (a sparsifier's element positions, block = 1, explicit index): encode() removes the
//           other side's positions from p.index and their values from p.values, so the index
//           coder codes only the kept side — this is SBC proper.
//   bitmap  (dense input, a low-rank stage's factors, block positions, or an index the decoder
//           regenerates, e.g. randk(shared_seed=true)): positions cannot be dropped, so a keep
//           bitmap over the coded values goes in `side`. An extension, not in the paper.
//
// Wire, version 1:
//   value  the kept side's mean as one signed f32 (0 bytes when there are no values).
//   side   bitmap mode only: 1 bit per coded value, MSB-first, zero-padded; 1 = kept (decodes to
//          the mean), 0 = dropped (decodes to 0). Drop mode writes no side stream.
#pragma once
#include <gradcodec/plugin/params.hpp>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_sbc(const Params& p, uint32_t version);
}
