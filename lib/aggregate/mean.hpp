// SPDX-License-Identifier: BSD-3-Clause
// mean — the plain average of the workers' values, accumulated in double and rounded once to
// f32: (1/M)·Σ_m g_m. Deterministic. Over a ring each hop sends the running sum as f32: 32 bits
// per element.
#pragma once

#include <gradcodec/merge.hpp>

#include <span>
#include <vector>

namespace gradcodec::aggregate {

MergedValues mean(const std::vector<std::span<const float>>& workers);

}  // namespace gradcodec::aggregate
