// SPDX-License-Identifier: BSD-3-Clause
// ContainerPart (container_part.hpp): one process's records of a container several write, and
// the layout all compute alike from every part's description. The sections are those
// ContainerWriter writes (container_layout.hpp), in the same order, so the bytes are the same.
#include <gradcodec/container_part.hpp>

#include "engine/container_layout.hpp"

#include <gradcodec/bytes.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <utility>

namespace gradcodec {

namespace {

// One record as a description carries it.
struct Described {
  uint32_t frame = 0, index = 0;
  TensorInfo info;
  Storage storage = Storage::Pipeline;
  std::string variant_json;  // empty: the header's pipeline
  std::vector<std::string> names;
  std::vector<uint8_t> widths;
  std::vector<uint64_t> sizes, checksums;
};

void put(ByteWriter& w, const Described& r) {
  w.u32(r.frame);
  w.u32(r.index);
  w.str16(r.info.name);
  w.u8(static_cast<uint8_t>(r.info.dtype));
  w.u8(r.info.big_endian ? 1 : 0);
  w.str16(r.info.descr);
  w.u8(static_cast<uint8_t>(r.info.shape.size()));
  for (uint64_t d : r.info.shape) w.u64(d);
  w.u8(static_cast<uint8_t>(r.storage));
  w.u32(static_cast<uint32_t>(r.variant_json.size()));
  w.bytes(r.variant_json.data(), r.variant_json.size());
  w.u8(static_cast<uint8_t>(r.names.size()));
  for (size_t k = 0; k < r.names.size(); ++k) {
    w.str16(r.names[k]);
    w.u8(r.widths[k]);
    w.u64(r.sizes[k]);
    w.u64(r.checksums[k]);
  }
}

Described get(ByteReader& in) {
  Described r;
  r.frame = in.u32();
  r.index = in.u32();
  r.info.name = in.str16();
  r.info.dtype = static_cast<DType>(in.u8());
  r.info.big_endian = in.u8() != 0;
  r.info.descr = in.str16();
  r.info.shape.resize(in.u8());
  for (auto& d : r.info.shape) d = in.u64();
  r.storage = static_cast<Storage>(in.u8());
  const auto json = in.bytes(in.u32());
  r.variant_json.assign(json.begin(), json.end());
  const size_t n = in.u8();
  for (size_t k = 0; k < n; ++k) {
    r.names.push_back(in.str16());
    r.widths.push_back(in.u8());
    r.sizes.push_back(in.u64());
    r.checksums.push_back(in.u64());
  }
  return r;
}

}  // namespace

struct ContainerPart::Impl {
  std::vector<FrameInfo> frames;
  std::vector<std::string> variants;  // local ids 1..
  std::map<std::string, uint32_t> variant_ids;
  std::vector<Described> records;
  std::vector<Streams> streams;  // of records[k]
  uint64_t bytes = 0;
};

ContainerPart::ContainerPart() : impl_(std::make_unique<Impl>()) {}
ContainerPart::~ContainerPart() = default;

void ContainerPart::begin_frame(const FrameInfo& frame) { impl_->frames.push_back(frame); }

uint32_t ContainerPart::variant(const std::string& json) {
  auto it = impl_->variant_ids.find(json);
  if (it != impl_->variant_ids.end()) return it->second;
  impl_->variants.push_back(json);
  const auto id = static_cast<uint32_t>(impl_->variants.size());
  impl_->variant_ids[json] = id;
  return id;
}

void ContainerPart::add_record(uint32_t index, const TensorInfo& info, Storage storage, uint32_t variant,
                               Streams&& streams, std::span<const uint64_t> checksums) {
  Impl& m = *impl_;
  if (m.frames.empty()) fail(ErrorCode::Internal, "ContainerPart::add_record outside a frame");
  if (variant > m.variants.size() || checksums.size() != streams.all().size())
    fail(ErrorCode::Internal, "ContainerPart::add_record: bad variant or checksums");
  Described r;
  r.frame = static_cast<uint32_t>(m.frames.size() - 1);
  r.index = index;
  r.info = info;
  r.storage = storage;
  if (variant) r.variant_json = m.variants[variant - 1];
  for (size_t k = 0; k < streams.all().size(); ++k) {
    const Stream& s = streams.all()[k];
    r.names.push_back(s.name);
    r.widths.push_back(s.width);
    r.sizes.push_back(s.view().size());
    r.checksums.push_back(checksums[k]);
  }
  m.bytes += record_size(info, storage, variant, streams);
  m.records.push_back(std::move(r));
  m.streams.push_back(std::move(streams));
}

uint64_t ContainerPart::bytes_written() const noexcept { return impl_->bytes; }

std::vector<uint8_t> ContainerPart::describe() const {
  std::vector<uint8_t> out;
  out.reserve(12 + 96 * impl_->records.size());  // (and GCC 12 sees no write past an empty vector)
  ByteWriter w(out);
  w.u32(static_cast<uint32_t>(impl_->frames.size()));
  w.u64(impl_->records.size());
  for (const auto& r : impl_->records) put(w, r);
  return out;
}

uint64_t ContainerPart::write(const ContainerHeader& header, std::span<const std::vector<uint8_t>> parts, bool lead,
                              const WriteAt& write_at) const {
  const Impl& m = *impl_;
  const uint32_t frames = static_cast<uint32_t>(m.frames.size());
  // Every part's records, ordered as one writer writes them: by frame, then place in the frame.
  // `mine` maps (frame, index) to this part's record.
  std::vector<Described> all;
  for (const auto& p : parts) {
    ByteReader in(p, "container part");
    if (in.u32() != frames) fail(ErrorCode::Internal, "container parts disagree on the number of frames");
    const uint64_t n = in.u64();
    for (uint64_t k = 0; k < n; ++k) all.push_back(get(in));
    in.expect_end();
  }
  std::sort(all.begin(), all.end(), [](const Described& a, const Described& b) {
    return std::pair(a.frame, a.index) < std::pair(b.frame, b.index);
  });
  std::map<std::pair<uint32_t, uint32_t>, size_t> mine;
  for (size_t k = 0; k < m.records.size(); ++k) mine[{m.records[k].frame, m.records[k].index}] = k;

  const std::vector<uint8_t> preamble = gcz::preamble_section(header);
  if (lead) write_at(0, preamble);
  uint64_t pos = preamble.size();
  const bool v11 = header.format_minor == 1;
  std::vector<gcz::FrameIndex> index(frames);  // 1.0
  gcz::IndexBuilder index11(header.inputs_json);  // 1.1
  std::vector<std::string> variants;
  std::map<std::string, uint32_t> variant_ids;
  size_t next = 0;
  for (uint32_t f = 0; f < frames; ++f) {
    if (v11) {
      index11.begin_frame(m.frames[f]);
    } else {
      const std::vector<uint8_t> fs = gcz::frame_section(f, m.frames[f]);
      if (lead) write_at(pos, fs);
      index[f].offset = pos;
      pos += fs.size();
    }
    for (uint32_t i = 0; next < all.size() && all[next].frame == f; ++i, ++next) {
      const Described& r = all[next];
      if (r.index != i)
        fail(ErrorCode::Internal, "container parts: record " + std::to_string(i) + " of frame " + std::to_string(f) +
                                      (r.index < i ? " claimed twice" : " missing"));
      uint32_t variant = 0;
      if (!r.variant_json.empty()) {
        auto [it, added] = variant_ids.try_emplace(r.variant_json, static_cast<uint32_t>(variants.size() + 1));
        if (added) variants.push_back(r.variant_json);
        variant = it->second;
      }
      std::vector<gcz::StreamEntry> entries;
      uint64_t size = 0;
      for (size_t k = 0; k < r.names.size(); ++k) {
        entries.push_back({r.names[k], r.widths[k], r.sizes[k]});
        size += r.sizes[k];
      }
      std::vector<uint8_t> meta;  // 1.1: none in the body (the footer has it)
      if (v11) index11.add(r.info, r.storage, variant, entries, r.checksums);
      else meta = gcz::record_section(r.info, r.storage, variant, entries, r.checksums);
      size += meta.size();
      index[f].records.emplace_back(pos, size);
      if (auto it = mine.find({f, i}); it != mine.end()) {
        if (!meta.empty()) write_at(pos, meta);
        uint64_t at = pos + meta.size();
        for (const auto& s : m.streams[it->second].all()) {
          if (!s.view().empty()) write_at(at, s.view());
          at += s.view().size();
        }
      }
      pos += size;
    }
  }
  if (next != all.size()) fail(ErrorCode::Internal, "container parts: a record of a frame past the last");
  const std::vector<uint8_t> tail =
      v11 ? index11.footer_and_trailer(variants, pos) : gcz::footer_and_trailer(index, variants, pos);
  if (lead) write_at(pos, tail);
  return pos + tail.size();
}

}  // namespace gradcodec
