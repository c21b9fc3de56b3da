// SPDX-License-Identifier: BSD-3-Clause
// Decoder: the facade over ContainerReader and SequenceDecoder (gradcodec.hpp).
#include <gradcodec/gradcodec.hpp>

#include "api/open.hpp"
#include "api/threads.hpp"

#include <gradcodec/codec.hpp>
#include <gradcodec/detail/json_capped.hpp>
#include <gradcodec/formats/snapshot_io.hpp>

#include <nlohmann/json.hpp>

namespace gradcodec {

struct Decoder::Impl {
  ContainerReader reader;
  SequenceDecoder engine;

  Impl(std::shared_ptr<const InputFile> file, const DecoderOptions& o)
      : reader(std::move(file)), engine(reader, engine_options(o)) {}
  static DecodeOptions engine_options(const DecoderOptions& o) {
    DecodeOptions d;
    d.threads = api::thread_count(o.threads);
    d.memory_limit = o.memory_limit;
    return d;
  }
  void check_frame(size_t f) const {
    if (f >= reader.frame_count())
      fail(ErrorCode::Usage, reader.path() + ": no frame " + std::to_string(f) + " (the container holds " +
                                 std::to_string(reader.frame_count()) + ")");
  }
};

Decoder::Decoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Decoder::Decoder(Decoder&&) noexcept = default;
Decoder& Decoder::operator=(Decoder&&) noexcept = default;
Decoder::~Decoder() = default;

std::shared_ptr<const InputFile> api::open_container_file(const std::string& path) {
  auto file = ContainerReader::open_file(path);
  if (auto what = formats::snapshot_not_container(file->data(), file->size()))
    fail(ErrorCode::Input, file->path() + ": " + *what);
  return file;
}

Decoder Decoder::open(const std::string& path, const DecoderOptions& options) {
  return Decoder(std::make_unique<Impl>(api::open_container_file(path), options));
}

Decoder Decoder::from_bytes(std::vector<uint8_t> bytes, const DecoderOptions& options, const std::string& name) {
  return Decoder(std::make_unique<Impl>(InputFile::from_bytes(std::move(bytes), name), options));
}

std::string Decoder::pipeline_text() const { return impl_->reader.header().pipeline_text; }
uint64_t Decoder::seed() const { return impl_->reader.header().seed; }
uint32_t Decoder::keyframe_interval() const { return impl_->reader.header().keyframe_interval; }
std::string Decoder::tool() const { return impl_->reader.header().tool; }
std::string Decoder::inputs_json() const { return impl_->reader.header().inputs_json; }
std::vector<std::vector<std::pair<std::string, std::string>>> Decoder::input_metadata() const {
  std::vector<std::vector<std::pair<std::string, std::string>>> out(frame_count());
  const auto j = parse_json_capped<nlohmann::ordered_json>(inputs_json()).value;
  if (!j.is_array() || j.size() != out.size()) return out;
  for (size_t f = 0; f < out.size(); ++f) {
    if (!j[f].is_object() || !j[f].contains("metadata") || !j[f]["metadata"].is_object()) continue;
    for (const auto& [k, v] : j[f]["metadata"].items())
      if (v.is_string()) out[f].emplace_back(k, v.get<std::string>());
  }
  return out;
}
uint64_t Decoder::file_size() const { return impl_->reader.file_size(); }
size_t Decoder::frame_count() const { return impl_->reader.frame_count(); }

FrameEntry Decoder::frame(size_t f) const {
  impl_->check_frame(f);
  const FrameInfo& fi = impl_->reader.frame(f);
  return {fi.index, fi.keyframe, fi.source};
}

std::vector<TensorInfo> Decoder::tensors(size_t f) const {
  impl_->check_frame(f);
  std::vector<TensorInfo> out;
  const size_t n = impl_->reader.record_count(f);
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(impl_->reader.record(f, i).info);
  return out;
}

std::optional<size_t> Decoder::find(size_t f, const std::string& name) const {
  impl_->check_frame(f);
  for (size_t i = 0; i < impl_->reader.record_count(f); ++i)
    if (impl_->reader.record(f, i).info.name == name) return i;
  return std::nullopt;
}

Tensor Decoder::decode(size_t f, size_t i) {
  impl_->check_frame(f);
  if (i >= impl_->reader.record_count(f))
    fail(ErrorCode::Usage, impl_->reader.path() + ": frame " + std::to_string(f) + " has no tensor " +
                               std::to_string(i) + " (it holds " + std::to_string(impl_->reader.record_count(f)) + ")");
  return impl_->engine.decode(f, i);
}

void Decoder::decode_frame(size_t f, const std::function<void(Tensor&&)>& sink) {
  impl_->check_frame(f);
  impl_->engine.decode_frame(f, sink);
}

void Decoder::decode_frame(size_t f, std::span<const size_t> which, const std::function<void(Tensor&&)>& sink) {
  impl_->check_frame(f);
  const size_t n = impl_->reader.record_count(f);
  for (size_t k = 0; k < which.size(); ++k)
    if (which[k] >= n || (k > 0 && which[k] <= which[k - 1]))
      fail(ErrorCode::Usage, impl_->reader.path() + ": frame " + std::to_string(f) + " holds " + std::to_string(n) +
                                 " tensor(s): the indices to decode must be below that and increasing");
  impl_->engine.decode_frame(f, which, sink);
}

size_t Decoder::frames_read() const noexcept { return impl_->engine.frames_read(); }
bool Decoder::stateful() const noexcept { return impl_->engine.stateful(); }

}  // namespace gradcodec
