// SPDX-License-Identifier: BSD-3-Clause
// lzma(preset) — LZMA2 (liblzma) on a stream; BIRD codes its block indices this way.
// Wire: u8 preset, LEB128 uncompressed size, raw LZMA2 data (no .xz container: 60 bytes saved
// per stream; integrity comes from the container's per-stream XXH3).
#pragma once
#include <gradcodec/plugin/params.hpp>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_lzma(const Params& p, uint32_t version);
}
