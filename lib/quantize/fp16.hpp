// SPDX-License-Identifier: BSD-3-Clause
// fp16 / bf16 — cast each value to IEEE binary16 or bfloat16, rounding to nearest even
// (docs/stages.md "fp16", "bf16"). Wire: stream `value` = count × 2 bytes, little-endian.
#pragma once
#include <gradcodec/plugin/params.hpp>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_fp16(const Params& p, uint32_t version);
std::unique_ptr<Stage> make_bf16(const Params& p, uint32_t version);
}
