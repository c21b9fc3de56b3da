// SPDX-License-Identifier: BSD-3-Clause
// A bounds-checked decoder of fpzip 1.3's coded stream (Lindstrom & Isenburg 2006, "Fast and
// Efficient Compression of Floating-Point Data") for what the fpzip stage writes: one 1-D array of
// floats (nx = count, ny = nz = nf = 1), no fpzip header, libfpzip built with its default
// floating-point mode (predictions in float arithmetic). docs/stages.md "fpzip".
//
// The stream, as this decoder reads it:
//   - a range coder over 32-bit low/range/code registers, primed with 4 bytes, renormalised a
//     byte at a time while the top byte of the interval is settled, and by two bytes (the
//     interval then reset to reach the top of the register) when the range falls below 2^16;
//   - a quasi-static adaptive model of the residual symbols: frequencies out of 2^16, halved and
//     rebuilt on a schedule that starts every (symbols/16 | 2) · 2 symbols and doubles to 1024;
//   - the Lorenzo predictor, which for a 1-D array is the previous decoded value (+0 before the
//     first) run through fpzip's float sum of zero neighbours: -0 becomes +0, a NaN is quieted;
//   - values and predictions mapped to `bits`-bit unsigned integers that order like the floats
//     (bits = precision, 32 when lossless); a residual is the symbol itself when bits <= 8, else a
//     symbol for its sign and bit length k followed by its k - 1 low bits raw.
//
// Contract: decode_floats() writes exactly out.size() values or throws Error(ErrorCode::Corrupt)
// naming what was wrong (the input ends early, a symbol outside the model's total, a raw part out
// of its range, a range register that has collapsed to zero). No read outside `in`, no write
// outside `out`, no table index outside its table, for any input. For a stream libfpzip 1.3 wrote
// of these values, the result is bit-identical to libfpzip's decoder and the bytes read are the
// stream's whole length.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

namespace gradcodec::fpzip {

// Decodes out.size() floats coded at `precision` leading bits (0 = 32, lossless; else 2..32) from
// `in`; returns how many bytes of `in` the decoder read. A precision outside 0, 2..32 is
// Error(ErrorCode::Internal): the stage refuses it before any stream is read.
size_t decode_floats(std::span<const uint8_t> in, int precision, std::span<float> out);

}  // namespace gradcodec::fpzip
