// SPDX-License-Identifier: BSD-3-Clause
// zfp(mode, rate | precision | tolerance) — the coded values as one 1-D zfp array (Lindstrom 2014,
// "Fixed-Rate Compressed Floating-Point Arrays"; zfp 1.0's C API), in one of zfp's four modes:
// fixed rate (bits per value), fixed precision (bit planes per block), fixed accuracy (absolute
// error tolerance) or reversible (lossless). docs/stages.md "zfp".
//
// Wire, version 1:
//   value  zfp's bit stream (codec version 5, no zfp header), blocks of 4 values in order, the
//          last one partial, zero-padded to a whole byte. Fixed rate: exactly
//          ceil(blocks · round(4·rate) / 8) bytes. Empty when there are no values.
// The mode and its parameter travel in the pipeline text, not in the stream.
#pragma once
#include <gradcodec/plugin/params.hpp>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_zfp(const Params& p, uint32_t version);
}
