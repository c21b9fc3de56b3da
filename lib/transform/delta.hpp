// SPDX-License-Identifier: BSD-3-Clause
// delta — code the difference to the previous frame's decoded tensor (docs/stages.md "delta";
// prediction from the previous frame, exploiting the time correlation of successive updates that
// TCS builds on, Ozfatura, Ozfatura & Gündüz 2021 §I-E and §II-A).
//
// State (shared: both sides keep it identically; the encoder reads its mirror decoder's copy):
// prev = the previous frame's decoded tensor, as f32 values rounded to the tensor's dtype.
//   encode:  g ← g − prev       on a keyframe, with no prev, or when the element count changed:
//                               g unchanged (the tensor itself is coded)
//   decode:  ĝ ← ĝ + prev (same condition), then prev ← ĝ
//   raw record (stored without the pipeline): prev ← the stored tensor
// The loop is closed (the encoder predicts from what the decoder has), so coding errors do not
// accumulate across frames. A keyframe resets it (EncodeOptions::keyframe_interval), and decoding
// frame N of a container replays that tensor's records from the last keyframe. No stream of its
// own. stateful() = true. With several transforms, delta's prev is in delta's own domain.
#pragma once
#include <gradcodec/plugin/params.hpp>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_delta(const Params& p, uint32_t version);
}
