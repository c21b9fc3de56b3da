// SPDX-License-Identifier: BSD-3-Clause
// golomb — Golomb–Rice code of the gaps with the parameter of Sparse Binary Compression (Sattler et
// al. 2019, §III-C "Golomb encoding of the positions"; cited by BIRD+, Wu et al. 2023, [10], [29]):
//   b* = 1 + ⌊log2( ln(φ − 1) / ln(1 − p) )⌋,  p = k/d,  φ = (1 + √5)/2 (the golden ratio),
// clamped to [0, 63] (b* = 0 for p ≥ ~0.38 and for k = d; 0 also for k = 0). Each gap g (zeros
// before a kept position) is coded as q = ⌊g/2^b⌋ in unary — q zeros then a 1 — followed by the
// low b bits of g. b is stored, so the decoder never evaluates the floating-point formula.
//
// Wire (stream `index`):
//   LEB128 k
//   u8 b in [0, 63]
//   bits (MSB-first): per gap: q × '0', '1', g mod 2^b in b bits; zero padding to a byte
// Size: 8·(|LEB128 k| + 1) + Σ_i (⌊g_i/2^b⌋ + 1 + b) bits, then padded to a byte.
#pragma once
#include <gradcodec/plugin/params.hpp>

#include <cstdint>
#include <span>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_golomb(const Params& p, uint32_t version);

// SBC's b* for k kept of d (the formula above, clamped to [0, 63]).
unsigned golomb_parameter(uint64_t d, uint64_t k) noexcept;
// Payload bits with Rice parameter b: Σ_i (⌊g_i/2^b⌋ + 1 + b).
uint64_t golomb_payload_bits(std::span<const uint64_t> positions, unsigned b) noexcept;
// Exact stream size in bits before byte padding, with b = golomb_parameter(d, k).
uint64_t golomb_bits(uint64_t d, std::span<const uint64_t> positions) noexcept;
}  // namespace gradcodec::stages
