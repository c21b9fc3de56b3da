// SPDX-License-Identifier: BSD-3-Clause
// zstd(level) — Zstandard on a stream (RFC 8878). Wire: one zstd frame with its content size.
#pragma once
#include <gradcodec/plugin/params.hpp>
#include <gradcodec/plugin/stage.hpp>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_zstd(const Params& p, uint32_t version);
// The same coder for another stage's use on bytes it holds: zstd at `level`, the literals
// Huffman-coded when `huffman_literals` (else as the level does).
std::unique_ptr<Lossless> zstd_coder(int level, bool huffman_literals);
}
