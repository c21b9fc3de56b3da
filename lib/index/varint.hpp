// SPDX-License-Identifier: BSD-3-Clause
// varint — gaps between ascending positions as LEB128 bytes (the pipeline's implied index coder:
// PipelineBuilder inserts `varint` after a sparsifier that has no index coder).
//
// Wire (stream `index`, bytes):
//   LEB128 k
//   u8 flags: bit 0 = value order; other bits 0
//   ascending (flags 0): k × LEB128 gap, gap_0 = p_0, gap_i = p_i − p_{i−1} − 1
//   value order (flags 1): k × LEB128 position, in the order of p.index (no deltas: unsorted)
// LEB128: 7 bits per byte, least significant group first, high bit set on every byte but the last.
// Accepts a value-order index (keeps_order): the decoder then checks distinctness instead of order.
#pragma once
#include <gradcodec/plugin/params.hpp>

#include <cstdint>
#include <span>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_varint(const Params& p, uint32_t version);

// Exact stream size in bits: 8·(|LEB128 k| + 1 + Σ |LEB128 v|), v the gaps (ascending) or the
// positions themselves (value order).
uint64_t varint_bits(std::span<const uint64_t> positions, bool value_order = false) noexcept;
}  // namespace gradcodec::stages
