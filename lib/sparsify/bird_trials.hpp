// SPDX-License-Identifier: BSD-3-Clause
// BIRD+ stage 2's trials over U, the hot loop of its sampling after stage 1: the number of blocks
// j of U with u_j < p_j^γ, u_j the 53-bit uniform of output U[j] of the Stage2 stream, decided by
// PowLess (bird_sample.hpp). A portable loop, and an AVX-512 one (eight trials at a time: the
// SplitMix64 mixer in 64-bit lanes, the table's bounds gathered, pow called for the lanes in
// PowLess's band) chosen at run time where the CPU has it; both give the same count
// (tests/stages/test_bird.cpp).
#pragma once

#include "sparsify/bird_sample.hpp"

#include <gradcodec/rng.hpp>

#include <cstdint>
#include <span>

namespace gradcodec::stages {

// Σ_j less(r.uniform_at(u_set[j]), pinf[j]) over j < u_set.size() (= pinf.size()).
uint64_t bird_plus_trials(std::span<const uint64_t> u_set, std::span<const float> pinf, const Rng& r,
                          const PowLess& less) noexcept;
uint64_t bird_plus_trials_portable(std::span<const uint64_t> u_set, std::span<const float> pinf, const Rng& r,
                                   const PowLess& less) noexcept;

// Whether bird_plus_trials runs the AVX-512 loop on this CPU.
bool bird_plus_trials_vectorised() noexcept;

}  // namespace gradcodec::stages
