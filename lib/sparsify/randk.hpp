// SPDX-License-Identifier: BSD-3-Clause
// randk — keep k positions drawn uniformly without replacement (docs/stages.md "randk"; Stich,
// Cordonnier & Jaggi 2018 "Sparsified SGD with Memory" §2 (rand-k); TCS (Ozfatura et al. 2021)
// §I-C: with a shared seed the decoder regenerates the mask, so positions cost nothing).
//
// Universe: U = ceil(d/B) blocks of B = `block` contiguous elements (U = d when B = 1); the last
// block is partial when B does not divide d and holds only its real d − (U−1)·B elements. k and
// ratio count positions of that universe (blocks when B > 1): k = max(1, round(ratio·U)) or the
// given k, at most U. The positions come from ctx.rng(RngPurpose::Select) — the same on encoder
// and decoder for the same (seed, frame, tensor, stage position) — and are ascending.
//
// shared_seed=true: Payload::index_implicit, no index coder and no `index` stream; prepare_decode
// regenerates the positions. shared_seed=false: positions are coded by the index coder.
// unbiased=true: kept values are scaled by U/k (= d/k when B = 1), so E[decoded] = g.
// Values: with B = 1 and unbiased=false the kept values are the input's own elements (exact);
// otherwise they are computed f32 values (a kept partial block is zero-padded to B on the wire).
#pragma once
#include <gradcodec/plugin/params.hpp>

#include <cstdint>
#include <vector>

namespace gradcodec::stages {

// k distinct positions of [0, u), every k-subset equally likely, ascending. Floyd's algorithm
// (Bentley & Floyd 1987, "A sample of brilliance"): k draws of rng.below(j+1) for
// j = u−k .. u−1, membership in a hash set when k < u/16 (O(k) expected, then an O(k log k) sort)
// or in a u-bit bitmap otherwise (O(k + u/64)). Both give the same set for the same draws.
std::vector<uint64_t> random_positions(uint64_t u, uint64_t k, Rng& rng);

std::unique_ptr<Stage> make_randk(const Params& p, uint32_t version);

}  // namespace gradcodec::stages
