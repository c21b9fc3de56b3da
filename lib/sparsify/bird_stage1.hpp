// SPDX-License-Identifier: BSD-3-Clause
// BIRD stage 1's keep decisions, the hot loop of bird/bird+ encoding: block i of a tensor is kept
// iff L_i ≥ max L (the maximum always passes) or u_i < L_i / max L, u_i the 53-bit uniform of
// output i of the Stage1 stream. A portable loop, and an AVX-512 one (eight blocks at a time,
// the SplitMix64 mixer in 64-bit lanes) chosen at run time where the CPU has it; both give the
// same blocks bit for bit (tests/stages/test_bird.cpp).
#pragma once

#include <gradcodec/rng.hpp>

#include <cstdint>
#include <span>

namespace gradcodec::stages {

// Writes the kept blocks of l1 (ascending) to out[0, count) and returns count. `out` has room
// for l1.size() entries (every block may be kept; the vector loop's whole eight-lane stores stay
// within them); past count its contents are unspecified. lmax = max L (finite, > 0),
// inv1 = 1 / lmax. The caller owns the buffer, so a sampler reuses one across tensors: no growth,
// no copy, no fresh pages per tensor.
size_t bird_stage1(std::span<const float> l1, float lmax, double inv1, const Rng& r, uint64_t* out) noexcept;

// The portable loop, whatever the CPU (the reference the vector loop is tested against).
size_t bird_stage1_portable(std::span<const float> l1, float lmax, double inv1, const Rng& r, uint64_t* out) noexcept;

// Whether bird_stage1 runs the AVX-512 loop on this CPU.
bool bird_stage1_vectorised() noexcept;

}  // namespace gradcodec::stages
