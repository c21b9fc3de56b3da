// SPDX-License-Identifier: BSD-3-Clause
// Compressor: one tensor at a time through the engine's step for one tensor (encode_record), each
// name its own sequence of frames (named_sequences.hpp; gradcodec.hpp, docs/api.md "Compressor").
#include <gradcodec/gradcodec.hpp>

#include "api/facade.hpp"
#include "api/named_sequences.hpp"

#include <gradcodec/codec.hpp>
#include <gradcodec/container.hpp>

namespace gradcodec {

namespace {
// How error messages name the tensors' origin (as an Encoder's frame given no source).
const std::string kSource = "<memory>";
}  // namespace

struct Compressor::Impl : api::NamedSequences {
  using NamedSequences::NamedSequences;
  uint64_t last_bytes = 0;

  // One call: `decoded` (if given) receives what a decoder of the record returns, `bytes` (if
  // given) the record.
  void step(const std::string& name, const TensorView& view, Tensor* decoded, std::vector<uint8_t>* bytes);
};

Compressor::Compressor(const CompressorOptions& options) : impl_(std::make_unique<Impl>(options)) {}
Compressor::Compressor(Compressor&&) noexcept = default;
Compressor& Compressor::operator=(Compressor&&) noexcept = default;
Compressor::~Compressor() = default;

void Compressor::Impl::step(const std::string& name, const TensorView& view, Tensor* decoded,
                            std::vector<uint8_t>* bytes_out) {
  Impl& m = *this;
  // What a frame holding the view would record, checked as SequenceEncoder::encode_frame checks
  // it, before any state is touched.
  Tensor t;
  t.info = api::view_info(view);
  t.info.name = name;
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
  Sequence& seq = it->second;
  if (added) seq.index = m.index_of_new(m.names.size() - 1);
  check_room(name, seq);

  StageContext ctx = m.context(seq, &t.info);
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
    rec = encode_record(m.stages, t, ctx, seq.state, m.opt.nonfinite, false, kSource, decoded,
                        m.opt.nonfinite_advice);
  } catch (...) {
    // encode_record refuses such a tensor before it touches the state (codec.hpp); any other
    // failure may have left the state part-way updated: the sequence starts again.
    const bool refused_first = m.opt.nonfinite == NonFinite::Refuse && !m.stages.lossless() &&
                               is_float(t.dtype()) && (count_nonfinite(t) || count_beyond_f32(t));
    if (added) {
      m.names.erase(it);  // a name takes its position with its first record (as a receiver sees it)
    } else if (m.stages.stateful() && !refused_first) {
      restart(seq);
    }
    throw;
  }
  // The container numbers a record's variant from 1 (its first use); a record on its own numbers
  // the control stage's alternative k as k + 1 (Decompressor::decode). The alternatives are
  // few: the number takes one byte whatever it is.
  const uint32_t variant = rec.variant >= 0 ? static_cast<uint32_t>(rec.variant) + 1 : 0;
  if (bytes_out) {
    *bytes_out = record_bytes(t.info, rec.storage, variant, rec.streams);
    m.last_bytes = bytes_out->size();
  } else {
    m.last_bytes = record_size(t.info, rec.storage, variant, rec.streams);
  }
  ++seq.frames;
  if (decoded) {
    // The tensor as a decoder of the record has it: the record's metadata.
    decoded->info.name = name;
    decoded->info.dtype = view.dtype;
    decoded->info.descr = view.dtype == DType::Other ? view.descr : std::string();
    decoded->info.big_endian = false;
    decoded->info.shape = view.shape;
  }
}

Tensor Compressor::roundtrip(const std::string& name, const TensorView& view) {
  Tensor out;
  impl_->step(name, view, &out, nullptr);
  return out;
}

std::vector<uint8_t> Compressor::encode(const std::string& name, const TensorView& view, Tensor* decoded) {
  std::vector<uint8_t> bytes;
  Tensor out;
  impl_->step(name, view, decoded ? &out : nullptr, &bytes);
  if (decoded) *decoded = std::move(out);
  return bytes;
}

uint64_t Compressor::last_bytes() const noexcept { return impl_->last_bytes; }

uint64_t Compressor::calls(const std::string& name) const { return impl_->calls(name); }

std::string Compressor::pipeline_text() const { return impl_->pipeline.text(); }
bool Compressor::stateful() const noexcept { return impl_->stages.stateful(); }
bool Compressor::solo_frames() const noexcept { return impl_->solo; }

}  // namespace gradcodec
