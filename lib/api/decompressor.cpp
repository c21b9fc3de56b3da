// SPDX-License-Identifier: BSD-3-Clause
// Decompressor: a Compressor's records decoded on the receiving side, each name its own sequence
// of frames as the sender's (named_sequences.hpp; gradcodec.hpp, docs/api.md "Compressor").
#include <gradcodec/gradcodec.hpp>

#include "api/named_sequences.hpp"

#include <gradcodec/codec.hpp>
#include <gradcodec/container.hpp>
#include <gradcodec/container_error.hpp>

#include "base/checksum.hpp"

#include <algorithm>

namespace gradcodec {

struct Decompressor::Impl : api::NamedSequences {
  using NamedSequences::NamedSequences;
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
  if (added) seq.index = m.index_of_new(m.names.size());
  Impl::check_room(name, seq);
  Tensor out;
  out.info = meta.info;
  const StageContext ctx = m.context(seq, &out.info);  // as the sender's (Compressor::Impl::step)
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
    if (!added && m.stages.stateful()) Impl::restart(seq);
    rethrow_corrupt_as(where);
  }
  ++seq.frames;
  if (added) m.names.emplace(name, std::move(fresh));
  return out;
}

uint64_t Decompressor::calls(const std::string& name) const { return impl_->calls(name); }

void Decompressor::reset(const std::string& name) {
  auto it = impl_->names.find(name);
  if (it != impl_->names.end()) Impl::restart(it->second);
}

std::string Decompressor::pipeline_text() const { return impl_->pipeline.text(); }

}  // namespace gradcodec
