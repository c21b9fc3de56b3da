// SPDX-License-Identifier: BSD-3-Clause
// tcspos — the TCS block position code (Ozfatura, Ozfatura & Gündüz 2021 §II-E, Algorithm 4,
// eq. (18)). The universe of d positions is cut into blocks of B = 2^L positions, L = ⌈log2(1/φ)⌉
// with φ = k/d the kept fraction (computed exactly in integers: L = ⌈log2 ⌈d/k⌉⌉, capped at 63).
// The blocks are visited in order; in each, every kept position is sent as '1' followed by its
// offset in the block in L bits (ascending), and '0' ends the block — every block, the last and the
// empty ones included, as in the paper's example [1 00 1 10 0 0 1 01 0] (d = 12, B = 4, positions
// 0, 2, 9). The decoder learns B from the stored L (it never recomputes φ). k = 0 sends no blocks
// at all.
//
// Wire (stream `index`):
//   LEB128 k
//   u8 L in [0, 63]
//   bits (MSB-first), when k > 0: for each of the ⌈d/B⌉ blocks: per kept position in it
//   '1' + offset (L bits), then '0'; zero padding to a byte
// Size: 16 + 8·(|LEB128 k| − 1) + k·(L + 1) + ⌈d/B⌉ bits (k > 0), then padded to a byte.
// At φ = 1% this is log2 128 + 1 = 8 bits per position plus 1/128 bit per element.
#pragma once
#include <gradcodec/plugin/params.hpp>

#include <cstdint>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_tcspos(const Params& p, uint32_t version);

// L = log2 B for k kept of d: the smallest L with 2^L ≥ d/k, capped at 63 (0 when k = 0).
unsigned tcspos_log2_block(uint64_t d, uint64_t k) noexcept;
// Number of blocks ⌈d / 2^L⌉.
uint64_t tcspos_blocks(uint64_t d, unsigned log2_block) noexcept;
// Exact stream size in bits before byte padding — a formula of d and k only:
// 8·(|LEB128 k| + 1) + (k > 0 ? k·(L + 1) + ⌈d/2^L⌉ : 0).
uint64_t tcspos_bits(uint64_t d, uint64_t k) noexcept;
}  // namespace gradcodec::stages
