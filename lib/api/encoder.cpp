// SPDX-License-Identifier: BSD-3-Clause
// Encoder: the facade over SequenceEncoder and ContainerWriter (gradcodec.hpp).
#include <gradcodec/gradcodec.hpp>

#include "api/threads.hpp"
#include "api/facade.hpp"

#include <gradcodec/codec.hpp>

#include <optional>

namespace gradcodec {

const char* version() noexcept { return tool_version(); }

Pipeline api::chosen_pipeline(const std::string& preset, const std::string& pipeline) {
  if (!preset.empty() && !pipeline.empty()) fail(ErrorCode::Usage, "give a preset or a pipeline text, not both");
  if (!pipeline.empty()) return Pipeline::parse(pipeline);
  return Pipeline::preset(preset.empty() ? "lossless" : preset);
}

uint16_t api::format_minor(const EncoderOptions& o) {
  if (o.format_minor > 1)
    fail(ErrorCode::Usage, "container format 1." + std::to_string(o.format_minor) + " does not exist (1.0 or 1.1)");
  return static_cast<uint16_t>(o.format_minor);
}

EncodeOptions api::engine_options(const EncoderOptions& o) {
  (void)format_minor(o);  // checked when the Encoder is made
  EncodeOptions e;
  e.seed = o.seed;
  e.keyframe_interval = o.keyframe_interval;
  e.nonfinite = o.nonfinite;
  e.nonfinite_advice = o.nonfinite_advice;
  e.threads = api::thread_count(o.threads);
  e.memory_limit = o.memory_limit;
  e.progress = o.progress;
  return e;
}

std::vector<TensorSummary> api::count_frame(std::vector<TensorOutcome>&& outcomes, EncodeSummary& summary) {
  std::vector<TensorSummary> out;
  out.reserve(outcomes.size());
  for (auto& o : outcomes) {
    summary.input_bytes += o.input_bytes;
    if (is_float(o.info.dtype)) summary.float_elements += o.info.elements();
    ++summary.tensors;
    out.push_back({std::move(o.info), storage_name(o.storage), o.input_bytes, o.record_bytes});
  }
  ++summary.frames;
  return out;
}

namespace {

Pipeline chosen_pipeline(const EncoderOptions& o) { return api::chosen_pipeline(o.preset, o.pipeline); }

}  // namespace

std::string canonical_pipeline(const EncoderOptions& options) { return chosen_pipeline(options).text(); }

struct Encoder::Impl {
  Pipeline pipeline;
  SequenceEncoder engine;
  std::optional<FdSink> fd_sink;
  std::unique_ptr<ContainerWriter> writer;
  EncodeSummary summary;
  bool failed = false, finished = false;

  Impl(const EncoderOptions& o) : pipeline(chosen_pipeline(o)), engine(pipeline, api::engine_options(o)) {}
  ContainerHeader header(const EncoderOptions& o) const {
    ContainerHeader h = engine.header(o.inputs_json.empty() ? "[]" : o.inputs_json);
    h.target_json = o.target_json;
    h.format_minor = api::format_minor(o);
    return h;
  }
};

Encoder::Encoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Encoder::Encoder(Encoder&&) noexcept = default;
Encoder& Encoder::operator=(Encoder&&) noexcept = default;
Encoder::~Encoder() = default;

Encoder Encoder::to_path(const std::string& path, const EncoderOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  impl->writer = std::make_unique<ContainerWriter>(path, options.overwrite, impl->header(options));
  return Encoder(std::move(impl));
}

Encoder Encoder::to_fd(int fd, const EncoderOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  impl->fd_sink.emplace(fd);
  impl->writer = std::make_unique<ContainerWriter>(*impl->fd_sink, impl->header(options));
  return Encoder(std::move(impl));
}

Encoder Encoder::to_sink(ByteSink& sink, const EncoderOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  impl->writer = std::make_unique<ContainerWriter>(sink, impl->header(options));
  return Encoder(std::move(impl));
}

std::vector<TensorSummary> Encoder::add_frame(std::span<const TensorView> tensors, const std::string& source) {
  FrameSource src;
  src.count = tensors.size();
  src.source = source.empty() ? "<memory>" : source;
  src.recorded = source;
  src.info = [tensors](size_t k) { return api::view_info(tensors[k]); };
  src.load = [tensors](size_t k) { return api::view_tensor(tensors[k]); };
  return add_frame(src);
}

std::vector<TensorSummary> Encoder::add_frame(const FrameSource& frame) {
  Impl& m = *impl_;
  if (m.failed || m.finished)
    fail(ErrorCode::Usage, m.finished ? "Encoder::add_frame after finish()" : "Encoder::add_frame after an error");
  std::vector<TensorOutcome> outcomes;
  try {
    outcomes = m.engine.encode_frame(frame, *m.writer);
  } catch (...) {
    m.failed = true;
    throw;
  }
  return api::count_frame(std::move(outcomes), m.summary);
}

EncodeSummary Encoder::finish() {
  Impl& m = *impl_;
  if (m.failed) fail(ErrorCode::Usage, "Encoder::finish after an error: the container is incomplete");
  if (!m.finished) {
    m.writer->finish();
    m.finished = true;
    m.summary.output_bytes = m.writer->bytes_written();
  }
  return m.summary;
}

std::string Encoder::pipeline_text() const { return impl_->pipeline.text(); }

}  // namespace gradcodec
