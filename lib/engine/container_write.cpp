// SPDX-License-Identifier: BSD-3-Clause
// The .gcz container v1: the writer. Byte layout: docs/format.md; the reader is container_read.cpp.
#include <gradcodec/container.hpp>

#include "base/checksum.hpp"
#include "engine/container_layout.hpp"
#include <gradcodec/detail/json_capped.hpp>
#include <gradcodec/pipeline.hpp>

#include <nlohmann/json.hpp>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <cstdint>
#include <cstring>
#include <map>

namespace gradcodec {

using gcz::kEndMagic;
using gcz::kMagic;

namespace {

void put_tag(ByteWriter& w, const char* tag) { w.bytes(tag, 4); }

std::vector<uint8_t> encode_meta(const TensorInfo& info, Storage storage, uint32_t variant,
                                 std::span<const gcz::StreamEntry> streams, std::span<const uint64_t> checksums) {
  std::vector<uint8_t> m;
  ByteWriter w(m);
  w.str16(info.name);
  w.u8(static_cast<uint8_t>(info.dtype));
  w.u8(info.big_endian ? 1 : 0);
  if (info.dtype == DType::Other) w.str16(info.descr);
  if (info.shape.size() > kMaxDims) fail(ErrorCode::Usage, info.name + ": more than 32 dimensions");
  w.u8(static_cast<uint8_t>(info.shape.size()));
  for (uint64_t d : info.shape) w.u64(d);
  w.u8(static_cast<uint8_t>(storage));
  w.varint(variant);
  if (streams.size() > kMaxStreams) fail(ErrorCode::Internal, "too many streams");
  w.u8(static_cast<uint8_t>(streams.size()));
  if (checksums.size() != streams.size()) fail(ErrorCode::Internal, "a checksum per stream expected");
  for (size_t k = 0; k < streams.size(); ++k) {
    const gcz::StreamEntry& s = streams[k];
    if (s.name.empty() || s.name.size() > 255) fail(ErrorCode::Internal, "bad stream name");
    w.u8(static_cast<uint8_t>(s.name.size()));
    w.bytes(s.name.data(), s.name.size());
    w.u8(s.width);
    w.u64(s.size);
    w.u64(checksums[k]);
  }
  return m;
}

// A section's tag and length; section_sum() is its checksum, of the two and the payload.
std::vector<uint8_t> section_head(const char* tag, uint64_t payload_size, bool u64_len) {
  std::vector<uint8_t> head;
  ByteWriter w(head);
  put_tag(w, tag);
  if (u64_len) w.u64(payload_size);
  else w.u32(static_cast<uint32_t>(payload_size));
  return head;
}

uint64_t section_sum(const std::vector<uint8_t>& head, const std::vector<uint8_t>& payload) {
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  XXH3_64bits_update(&st, head.data(), head.size());
  XXH3_64bits_update(&st, payload.data(), payload.size());
  return XXH3_64bits_digest(&st);
}

}  // namespace

// The section: tag, length, payload, checksum.
std::vector<uint8_t> gcz::section(const char* tag, const std::vector<uint8_t>& payload, bool u64_len) {
  std::vector<uint8_t> out = section_head(tag, payload.size(), u64_len);
  const uint64_t h = section_sum(out, payload);
  out.insert(out.end(), payload.begin(), payload.end());
  ByteWriter(out).u64(h);
  return out;
}

namespace {

// A JSON value the writer's caller gave for the header, parsed as every JSON read is (capped).
nlohmann::ordered_json header_json(const char* field, const std::string& text) {
  auto parsed = parse_json_capped<nlohmann::ordered_json>(text);
  if (!parsed.error.empty()) fail(ErrorCode::Internal, std::string("container header: ") + field + ": " + parsed.error);
  return std::move(parsed.value);
}

// The version of every stage a canonical pipeline JSON names (nested pipelines included).
void stage_versions(const nlohmann::ordered_json& j, nlohmann::ordered_json& out) {
  if (j.is_object() && j.contains("stage") && j.contains("version")) out[j["stage"].get<std::string>()] = j["version"];
  if (j.is_structured())
    for (const auto& v : j) stage_versions(v, out);
}

}  // namespace

std::vector<gcz::StreamEntry> gcz::stream_entries(const Streams& streams) {
  std::vector<StreamEntry> out;
  out.reserve(streams.all().size());
  for (const auto& s : streams.all()) out.push_back({s.name, s.width, s.view().size()});
  return out;
}

std::vector<uint8_t> gcz::preamble_section(const ContainerHeader& h) {
  if (h.format_minor > kFormatMinor) fail(ErrorCode::Internal, "no container format 1." + std::to_string(h.format_minor));
  nlohmann::ordered_json j;
  j["format"] = "gcz";
  j["tool"] = h.tool;
  const nlohmann::ordered_json pipeline = header_json("pipeline", h.pipeline_json);
  if (h.format_minor == 0) {
    j["pipeline"] = pipeline;
    j["pipeline_text"] = h.pipeline_text;
  } else {
    // 1.1: the canonical text, which the reader parses back to this JSON, and the stages' versions.
    if (Pipeline::parse(h.pipeline_text).json() != h.pipeline_json)
      fail(ErrorCode::Internal, "container header: the pipeline text '" + h.pipeline_text + "' does not give its JSON");
    j["pipeline"] = h.pipeline_text;
    nlohmann::ordered_json versions = nlohmann::ordered_json::object();
    stage_versions(pipeline, versions);
    j["versions"] = versions;
  }
  j["seed"] = h.seed;
  j["keyframe_interval"] = h.keyframe_interval;
  j["inputs"] = header_json("inputs", h.inputs_json);
  if (!h.target_json.empty()) j["target"] = header_json("target", h.target_json);
  std::string text = j.dump();
  if (text.size() > kMaxHeaderBytes) fail(ErrorCode::Usage, "container header larger than 16 MiB");
  std::vector<uint8_t> pre;
  ByteWriter w(pre);
  w.bytes(kMagic, 8);
  w.u16(kFormatMajor);
  w.u16(h.format_minor);
  w.u32(static_cast<uint32_t>(text.size()));
  w.bytes(text.data(), text.size());
  uint64_t sum = xxh3(pre.data(), pre.size());
  w.u64(sum);
  return pre;
}

std::vector<uint8_t> gcz::frame_section(uint32_t index, const FrameInfo& f) {
  std::vector<uint8_t> p;
  ByteWriter w(p);
  w.u32(index);
  w.u8(f.keyframe ? 1 : 0);
  w.str16(f.source.size() > 4096 ? f.source.substr(0, 4096) : f.source);
  return section("FRAM", p, false);
}

std::vector<uint8_t> gcz::record_section(const TensorInfo& info, Storage storage, uint32_t variant,
                                         std::span<const StreamEntry> streams, std::span<const uint64_t> checksums) {
  return section("TREC", encode_meta(info, storage, variant, streams, checksums), false);
}

std::vector<uint8_t> gcz::footer_and_trailer(std::span<const FrameIndex> frames, std::span<const std::string> variants,
                                             uint64_t footer_offset) {
  std::vector<uint8_t> p;
  ByteWriter w(p);
  w.u32(static_cast<uint32_t>(frames.size()));
  for (const auto& f : frames) {
    w.u64(f.offset);
    w.u32(static_cast<uint32_t>(f.records.size()));
    for (auto [off, size] : f.records) w.u64(off), w.u64(size);
  }
  w.u32(static_cast<uint32_t>(variants.size()));
  for (const auto& v : variants) {
    w.u32(static_cast<uint32_t>(v.size()));
    w.bytes(v.data(), v.size());
  }
  std::vector<uint8_t> out = section("FOOT", p, true);
  const std::vector<uint8_t> t = trailer(footer_offset, 0);
  out.insert(out.end(), t.begin(), t.end());
  return out;
}

std::vector<uint8_t> gcz::trailer(uint64_t footer_offset, uint16_t minor) {
  std::vector<uint8_t> t;
  ByteWriter tw(t);
  tw.u64(footer_offset);
  tw.u16(kFormatMajor);
  tw.u16(minor);
  tw.u32(static_cast<uint32_t>(xxh3(t.data(), 12)));
  tw.bytes(kEndMagic, 8);
  return t;
}

struct ContainerWriter::Impl {
  // A named file (AtomicOutput: temporary + rename) or a caller's sink; `out` writes to either.
  struct Out {
    std::unique_ptr<AtomicOutput> file;
    ByteSink* sink = nullptr;
    uint64_t written = 0;
    void write(const void* data, size_t n) {
      if (file) return file->write(data, n);
      sink->write(data, n);
      written += n;
    }
    void write(const std::vector<uint8_t>& b) { write(b.data(), b.size()); }
    uint64_t position() const noexcept { return file ? file->position() : written; }
    void commit() {
      if (file) return file->commit();
      sink->finish();
    }
  } out;
  uint16_t minor = kFormatMinor;
  std::vector<gcz::FrameIndex> frames;  // 1.0
  gcz::IndexBuilder index;              // 1.1
  std::vector<std::string> variants;  // ids 1..
  std::map<std::string, uint32_t> variant_ids;
  bool in_frame = false;
  bool finished = false;
  uint64_t frames_records = 0;  // 1.1: records of the current frame

  explicit Impl(std::unique_ptr<AtomicOutput> file) { out.file = std::move(file); }
  explicit Impl(ByteSink& sink) { out.sink = &sink; }
};

ContainerWriter::ContainerWriter(const std::string& path, bool overwrite, const ContainerHeader& h)
    : impl_(std::make_unique<Impl>(std::make_unique<AtomicOutput>(path, overwrite))) {
  impl_->minor = h.format_minor;
  impl_->index = gcz::IndexBuilder(h.inputs_json);
  impl_->out.write(gcz::preamble_section(h));
}

ContainerWriter::ContainerWriter(ByteSink& sink, const ContainerHeader& h) : impl_(std::make_unique<Impl>(sink)) {
  impl_->minor = h.format_minor;
  impl_->index = gcz::IndexBuilder(h.inputs_json);
  impl_->out.write(gcz::preamble_section(h));
}

ContainerWriter::~ContainerWriter() = default;

// 1.1: the body so far and the footer it needs (written by finish()).
uint64_t ContainerWriter::bytes_written() const noexcept {
  return impl_->out.position() + (impl_->minor == 1 && !impl_->finished ? impl_->index.bytes() : 0);
}

void ContainerWriter::begin_frame(const FrameInfo& f) {
  impl_->in_frame = true;
  impl_->frames_records = 0;
  if (impl_->minor == 1) return impl_->index.begin_frame(f);
  impl_->frames.push_back({impl_->out.position(), {}});
  impl_->out.write(gcz::frame_section(static_cast<uint32_t>(impl_->frames.size() - 1), f));
}

uint64_t record_size(const TensorInfo& info, Storage storage, uint32_t variant, const Streams& streams) {
  const std::vector<uint64_t> sums(streams.all().size(), 0);  // their values do not change the size
  uint64_t n = gcz::record_section(info, storage, variant, gcz::stream_entries(streams), sums).size();
  for (const auto& s : streams.all()) n += s.view().size();
  return n;
}

std::vector<uint8_t> record_bytes(const TensorInfo& info, Storage storage, uint32_t variant, const Streams& streams) {
  std::vector<uint8_t> out =
      gcz::record_section(info, storage, variant, gcz::stream_entries(streams), stream_checksums(streams));
  out.reserve(out.size() + streams.total_bytes());
  for (const auto& s : streams.all()) out.insert(out.end(), s.view().begin(), s.view().end());
  return out;
}

std::vector<uint64_t> stream_checksums(const Streams& streams) {
  std::vector<uint64_t> sums;
  sums.reserve(streams.all().size());
  for (const auto& s : streams.all()) sums.push_back(xxh3(s.view().data(), s.view().size()));
  return sums;
}

void ContainerWriter::add(const TensorInfo& info, Storage storage, uint32_t variant, const Streams& streams) {
  add(info, storage, variant, streams, stream_checksums(streams));
}

void ContainerWriter::add(const TensorInfo& info, Storage storage, uint32_t variant, const Streams& streams,
                          std::span<const uint64_t> checksums) {
  if (!impl_->in_frame) fail(ErrorCode::Internal, "ContainerWriter::add outside a frame");
  if (impl_->minor == 1) {
    if (checksums.size() != streams.all().size()) fail(ErrorCode::Internal, "a checksum per stream expected");
    impl_->index.add(info, storage, variant, gcz::stream_entries(streams), checksums);
    for (const auto& s : streams.all()) impl_->out.write(s.view().data(), s.view().size());
    ++impl_->frames_records;
    return;
  }
  uint64_t start = impl_->out.position();
  impl_->out.write(gcz::record_section(info, storage, variant, gcz::stream_entries(streams), checksums));
  for (const auto& s : streams.all()) impl_->out.write(s.view().data(), s.view().size());
  impl_->frames.back().records.emplace_back(start, impl_->out.position() - start);
}

void ContainerWriter::add_record(uint32_t index, const TensorInfo& info, Storage storage, uint32_t variant,
                                 Streams&& streams, std::span<const uint64_t> checksums) {
  const uint64_t expected = impl_->minor == 1 ? impl_->frames_records : impl_->frames.back().records.size();
  if (!impl_->in_frame || index != expected)
    fail(ErrorCode::Internal, "ContainerWriter::add_record: record " + std::to_string(index) + " out of order");
  add(info, storage, variant, streams, checksums);
}

uint32_t ContainerWriter::variant(const std::string& json) {
  auto it = impl_->variant_ids.find(json);
  if (it != impl_->variant_ids.end()) return it->second;
  impl_->variants.push_back(json);
  uint32_t id = static_cast<uint32_t>(impl_->variants.size());
  impl_->variant_ids[json] = id;
  return id;
}

void ContainerWriter::finish() {
  if (impl_->finished) return;
  if (impl_->minor == 1) impl_->out.write(impl_->index.footer_and_trailer(impl_->variants, impl_->out.position()));
  else impl_->out.write(gcz::footer_and_trailer(impl_->frames, impl_->variants, impl_->out.position()));
  impl_->out.commit();
  impl_->finished = true;
}

}  // namespace gradcodec
