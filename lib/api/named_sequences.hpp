// SPDX-License-Identifier: BSD-3-Clause
// What a Compressor and its Decompressor share (compressor.cpp, decompressor.cpp): the pipeline,
// and one sequence of frames per tensor name. Call k of a name is frame k of that name's
// sequence; a name's record index is its position in the order names were first seen (0 for
// every name when the reducer plans whole frames, each call then a frame of its own); the
// StageContext of a call is the one an Encoder gives that frame's record (keyframe_interval 0).
#pragma once

#include <gradcodec/gradcodec.hpp>
#include <gradcodec/plugin/pipeline_stages.hpp>

#include "api/facade.hpp"

#include <cstdint>
#include <string>
#include <unordered_map>

namespace gradcodec::api {

struct NamedSequences {
  struct Sequence {
    uint32_t index = 0;   // its records' index in a frame (0 with solo frames)
    uint32_t frames = 0;  // calls done
    PipelineStages::TensorState state;
  };

  Pipeline pipeline;
  PipelineStages stages;
  CompressorOptions opt;
  bool solo = false;  // the reducer plans whole frames: each call is a frame of its own
  std::unordered_map<std::string, Sequence> names;

  explicit NamedSequences(const CompressorOptions& o)
      : pipeline(chosen_pipeline(o.preset, o.pipeline)), stages(pipeline), opt(o), solo(stages.plans_frame()) {}

  // The record index of a name first seen now, when `known` names were seen before it.
  uint32_t index_of_new(size_t known) const { return solo ? 0 : static_cast<uint32_t>(known); }

  // Refuses (Usage) a call beyond the frames a sequence can number.
  static void check_room(const std::string& name, const Sequence& seq) {
    if (seq.frames == UINT32_MAX)
      fail(ErrorCode::Usage, name + ": a sequence holds at most " + std::to_string(UINT32_MAX) + " frames");
  }

  // The context of the sequence's next record, about the tensor `info`.
  StageContext context(const Sequence& seq, const TensorInfo* info) const {
    StageContext ctx;
    ctx.seed = opt.seed;
    ctx.frame = seq.frames;
    ctx.tensor = seq.index;
    ctx.keyframe = seq.frames == 0;  // keyframe_interval 0
    ctx.info = info;
    return ctx;
  }

  // The sequence starts again: no state, its next call frame 0.
  static void restart(Sequence& seq) {
    seq.state = PipelineStages::TensorState{};
    seq.frames = 0;
  }

  uint64_t calls(const std::string& name) const {
    auto it = names.find(name);
    return it == names.end() ? 0 : it->second.frames;
  }
};

}  // namespace gradcodec::api
