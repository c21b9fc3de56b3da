// SPDX-License-Identifier: BSD-3-Clause
// Compressor: one tensor at a time through the engine's step for one tensor (encode_record), each
// name its own sequence of frames; Decompressor: its records decoded on the receiving side
// (gradcodec.hpp, docs/api.md "Compressor").
#include <gradcodec/gradcodec.hpp>

#include "api/facade.hpp"

#include <gradcodec/codec.hpp>
#include <gradcodec/container_error.hpp>

#include "core/checksum.hpp"

#include <algorithm>
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
    rec = encode_record(m.stages, t, ctx, seq.state, m.opt.nonfinite, false, kSource, decoded);
  } catch (...) {
    // encode_record refuses such a tensor before it touches the state (codec.hpp); any other
    // failure may have left the state part-way updated: the sequence starts again.
    const bool refused_first = m.opt.nonfinite == NonFinite::Refuse && !m.stages.lossless() &&
                               is_float(t.dtype()) && (count_nonfinite(t) || count_beyond_f32(t));
    if (added) {
      m.names.erase(it);  // a name takes its position with its first record (as a receiver sees it)
    } else if (m.stages.stateful() && !refused_first) {
      seq.state = PipelineStages::TensorState{};
      seq.frames = 0;
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

uint64_t Compressor::calls(const std::string& name) const {
  auto it = impl_->names.find(name);
  return it == impl_->names.end() ? 0 : it->second.frames;
}

std::string Compressor::pipeline_text() const { return impl_->pipeline.text(); }
bool Compressor::stateful() const noexcept { return impl_->stages.stateful(); }
bool Compressor::solo_frames() const noexcept { return impl_->solo; }

// ---------------------------------------------------------------- Decompressor

struct Decompressor::Impl {
  struct Sequence {
    uint32_t index = 0;   // as Compressor::Impl::Sequence
    uint32_t frames = 0;  // records decoded
    PipelineStages::TensorState state;
  };
  Pipeline pipeline;
  PipelineStages stages;
  CompressorOptions opt;
  bool solo = false;
  std::unordered_map<std::string, Sequence> names;

  explicit Impl(const CompressorOptions& o)
      : pipeline(api::chosen_pipeline(o.preset, o.pipeline)), stages(pipeline), opt(o), solo(stages.plans_frame()) {}
};

Decompressor::Decompressor(const CompressorOptions& options) : impl_(std::make_unique<Impl>(options)) {}
Decompressor::Decompressor(Decompressor&&) noexcept = default;
Decompressor& Decompressor::operator=(Decompressor&&) noexcept = default;
Decompressor::~Decompressor() = default;

Tensor Decompressor::decode(const std::string& name, std::span<const uint8_t> record) {
  Impl& m = *impl_;
  const auto it = m.names.find(name);
  const bool added = it == m.names.end();
  const uint32_t done = added ? 0 : it->second.frames;
  const std::string where = "corrupt record " + std::to_string(done) + " of tensor '" + name + "'";
  auto corrupt = [&](const std::string& why) { throw ContainerError(where + ": " + why); };

  // Every check before anything is allocated or any state touched: the metadata (the
  // container's own parser, ContainerError naming the record), the name, the storage against
  // the dtype (what an encoder makes), the memory, every stream's checksum.
  const RecordMeta meta = parse_record(record, 0, 1 + m.stages.variant_count(), where);
  if (meta.info.name != name)
    corrupt("it is the record of tensor '" +
            (meta.info.name.size() > 200 ? meta.info.name.substr(0, 200) + "..." : meta.info.name) + "'");
  if ((meta.storage == Storage::PassThrough) != (meta.info.dtype == DType::Other))
    corrupt(std::string(storage_name(meta.storage)) + " record of dtype " + dtype_name(meta.info.dtype));
  if (meta.storage == Storage::Pipeline) {
    // As SequenceDecoder: its f32 working values or its elements, whichever is larger.
    const uint64_t n = meta.info.elements(), width = std::max<uint64_t>(4, dtype_size(meta.info.dtype));
    if (n > m.opt.memory_limit / width)
      fail(ErrorCode::Input, "record " + std::to_string(done) + " of tensor '" + name + "' (" + std::to_string(n) +
                                 " " + dtype_name(meta.info.dtype) + " elements) needs " +
                                 (n > UINT64_MAX / width ? std::string("over 2^64") : std::to_string(n * width)) +
                                 " bytes to decode, over the memory limit of " + std::to_string(m.opt.memory_limit) +
                                 " bytes");
  }
  for (const StreamInfo& si : meta.streams)
    if (xxh3(record.data() + si.offset, si.size) != si.checksum)
      corrupt("stream '" + si.name + "' at offset " + std::to_string(si.offset) + ": checksum mismatch");

  Impl::Sequence fresh;
  Impl::Sequence& seq = added ? fresh : it->second;
  if (added) seq.index = m.solo ? 0 : static_cast<uint32_t>(m.names.size());
  if (seq.frames == UINT32_MAX)
    fail(ErrorCode::Usage, name + ": a sequence holds at most " + std::to_string(UINT32_MAX) + " frames");
  Tensor out;
  out.info = meta.info;
  StageContext ctx;  // as the sender's (Compressor::Impl::step)
  ctx.seed = m.opt.seed;
  ctx.frame = seq.frames;
  ctx.tensor = seq.index;
  ctx.keyframe = seq.frames == 0;
  ctx.info = &out.info;
  // A stateless pipeline's record is decoded from an empty state (SequenceDecoder).
  PipelineStages::TensorState scratch;
  PipelineStages::TensorState& st = m.stages.stateful() ? seq.state : scratch;
  try {
    if (meta.storage == Storage::PassThrough || meta.storage == Storage::Raw) {
      const std::span<const uint8_t> raw = record.subspan(meta.streams[0].offset, meta.streams[0].size);
      out.data = Buffer(std::vector<uint8_t>(raw.begin(), raw.end()));
    }
    if (meta.storage != Storage::PassThrough && ctx.keyframe) st.dec.clear();
    if (meta.storage == Storage::Raw) {
      m.stages.observe_raw(out, ctx, st, false);
    } else if (meta.storage == Storage::Pipeline) {
      Streams streams;
      for (const StreamInfo& si : meta.streams) {
        const std::span<const uint8_t> b = record.subspan(si.offset, si.size);
        streams.add(si.name, si.width).bytes.assign(b.begin(), b.end());
      }
      // The variant: 0 the pipeline, k the control stage's alternative k - 1 (Compressor::encode).
      const PipelineStages& ds = meta.variant ? m.stages.variant(static_cast<int>(meta.variant) - 1) : m.stages;
      out = ds.decode(meta.info, std::move(streams), true, ctx, st);
    }
  } catch (...) {
    // The stages refused streams that passed their checksums (no Compressor made them): a
    // stateful pipeline's state may be part-way updated, and the sequence starts again.
    if (!added && m.stages.stateful()) {
      seq.state = PipelineStages::TensorState{};
      seq.frames = 0;
    }
    try {
      throw;
    } catch (const ContainerError&) {
      throw;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Corrupt) throw;
      corrupt(e.what());
    }
  }
  ++seq.frames;
  if (added) m.names.emplace(name, std::move(fresh));
  return out;
}

uint64_t Decompressor::calls(const std::string& name) const {
  auto it = impl_->names.find(name);
  return it == impl_->names.end() ? 0 : it->second.frames;
}

void Decompressor::reset(const std::string& name) {
  auto it = impl_->names.find(name);
  if (it == impl_->names.end()) return;
  it->second.state = PipelineStages::TensorState{};
  it->second.frames = 0;
}

std::string Decompressor::pipeline_text() const { return impl_->pipeline.text(); }

}  // namespace gradcodec
