// SPDX-License-Identifier: BSD-3-Clause
// zstd(level) — Zstandard on a stream (RFC 8878). Wire: one zstd frame with its content size.
#pragma once
#include <gradcodec/plugin/params.hpp>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_zstd(const Params& p, uint32_t version);
}
