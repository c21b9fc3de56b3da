// SPDX-License-Identifier: BSD-3-Clause
// bitmap — one bit per position of the universe: bit i is 1 iff position i is kept (the mask the
// sparsifier selected; the uncompressed baseline of DeepReduce, Kostopoulou 2020 §2.3, "bit
// compression").
//
// Wire (stream `index`):
//   LEB128 k (the number of 1 bits: a cross-check, decoding refuses a mismatch)
//   ⌈d/8⌉ bytes: bit i is bit (7 − i mod 8) of byte ⌊i/8⌋ (MSB-first, as BitWriter writes);
//   the padding bits of the last byte are 0
// Costs d bits whatever k is: best from a density of about 1/8 up.
#pragma once
#include <gradcodec/plugin/params.hpp>

#include <cstdint>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_bitmap(const Params& p, uint32_t version);

// Stream size in bits before byte padding: 8·|LEB128 k| + d. The stream holds
// |LEB128 k| + ⌈d/8⌉ bytes. (Saturates at UINT64_MAX for d near 2^64.)
uint64_t bitmap_bits(uint64_t d, uint64_t k) noexcept;
}  // namespace gradcodec::stages
