// SPDX-License-Identifier: BSD-3-Clause
// bird / bird+ — tensor-wise bi-random sampling with index sharing (Wu et al. 2023, BIRD+: the
// journal version of BIRD; docs/stages.md "bird", "bird+"). The split is bird_split.hpp, the
// sampling bird_sample.hpp; this file is the stage: the frame pre-pass for the 1-D attach rule, the
// payload it hands on, and the one stream of its own.
//
// ≥2-D tensors (split into B blocks of m elements): the payload is sparse over the universe of
// blocks (universe = B, block = m), index = V ascending, values = sign(t_j)·S for every element of
// every kept block (0 and −0 count as +, as the sign codec's bit). The stage writes no stream
// for them: the value codec codes the values (the `bird`/`bird+` presets use `sign`, whose mean
// scale is exactly S: 1 bit per kept element + one f32 scale) and the index coder the block
// indices (the presets: `plain` u32 integers, then `lzma(stream=index)`, the paper's
// LZMA-compressed integer indices). Decode: the codecs give V and the values, the stage
// scatters whole blocks.
//
// 1-D and 0-D tensors (not split): the stage writes stream `side` =
//   ⌈n/8⌉ bytes   bitmap, MSB-first, bit o = 1 iff entry o is sent, padding bits 0;
//   4·c bytes     the c sent entries as little-endian f32, ascending o.
// vectors=attach (default) and a sibling (bird_split.hpp): entry o is sent iff V of the sibling
// holds a block of output channel o; else (vectors=dense, no sibling, or no frame plan — a
// lone tensor) every entry is sent. The payload is then sparse with an empty implicit index, so
// the value codec codes no value and no index coder runs. The bitmap makes each record
// self-contained: the paper's server reads the bias positions off the weight's index, but a
// gcz record decodes without any other tensor (docs/format.md "Tensor record").
//
// Frame plan (vectors=attach): plan_frame loads each tensor that is a sibling, runs its sampling
// with the tensor's own generator keys (so the per-tensor encode draws the very same V), keeps
// its selection for that encode (no second pass over the tensor) and the bitmap of each
// attached vector. Memory: 8 bytes per kept block of those tensors plus n/8 bytes per vector.
// Gap: the plan sees the frame's input; with a transform before bird (ef, delta) the weight
// samples its transformed values itself and the vector's bitmap follows the untransformed
// sampling (still decodable, the bitmap is on the wire).
#pragma once
#include <gradcodec/plugin/params.hpp>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_bird(const Params& p, uint32_t version);
std::unique_ptr<Stage> make_bird_plus(const Params& p, uint32_t version);
}  // namespace gradcodec::stages
