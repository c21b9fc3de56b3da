// SPDX-License-Identifier: BSD-3-Clause
// The .gcz container 1.1's footer, the index: a tensor table (names front-coded), the variants, a
// layout table (storage, variant, stream names and widths) and each frame's records (tensor id
// delta-coded, layout id, stream sizes, the record's check), all varints. Built by the writers
// (container_write.cpp, container_part.cpp), parsed by the reader (container_read.cpp).
// Byte layout: docs/format.md, "Format 1.1".
#include "engine/container_layout.hpp"

#include "base/checksum.hpp"
#include <gradcodec/bytes.hpp>
#include <gradcodec/container_error.hpp>
#include <gradcodec/detail/json_capped.hpp>
#include <gradcodec/pipeline.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>

namespace gradcodec {

uint32_t record_check(std::span<const uint64_t> checksums) {
  std::vector<uint8_t> b;
  ByteWriter w(b);
  for (uint64_t c : checksums) w.u64(c);
  return static_cast<uint32_t>(xxh3(b.data(), b.size()));
}

}  // namespace gradcodec

namespace gradcodec::gcz {

namespace {

inline constexpr size_t kMaxSource = 4096;  // a frame's source, as 1.0's FRAM section keeps it
inline constexpr uint8_t kBigEndian = 8;    // a tensor's type byte: bits 0-2 dtype, bit 3 this,
inline constexpr uint8_t kNdimEscape = 15;  // bits 4-7 ndim (15: a u8 ndim follows)
inline constexpr uint8_t kKeyframe = 1;     // a frame's flags
inline constexpr uint8_t kHasSource = 2;
inline constexpr uint64_t kMoved = 1;       // a record's head: bit 0 = a tensor delta follows

uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
int64_t unzigzag(uint64_t z) { return static_cast<int64_t>(z >> 1) ^ -static_cast<int64_t>(z & 1); }

// A tensor's entry after its name: type, descr, ndim, shape.
std::vector<uint8_t> tensor_tail(const TensorInfo& info) {
  std::vector<uint8_t> t;
  ByteWriter w(t);
  if (info.shape.size() > kMaxDims) fail(ErrorCode::Usage, info.name + ": more than 32 dimensions");
  const uint8_t ndim = static_cast<uint8_t>(info.shape.size());
  w.u8(static_cast<uint8_t>(static_cast<uint8_t>(info.dtype) | (info.big_endian ? kBigEndian : 0) |
                            std::min<uint8_t>(ndim, kNdimEscape) << 4));
  if (ndim >= kNdimEscape) w.u8(ndim);
  if (info.dtype == DType::Other) {
    w.varint(info.descr.size());
    w.bytes(info.descr.data(), info.descr.size());
  }
  for (uint64_t d : info.shape) w.varint(d);
  return t;
}

}  // namespace

std::vector<std::string> input_paths(const std::string& inputs_json) {
  std::vector<std::string> out;
  const auto parsed = parse_json_capped<nlohmann::ordered_json>(inputs_json);  // as every JSON read is
  const nlohmann::ordered_json& j = parsed.value;
  if (!parsed.error.empty() || !j.is_array()) return out;
  for (const auto& in : j)
    out.push_back(in.is_object() && in.contains("path") && in["path"].is_string() ? in["path"].get<std::string>() : "");
  return out;
}

void IndexBuilder::begin_frame(const FrameInfo& frame) {
  Frame f;
  f.flags = frame.keyframe ? kKeyframe : 0;
  const size_t at = frames_.size();
  if (at >= paths_.size() || paths_[at] != frame.source || frame.source.size() > kMaxSource) {
    f.flags |= kHasSource;
    f.source = frame.source.size() > kMaxSource ? frame.source.substr(0, kMaxSource) : frame.source;
  }
  bytes_ += 2 + f.source.size() + ((f.flags & kHasSource) ? 1 : 0);
  frames_.push_back(std::move(f));
}

uint64_t IndexBuilder::add(const TensorInfo& info, Storage storage, uint32_t variant,
                           std::span<const StreamEntry> streams, std::span<const uint64_t> checksums) {
  if (frames_.empty()) fail(ErrorCode::Internal, "IndexBuilder::add outside a frame");
  if (checksums.size() != streams.size()) fail(ErrorCode::Internal, "a checksum per stream expected");
  if (streams.size() > kMaxStreams) fail(ErrorCode::Internal, "too many streams");
  const uint64_t before = bytes_;
  // The tensor: the same name, dtype and shape as an earlier record's is that record's tensor.
  const std::vector<uint8_t> tail = tensor_tail(info);
  std::string key = info.name;
  key.push_back('\0');
  key.append(tail.begin(), tail.end());
  auto [t, new_tensor] = tensor_ids_.try_emplace(std::move(key), static_cast<uint32_t>(tensor_count_));
  if (new_tensor) {
    const size_t n = std::min(last_name_.size(), info.name.size());
    size_t prefix = 0;
    while (prefix < n && last_name_[prefix] == info.name[prefix]) ++prefix;
    const size_t at = tensors_.size();
    ByteWriter w(tensors_);
    w.varint(prefix);
    w.varint(info.name.size() - prefix);
    w.bytes(info.name.data() + prefix, info.name.size() - prefix);
    w.bytes(tail.data(), tail.size());
    bytes_ += tensors_.size() - at;
    last_name_ = info.name;
    ++tensor_count_;
  }
  // The layout.
  std::vector<uint8_t> lay;
  ByteWriter lw(lay);
  lw.u8(static_cast<uint8_t>(storage));
  lw.varint(variant);
  lw.u8(static_cast<uint8_t>(streams.size()));
  for (const StreamEntry& s : streams) {
    if (s.name.empty() || s.name.size() > 255) fail(ErrorCode::Internal, "bad stream name");
    lw.u8(static_cast<uint8_t>(s.name.size()));
    lw.bytes(s.name.data(), s.name.size());
    lw.u8(s.width);
  }
  auto [l, new_layout] =
      layout_ids_.try_emplace(std::string(lay.begin(), lay.end()), static_cast<uint32_t>(layout_count_));
  if (new_layout) {
    layouts_.insert(layouts_.end(), lay.begin(), lay.end());
    bytes_ += lay.size();
    ++layout_count_;
  }
  // The record's entry.
  Frame& f = frames_.back();
  const size_t at = f.entries.size();
  ByteWriter w(f.entries);
  const int64_t delta = static_cast<int64_t>(t->second) - (f.last_tensor + 1);
  w.varint((uint64_t{l->second} << 1) | (delta != 0 ? kMoved : 0));
  if (delta != 0) w.varint(zigzag(delta));
  for (const StreamEntry& s : streams) w.varint(s.size);
  w.u32(record_check(checksums));
  f.last_tensor = t->second;
  ++f.count;
  bytes_ += f.entries.size() - at;
  return bytes_ - before;
}

std::vector<uint8_t> IndexBuilder::footer_and_trailer(std::span<const std::string> variants,
                                                      uint64_t footer_offset) const {
  std::vector<uint8_t> p;
  ByteWriter w(p);
  w.varint(tensor_count_);
  w.bytes(tensors_.data(), tensors_.size());
  w.varint(variants.size());
  for (const auto& v : variants) {
    const std::string text = Pipeline::from_json(v).text();
    if (Pipeline::parse(text).json() != v)
      fail(ErrorCode::Internal, "container footer: the variant '" + text + "' does not give its JSON");
    w.varint(text.size());
    w.bytes(text.data(), text.size());
  }
  w.varint(layout_count_);
  w.bytes(layouts_.data(), layouts_.size());
  w.varint(frames_.size());
  for (const Frame& f : frames_) {
    w.u8(f.flags);
    if (f.flags & kHasSource) {
      w.varint(f.source.size());
      w.bytes(f.source.data(), f.source.size());
    }
    w.varint(f.count);
    w.bytes(f.entries.data(), f.entries.size());
  }
  std::vector<uint8_t> out = section("FOOT", p, true);
  const std::vector<uint8_t> t = trailer(footer_offset, 1);
  out.insert(out.end(), t.begin(), t.end());
  return out;
}

Index parse_index(std::span<const uint8_t> payload, uint64_t body_start, uint64_t body_end, uint64_t footer_offset,
                  std::span<const std::string> paths, const std::string& where) {
  auto corrupt = [&](const std::string& why) {
    throw ContainerError(where + " at offset " + std::to_string(footer_offset) + ": " + why);
  };
  ByteReader r(payload, where + " at offset " + std::to_string(footer_offset));
  // A count of entries of at least `least` bytes each, checked against the bytes left.
  auto count = [&](const char* what, uint64_t least) {
    const uint64_t n = r.varint();
    if (n > r.remaining() / least) corrupt(std::string(what) + " count " + std::to_string(n) + " exceeds its size");
    return n;
  };
  auto string = [&](uint64_t cap, const char* what) {
    const uint64_t n = r.varint();
    if (n > cap) corrupt(std::string(what) + " of " + std::to_string(n) + " bytes (at most " + std::to_string(cap) + ")");
    const auto b = r.bytes(n);
    return std::string(b.begin(), b.end());
  };
  Index ix;
  ix.tensors.resize(count("tensor", 3));
  std::string last;
  for (size_t t = 0; t < ix.tensors.size(); ++t) {
    TensorInfo& info = ix.tensors[t];
    const uint64_t prefix = r.varint();
    if (prefix > last.size()) corrupt("tensor " + std::to_string(t) + ": name prefix longer than the previous name");
    const std::string suffix = string(kMaxStr16 - prefix, "tensor name");
    info.name = last.substr(0, prefix) + suffix;
    last = info.name;
    const uint8_t type = r.u8();
    if ((type & 7) > static_cast<uint8_t>(DType::F64))
      corrupt("tensor " + info.name + ": unknown dtype code " + std::to_string(type & 7));
    info.dtype = static_cast<DType>(type & 7);
    info.big_endian = (type & kBigEndian) != 0;
    uint8_t ndim = type >> 4;
    if (ndim == kNdimEscape) {
      ndim = r.u8();
      if (ndim < kNdimEscape || ndim > kMaxDims)
        corrupt("tensor " + info.name + ": " + std::to_string(ndim) + " dimensions after the escape (15 to 32)");
    }
    if (info.dtype == DType::Other) info.descr = string(kMaxStr16, "dtype description");
    info.shape.resize(ndim);
    uint64_t elements = 1;
    for (auto& dim : info.shape) {
      dim = r.varint();
      if (dim != 0 && elements > (uint64_t{1} << 61) / dim) corrupt("tensor " + info.name + ": shape overflows");
      elements *= dim;
    }
  }
  ix.variants.resize(count("variant", 1));
  for (auto& v : ix.variants) v = string(payload.size(), "variant");
  ix.layouts.resize(count("layout", 3));
  for (size_t k = 0; k < ix.layouts.size(); ++k) {
    Layout& l = ix.layouts[k];
    const std::string what = "layout " + std::to_string(k);
    const uint8_t st = r.u8();
    if (st > static_cast<uint8_t>(Storage::PassThrough)) corrupt(what + ": unknown storage " + std::to_string(st));
    l.storage = static_cast<Storage>(st);
    const uint64_t var = r.varint();
    if (var > ix.variants.size()) corrupt(what + ": unknown pipeline variant " + std::to_string(var));
    l.variant = static_cast<uint32_t>(var);
    const uint8_t ns = r.u8();
    if (ns > kMaxStreams) corrupt(what + ": too many streams");
    for (uint8_t s = 0; s < ns; ++s) {
      const uint8_t nl = r.u8();
      if (nl == 0) corrupt(what + ": a stream without a name");
      const auto nb = r.bytes(nl);
      std::string name(nb.begin(), nb.end());
      for (const auto& earlier : l.streams)
        if (earlier.first == name) corrupt(what + ": stream '" + name + "' appears twice");
      l.streams.emplace_back(std::move(name), r.u8());
    }
    if (l.storage != Storage::Pipeline && (l.streams.size() != 1 || l.streams[0].first != "raw"))
      corrupt(what + ": a " + storage_name(l.storage) + " record has one stream, raw");
  }
  ix.frames.resize(count("frame", 2));
  ix.records.resize(ix.frames.size());
  uint64_t pos = body_start;
  for (size_t f = 0; f < ix.frames.size(); ++f) {
    FrameInfo& fi = ix.frames[f];
    fi.index = static_cast<uint32_t>(f);
    const uint8_t flags = r.u8();
    if (flags > (kKeyframe | kHasSource)) corrupt("frame " + std::to_string(f) + ": unknown flags " + std::to_string(flags));
    fi.keyframe = (flags & kKeyframe) != 0;
    if (flags & kHasSource) fi.source = string(kMaxSource, "frame source");
    else if (f < paths.size()) fi.source = paths[f];
    else corrupt("frame " + std::to_string(f) + ": no source (the header has no input " + std::to_string(f) + ")");
    ix.records[f].resize(count("record", 5));
    int64_t last_tensor = -1;
    for (size_t i = 0; i < ix.records[f].size(); ++i) {
      IndexRecord& rec = ix.records[f][i];
      const std::string what = "record " + std::to_string(i) + " of frame " + std::to_string(f);
      const uint64_t head = r.varint();
      const uint64_t l = head >> 1;
      if (l >= ix.layouts.size()) corrupt(what + ": no layout " + std::to_string(l));
      const int64_t delta = (head & kMoved) ? unzigzag(r.varint()) : 0;
      if ((head & kMoved) && delta == 0) corrupt(what + ": a tensor delta of 0 written out");
      const int64_t t = last_tensor + 1 + delta;  // |delta| < 2^63: no overflow from last_tensor < 2^32
      if (t < 0 || static_cast<uint64_t>(t) >= ix.tensors.size()) corrupt(what + ": no tensor " + std::to_string(t));
      rec.tensor = static_cast<uint32_t>(t);
      last_tensor = t;
      rec.layout = static_cast<uint32_t>(l);
      rec.offset = pos;
      rec.sizes_at = ix.sizes.size();
      for (size_t s = 0; s < ix.layouts[l].streams.size(); ++s) {
        const uint64_t size = r.varint();
        if (size > body_end - pos) corrupt(what + ": its streams run past the body");
        ix.sizes.push_back(size);
        pos += size;
      }
      rec.size = pos - rec.offset;
      rec.check = r.u32();
      const TensorInfo& info = ix.tensors[rec.tensor];
      if (ix.layouts[l].storage == Storage::Raw &&
          (info.dtype == DType::Other || rec.size != info.elements() * dtype_size(info.dtype)))
        corrupt(what + ": raw record does not hold " + shape_string(info.shape) + " " + dtype_name(info.dtype));
    }
  }
  r.expect_end();
  if (pos != body_end)
    corrupt("the records do not fill the body (" + std::to_string(body_end - pos) + " bytes after them)");
  return ix;
}

}  // namespace gradcodec::gcz
