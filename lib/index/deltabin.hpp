// SPDX-License-Identifier: BSD-3-Clause
// deltabin — the index coder of SKCompress (Jiang et al., VLDB Journal 29(5), 2020: "the prefix
// technique" of BIRD+'s comparison, Wu et al. 2023 §IV); the reading chosen is in docs/stages.md
// "skcompress".
//
// deltabin(group=G) — index coder: the gaps (zero runs before each kept position), in groups of
// G (the last may be shorter), each group a 6-bit prefix w = the bit width of its largest gap,
// then its gaps in w bits each. Stream `index`: LEB128 k, the bits, zero padding to a byte.
#pragma once

#include <gradcodec/plugin/params.hpp>
#include <gradcodec/plugin/stage.hpp>

#include <cstdint>
#include <memory>
#include <span>

namespace gradcodec::stages {

// Exact `index` stream size in bits before padding.
uint64_t deltabin_bits(std::span<const uint64_t> positions, uint64_t group) noexcept;

std::unique_ptr<Stage> make_deltabin(const Params& p, uint32_t version);

}  // namespace gradcodec::stages
