// SPDX-License-Identifier: BSD-3-Clause
// elias(kind=gamma|delta) — Elias universal codes (Elias 1975) of v = gap + 1 ≥ 1, the gaps being
// the zero runs before each kept position. Cost does not depend on the universe, only on the gaps.
//   gamma(v): N − 1 zeros, then v in N bits (its leading 1 ends the zeros), N = ⌊log2 v⌋ + 1:
//             2N − 1 bits.
//   delta(v): gamma(N), then the N − 1 bits of v below its leading 1: N + 2⌊log2 N⌋ bits.
// `kind` is a pipeline parameter (stored in the container's pipeline), not in the stream.
//
// Wire (stream `index`):
//   LEB128 k
//   bits (MSB-first): k codes; zero padding to a byte
// Size: 8·|LEB128 k| + Σ_i len(g_i + 1) bits, then padded to a byte.
#pragma once
#include <gradcodec/plugin/params.hpp>

#include <cstdint>
#include <span>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_elias(const Params& p, uint32_t version);

enum class EliasKind : uint8_t { Gamma, Delta };
// Bits of one code of v ≥ 1.
unsigned elias_code_bits(EliasKind kind, uint64_t v) noexcept;
// Exact stream size in bits before byte padding.
uint64_t elias_bits(EliasKind kind, std::span<const uint64_t> positions) noexcept;
}  // namespace gradcodec::stages
