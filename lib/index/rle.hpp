// SPDX-License-Identifier: BSD-3-Clause
// rle — run-length code of the bitmap counting only the zeros (Kostopoulou 2020 §2.3.1,
// DeepReduce's RLE baseline, Figure 1): each kept position is coded as the run of zeros before it
// (its gap), in fixed-width w-bit codes. A run longer than the largest code is split with an
// escape: the code M = 2^w − 1 means "M zeros and the run goes on"; any other code c means "c
// zeros, then a 1". The trailing zeros after the last 1 are not coded (the count ends the stream).
// The width w is chosen per tensor to minimise the size (ties: the smaller w); w = 1 is the bitmap
// up to its trailing zeros.
//
// Wire (stream `index`):
//   LEB128 k
//   u8 w in [1, 64]
//   bits (MSB-first): per gap g: ⌊g/M⌋ escape codes, then g mod M, each in w bits; zero padding
// Size: 8·(|LEB128 k| + 1) + w·Σ_i (⌊g_i/M⌋ + 1) bits, then padded to a byte.
#pragma once
#include <gradcodec/plugin/params.hpp>

#include <cstdint>
#include <span>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_rle(const Params& p, uint32_t version);

// Payload bits of ascending positions coded with width w: w·Σ_i (⌊g_i/(2^w − 1)⌋ + 1).
uint64_t rle_payload_bits(std::span<const uint64_t> positions, unsigned w) noexcept;
// The width the encoder picks: the w in [1, 64] with the fewest payload bits (ties: smaller w).
unsigned rle_best_width(std::span<const uint64_t> positions);
// Exact stream size in bits before byte padding: 8·(|LEB128 k| + 1) + rle_payload_bits(best w).
uint64_t rle_bits(std::span<const uint64_t> positions);
}  // namespace gradcodec::stages
