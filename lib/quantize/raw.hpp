// SPDX-License-Identifier: BSD-3-Clause
// raw — the dense value codec: values stored as they are (docs/stages.md "raw").
// Values untouched since the input (no transform; a selecting sparsifier) are stored in the
// tensor's own dtype, bit for bit (f16/bf16/f32/f64, NaN and Inf patterns kept); values a stage
// has computed are stored as f32. Wire: stream `value` = count × element bytes, little-endian.
#pragma once
#include <gradcodec/plugin/params.hpp>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_raw(const Params& p, uint32_t version);
}
