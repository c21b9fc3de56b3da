// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — one training step's aggregation across processes, one worker per process
// (`gradcodec bench --collective`, docs/scale-out.md): what a worker needs to know of a pipeline
// to choose a collective, the mean of the workers' decoded values, and Marsit's one-bit ring one
// hop at a time (docs/merge.md). The caller moves the bytes (MPI); the library does no
// communication. Part of the API: <gradcodec/gradcodec.hpp> includes it.
#pragma once

#include <gradcodec/tensor.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace gradcodec {

// What decides how a pipeline's records are aggregated.
struct CollectiveTraits {
  std::string pipeline;  // canonical text
  // Its decoded values are one sign per element times one scale per tensor (sign, ssdm, onebit,
  // after ef or not): Marsit's ring applies.
  bool signs = false;
  // Its records are the values cast to this type (raw: F32, fp16: F16, bf16: BF16, after ef or
  // not, nothing after): they sum in that form, so an all-reduce aggregates them.
  std::optional<DType> cast;
};
// The traits of a preset name or a pipeline text, not both (neither: "lossless"); Error(Usage)
// for a bad name or text, as EncoderOptions' are refused.
CollectiveTraits collective_traits(const std::string& preset, const std::string& pipeline);

// The element-wise mean of M >= 2 workers' values (spans of equal length): merge()'s "mean",
// equal bit for bit. Error(Usage) for fewer than 2 workers or unequal lengths.
std::vector<float> workers_mean(const std::vector<std::span<const float>>& workers);

// Marsit's ring (docs/merge.md), one worker at a time. A worker's sign bits (unpacked, 1 = value
// >= 0) and scale (mean |value|, in double) are ring_sign_bits and ring_scale of its decoded
// values. Worker 1 sends its bits and scale; worker m (2..M) applies ring_hop to the running bits
// it received, with its own, and adds its scale to the running sum; worker M's bits and
// eta = sum / M are merge()'s marsit output (+eta for a 1 bit, -eta for 0), bit for bit. The
// random choices are keyed by (seed, frame, tensor), as merge()'s. Error(Usage) for m outside
// 2..M or bits of unequal lengths.
std::vector<uint8_t> ring_sign_bits(std::span<const float> values);
double ring_scale(std::span<const float> values);
void ring_hop(std::span<uint8_t> running, std::span<const uint8_t> own, uint32_t m, uint32_t workers,
              uint64_t seed, uint32_t frame, uint32_t tensor);

}  // namespace gradcodec
