// SPDX-License-Identifier: BSD-3-Clause
// plain — fixed-width positions: u32 when the universe d < 2^32, u64 when d ≥ 2^32 (the width is
// a function of d, which the decoder knows). The baseline of TCS's eq. (10): every kept
// position costs a fixed log2 d-ish word.
//
// Wire (stream `index`, width hint 4 or 8 for `shuffle`):
//   k × position, little-endian u32/u64, in the order of p.index
//   u8 flags: bit 0 = value order (positions follow the values, not ascending); others 0
// The count is the stream's length: k = (bytes − 1) / width, which must divide exactly. The flags
// trail the positions so that the positions stay aligned for byte shuffling.
// Accepts a value-order index (keeps_order): the decoder then checks distinctness instead of order.
#pragma once
#include <gradcodec/plugin/params.hpp>

#include <cstdint>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_plain(const Params& p, uint32_t version);

// Bytes per position for a universe of d positions: 4 when d < 2^32, else 8.
unsigned plain_width(uint64_t d) noexcept;
// Exact stream size in bits: 8·(k·plain_width(d) + 1).
uint64_t plain_bits(uint64_t d, uint64_t k) noexcept;
}  // namespace gradcodec::stages
