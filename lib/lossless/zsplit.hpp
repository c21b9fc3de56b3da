// SPDX-License-Identifier: BSD-3-Clause
// zsplit — a lossless back end for floating-point bytes with zero runs. The stream is read as
// elements of its width (the width hint: 2, 4 or 8 bytes; 1 for any other); which elements are
// zero goes in a bitmap (zstd level 1: zero elements come in runs, whole channels and tensors);
// of every other element the low bytes (mantissa, incompressible in gradients) are stored as
// they are and the high byte (sign and exponent) is coded with zstd (Huffman literals). zstd
// then reads one byte in w of the non-zero elements instead of all of them (docs/stages.md
// "zsplit"; figures in docs/performance.md).
// Wire: varint size (bytes), u8 w, then per block of 2^18 elements (the last may be shorter):
// varint k (its non-zero elements), their (w − 1)·k low bytes (element order), varint length and
// zstd frame of the block's bitmap (⌈m/8⌉ bytes, bit i of byte i/8 set when element i is not
// zero), varint length and zstd frame of the k high bytes; then the size mod w tail bytes.
#pragma once
#include <gradcodec/plugin/params.hpp>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_zsplit(const Params& p, uint32_t version);
}
