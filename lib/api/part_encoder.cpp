// SPDX-License-Identifier: BSD-3-Clause
// PartEncoder: the facade over SequenceEncoder and ContainerPart (gradcodec.hpp,
// docs/scale-out.md).
#include <gradcodec/gradcodec.hpp>

#include "api/facade.hpp"

#include <gradcodec/bytes.hpp>
#include <gradcodec/codec.hpp>
#include <gradcodec/container_part.hpp>

#include <cstring>

namespace gradcodec {

struct PartEncoder::Impl {
  Pipeline pipeline;
  SequenceEncoder engine;
  ContainerHeader header;
  ContainerPart part;
  EncodeSummary summary;  // of this part's tensors (output_bytes aside)
  bool failed = false;

  static EncodeOptions options(const EncoderOptions& o, std::function<bool(const std::string&)> owns) {
    EncodeOptions e = api::engine_options(o);
    e.owns = std::move(owns);
    return e;
  }
  Impl(const EncoderOptions& o, std::function<bool(const std::string&)> owns)
      : pipeline(api::chosen_pipeline(o.preset, o.pipeline)),
        engine(pipeline, options(o, std::move(owns))),
        header(engine.header(o.inputs_json.empty() ? "[]" : o.inputs_json)) {
    header.format_minor = api::format_minor(o);
  }
};

PartEncoder::PartEncoder(const EncoderOptions& options, std::function<bool(const std::string&)> owns)
    : impl_(std::make_unique<Impl>(options, std::move(owns))) {}
PartEncoder::PartEncoder(PartEncoder&&) noexcept = default;
PartEncoder& PartEncoder::operator=(PartEncoder&&) noexcept = default;
PartEncoder::~PartEncoder() = default;

std::vector<TensorSummary> PartEncoder::add_frame(const FrameSource& frame) {
  Impl& m = *impl_;
  if (m.failed) fail(ErrorCode::Usage, "PartEncoder::add_frame after an error");
  std::vector<TensorOutcome> outcomes;
  try {
    outcomes = m.engine.encode_frame(frame, m.part);
  } catch (...) {
    m.failed = true;
    throw;
  }
  return api::count_frame(std::move(outcomes), m.summary);
}

// A description: this part's figures, then ContainerPart::describe().
std::vector<uint8_t> PartEncoder::describe() const {
  const std::vector<uint8_t> part = impl_->part.describe();
  const uint64_t figures[3] = {impl_->summary.tensors, impl_->summary.input_bytes, impl_->summary.float_elements};
  std::vector<uint8_t> out(sizeof figures + part.size());  // (little-endian, as ByteReader reads them)
  std::memcpy(out.data(), figures, sizeof figures);
  if (!part.empty()) std::memcpy(out.data() + sizeof figures, part.data(), part.size());
  return out;
}

EncodeSummary PartEncoder::write(std::span<const std::vector<uint8_t>> parts, bool lead, const WriteAt& write_at) const {
  const Impl& m = *impl_;
  if (m.failed) fail(ErrorCode::Usage, "PartEncoder::write after an error: the container would be incomplete");
  EncodeSummary s;
  s.frames = m.summary.frames;
  std::vector<std::vector<uint8_t>> records;
  for (const auto& p : parts) {
    constexpr size_t kFigures = 24;
    if (p.size() < kFigures) fail(ErrorCode::Internal, "container part: short description");
    ByteReader in(p, "container part");
    s.tensors += in.u64();
    s.input_bytes += in.u64();
    s.float_elements += in.u64();
    records.emplace_back(p.begin() + kFigures, p.end());
  }
  s.output_bytes = m.part.write(m.header, records, lead, write_at);
  return s;
}

std::string PartEncoder::pipeline_text() const { return impl_->pipeline.text(); }

}  // namespace gradcodec
