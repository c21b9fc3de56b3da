// SPDX-License-Identifier: BSD-3-Clause
// Compressor: one tensor at a time through the engine's step for one tensor (encode_record), each
// name its own sequence of frames (gradcodec.hpp, docs/api.md "Compressor").
#include <gradcodec/gradcodec.hpp>

#include "api/facade.hpp"

#include <gradcodec/codec.hpp>

#include <unordered_map>

namespace gradcodec {

namespace {
// How error messages name the tensors' origin (as an Encoder's frame given no source).
const std::string kSource = "<memory>";
}  // namespace

struct Compressor::Impl {
  // One name's sequence: its records' frame and index, and the state its frames left.
  struct Sequence {
    uint32_t index = 0;   // its record's index in a frame (0 with solo frames)
    uint32_t frames = 0;  // calls done
    PipelineStages::TensorState state;
  };
  Pipeline pipeline;
  PipelineStages stages;
  CompressorOptions opt;
  bool solo = false;
  std::unordered_map<std::string, Sequence> names;
  uint64_t last_bytes = 0;

  explicit Impl(const CompressorOptions& o)
      : pipeline(api::chosen_pipeline(o.preset, o.pipeline)), stages(pipeline), opt(o), solo(stages.plans_frame()) {}
};

Compressor::Compressor(const CompressorOptions& options) : impl_(std::make_unique<Impl>(options)) {}
Compressor::Compressor(Compressor&&) noexcept = default;
Compressor& Compressor::operator=(Compressor&&) noexcept = default;
Compressor::~Compressor() = default;

Tensor Compressor::roundtrip(const std::string& name, const TensorView& view) {
  Impl& m = *impl_;
  // What a frame holding the view would record, checked as SequenceEncoder::encode_frame checks
  // it, before any state is touched.
  Tensor t;
  t.info.name = name;
  t.info.dtype = view.dtype;
  t.info.descr = view.descr;
  t.info.shape = view.shape;
  check_storable(t.info, kSource);
  const uint64_t bytes = api::view_bytes(view);
  if (bytes && !view.data)
    fail(ErrorCode::Usage, name + ": a tensor view of " + std::to_string(bytes) + " bytes has no data");
  const uint64_t need = m.stages.work_bytes(t.info);
  if (need > m.opt.memory_limit)
    fail(ErrorCode::Input, kSource + ": tensor '" + name + "' (" + std::to_string(t.info.elements()) + " " +
                               dtype_name(t.info.dtype) + " elements) needs " + std::to_string(need) +
                               " bytes of memory to encode with pipeline '" + m.pipeline.text() +
                               "', over the memory limit of " + std::to_string(m.opt.memory_limit) + " bytes");
  t.data = Buffer::view(nullptr, static_cast<const uint8_t*>(view.data), bytes);

  auto [it, added] = m.names.try_emplace(name);
  Impl::Sequence& seq = it->second;
  if (added) seq.index = m.solo ? 0 : static_cast<uint32_t>(m.names.size() - 1);
  if (seq.frames == UINT32_MAX)
    fail(ErrorCode::Usage, name + ": a sequence holds at most " + std::to_string(UINT32_MAX) + " frames");

  StageContext ctx;
  ctx.seed = m.opt.seed;
  ctx.frame = seq.frames;
  ctx.tensor = seq.index;
  ctx.keyframe = seq.frames == 0;  // keyframe_interval 0
  ctx.info = &t.info;
  Tensor out;
  EncodedRecord rec;
  try {
    // A reducer that plans whole frames plans this one: the tensor alone (SequenceEncoder's
    // pre-pass over a frame of one tensor).
    std::shared_ptr<const StageState> plan;
    if (m.solo) {
      StageContext plan_ctx;
      plan_ctx.seed = ctx.seed;
      plan_ctx.frame = ctx.frame;
      plan_ctx.keyframe = ctx.keyframe;
      FrameView frame;
      frame.count = 1;
      frame.info = [&t](size_t) { return t.info; };
      frame.load = [&t](size_t) { return t; };
      plan = m.stages.plan_frame(frame, plan_ctx, [&seq](size_t) { return &seq.state; });
    }
    ctx.frame_plan = plan.get();
    rec = encode_record(m.stages, t, ctx, seq.state, m.opt.nonfinite, false, kSource, &out);
  } catch (...) {
    // encode_record refuses such a tensor before it touches the state (codec.hpp); any other
    // failure may have left the state part-way updated: the sequence starts again.
    const bool refused_first = m.opt.nonfinite == NonFinite::Refuse && !m.stages.lossless() &&
                               is_float(t.dtype()) && (count_nonfinite(t) || count_beyond_f32(t));
    if (m.stages.stateful() && !refused_first) {
      seq.state = PipelineStages::TensorState{};
      seq.frames = 0;
    }
    throw;
  }
  // The container numbers a record's variant from 1 (its first use); the alternatives of a
  // control stage are few, so the number takes one byte whatever it is.
  m.last_bytes = record_size(t.info, rec.storage, rec.variant >= 0 ? static_cast<uint32_t>(rec.variant) + 1 : 0,
                             rec.streams);
  ++seq.frames;
  // The tensor as a decoder of the record has it: the record's metadata.
  out.info.name = name;
  out.info.dtype = view.dtype;
  out.info.descr = view.dtype == DType::Other ? view.descr : std::string();
  out.info.big_endian = false;
  out.info.shape = view.shape;
  return out;
}

uint64_t Compressor::last_bytes() const noexcept { return impl_->last_bytes; }

uint64_t Compressor::calls(const std::string& name) const {
  auto it = impl_->names.find(name);
  return it == impl_->names.end() ? 0 : it->second.frames;
}

std::string Compressor::pipeline_text() const { return impl_->pipeline.text(); }
bool Compressor::stateful() const noexcept { return impl_->stages.stateful(); }
bool Compressor::solo_frames() const noexcept { return impl_->solo; }

}  // namespace gradcodec
