// SPDX-License-Identifier: BSD-3-Clause
// fpzip(precision) — the coded values through fpzip 1.3's predictive coder (Lindstrom & Isenburg
// 2006, "Fast and Efficient Compression of Floating-Point Data"): lossless at precision=0, else
// each value truncated to its leading `precision` bits (sign, exponent, mantissa; 2..32) before
// coding. libfpzip encodes; decoding is our bounds-checked reading of the same format
// (fpzip_decode.hpp), as libfpzip's decoder does not check its input. docs/stages.md "fpzip".
//
// Wire, version 1:
//   value  u64 XXH3-64 of the bytes after it (little-endian), then per chunk of 65536 values
//          (the last one partial): u32 byte length L (little-endian), then L bytes of fpzip's
//          coded stream of the chunk as a 1-D float array (no fpzip header: type, precision and
//          dimensions come from the pipeline text and the value count). Empty when there are no
//          values.
#pragma once
#include <gradcodec/plugin/params.hpp>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_fpzip(const Params& p, uint32_t version);
}
