// SPDX-License-Identifier: BSD-3-Clause
// The .gcz container v1: the reader. Byte layout: docs/format.md; the writer is container_write.cpp.
#include <gradcodec/container.hpp>
#include <gradcodec/container_error.hpp>
#include <gradcodec/pipeline.hpp>

#include "base/checksum.hpp"
#include "engine/container_layout.hpp"
#include <gradcodec/detail/json_capped.hpp>
#include <gradcodec/detail/pages.hpp>
#include "base/thread_buffer.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <optional>

namespace gradcodec {

using gcz::kEndMagic;
using gcz::kMagic;
using gcz::kPreambleSize;
using gcz::kTrailerSize;

namespace {

// A header value as an error message shows it: a number or literal as written, else its kind
// (a string or a structure could be megabytes long).
std::string json_shown(const nlohmann::ordered_json& v) {
  switch (v.type()) {
    case nlohmann::ordered_json::value_t::string: return "a string";
    case nlohmann::ordered_json::value_t::array: return "an array";
    case nlohmann::ordered_json::value_t::object: return "an object";
    case nlohmann::ordered_json::value_t::boolean: return "a boolean";
    case nlohmann::ordered_json::value_t::binary: return "binary data";
    default: return v.dump();  // null and numbers: a few characters
  }
}

// A key as an error message shows it: quoted as JSON, its first 60 bytes when longer.
std::string shown_key(const std::string& key) {
  return nlohmann::ordered_json(key.size() > 60 ? key.substr(0, 60) + "..." : key)
      .dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// The header's "inputs": an array with an object per input whose "path" and "format" (when
// present) are strings and whose "metadata" (when present) maps keys to strings, which decode
// restores. Returns what is wrong (to follow `"inputs"`), or "" when nothing is.
std::string check_inputs(const nlohmann::ordered_json& inputs) {
  if (!inputs.is_array()) return " must be an array of objects, not " + json_shown(inputs);
  for (size_t k = 0; k < inputs.size(); ++k) {
    const auto& in = inputs[k];
    const std::string where = ": input " + std::to_string(k);
    if (!in.is_object()) return " must be an array of objects" + where + " is " + json_shown(in);
    for (const char* key : {"path", "format"})
      if (in.contains(key) && !in[key].is_string())
        return where + ": \"" + key + "\" must be a string, not " + json_shown(in[key]);
    if (!in.contains("metadata")) continue;
    const auto& meta = in["metadata"];
    if (!meta.is_object()) return where + ": \"metadata\" must be an object of strings, not " + json_shown(meta);
    for (const auto& [key, value] : meta.items())
      if (!value.is_string())
        return where + ": \"metadata\" must be an object of strings: " + shown_key(key) + " is " + json_shown(value);
  }
  return "";
}

// Format 1.1's header pipeline: the canonical text and each stage's version give the canonical
// JSON (every parameter named) with those versions, which Pipeline::from_json then checks as
// 1.0's. Returns what is wrong, or "" when nothing is.
std::string pipeline_from_text(const std::string& text, const nlohmann::ordered_json& versions, std::string& json) {
  if (!versions.is_object()) return "\"versions\" must be an object, not " + json_shown(versions);
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(Pipeline::parse(text).json());
  } catch (const Error& e) {
    std::string why = e.what();
    if (why.size() > 200) why = why.substr(0, 200) + "...";  // it may quote the whole text
    return "\"pipeline\": " + why;
  }
  std::string missing;
  auto set = [&](auto& self, nlohmann::ordered_json& v) -> void {
    if (v.is_object() && v.contains("stage") && v.contains("version")) {
      const std::string name = v["stage"].get<std::string>();
      const auto it = versions.find(name);
      if (it == versions.end() || !it->is_number_unsigned()) {
        if (missing.empty()) missing = name;
        return;
      }
      v["version"] = *it;
    }
    if (v.is_structured())
      for (auto& x : v) self(self, x);
  };
  set(set, j);
  if (!missing.empty()) return "\"versions\" gives no version of stage " + shown_key(missing);
  json = j.dump();
  return "";
}

}  // namespace

const char* storage_name(Storage s) noexcept {
  switch (s) {
    case Storage::Pipeline: return "pipeline";
    case Storage::Raw: return "raw";
    case Storage::PassThrough: return "pass-through";
  }
  return "?";
}

uint64_t RecordMeta::stream_bytes() const noexcept {
  uint64_t n = 0;
  for (const auto& s : streams) n += s.size;
  return n;
}

void ContainerReader::corrupt(const std::string& section, uint64_t offset, const std::string& why) const {
  throw ContainerError(file_->path() + ": corrupt container: " + section + " at offset " + std::to_string(offset) +
                       ": " + why);
}

void rethrow_corrupt_as(const std::string& where) {
  try {
    throw;
  } catch (const ContainerError&) {
    throw;
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Corrupt) throw;
    throw ContainerError(where + ": " + e.what());
  }
}

void rethrow_located(const ContainerReader& reader, size_t f, size_t i, const RecordMeta& m) {
  rethrow_corrupt_as(reader.path() + ": corrupt container: record " + std::to_string(i) + " of frame " +
                     std::to_string(f) + " (tensor " + m.info.name + ") at offset " + std::to_string(m.offset));
}

ContainerReader ContainerReader::open(const std::string& path) { return ContainerReader(open_file(path)); }

std::shared_ptr<const InputFile> ContainerReader::open_file(const std::string& path) {
  if (path == "-") {
    // The preamble and the smallest container's size first: a stream that is no container (an
    // endless `< /dev/zero`) is refused on its first bytes. A container declares no total size
    // (the trailer ends it), so the rest is read to the end, up to kStdinCap.
    StdinReader in;
    const bool whole = in.fill(kPreambleSize + 8 + kTrailerSize);
    const auto& b = in.bytes();
    uint16_t major = 0;
    uint32_t header_len = 0;
    if (whole) {
      std::memcpy(&major, b.data() + 8, 2);
      std::memcpy(&header_len, b.data() + 12, 4);
    }
    if (whole && std::memcmp(b.data(), kMagic, 8) == 0 && major == kFormatMajor && header_len <= kMaxHeaderBytes)
      in.fill_to_end();
    return in.take(ErrorCode::Corrupt);  // refused by the reader's checks when it stopped early
  }
  return InputFile::open(path, /*readable=*/true, /*changed=*/ErrorCode::Corrupt);
}

ContainerReader::ContainerReader(std::shared_ptr<const InputFile> file) : file_(std::move(file)) {
  const uint8_t* d = file_->data();
  const uint64_t size = file_->size();
  if (size < kPreambleSize + 8 + kTrailerSize) corrupt("file", 0, "too short to be a .gcz container");
  if (std::memcmp(d, kMagic, 8) != 0) corrupt("preamble", 0, "bad magic (not a .gcz container)");
  uint16_t major, minor;
  uint32_t header_len;
  std::memcpy(&major, d + 8, 2);
  std::memcpy(&minor, d + 10, 2);
  std::memcpy(&header_len, d + 12, 4);
  const std::string version = std::to_string(major) + "." + std::to_string(minor);
  if (major != kFormatMajor)
    corrupt("preamble", 8, "unsupported format version " + version + " (this gradcodec reads version 1)");
  if (minor > kFormatMinor)
    corrupt("preamble", 10, "unsupported format version " + version + " (this gradcodec reads 1.0 and 1.1)");
  minor_ = minor;
  // trailer
  const uint8_t* t = d + size - kTrailerSize;
  if (std::memcmp(t + 16, kEndMagic, 8) != 0) corrupt("trailer", size - 8, "bad end magic (truncated file?)");
  uint32_t tsum;
  std::memcpy(&tsum, t + 12, 4);
  if (tsum != static_cast<uint32_t>(xxh3(t, 12))) corrupt("trailer", size - kTrailerSize, "checksum mismatch");
  uint16_t tmajor, tminor;
  std::memcpy(&tmajor, t + 8, 2);
  std::memcpy(&tminor, t + 10, 2);
  if (tmajor != major || (minor > 0 && tminor != minor)) corrupt("trailer", size - kTrailerSize + 8, "format version differs from the preamble's");
  // header
  if (header_len > kMaxHeaderBytes) corrupt("header", 12, "header length " + std::to_string(header_len) + " exceeds the 16 MiB cap");
  if (kPreambleSize + header_len + 8 > size - kTrailerSize)
    corrupt("header", 12, "header length " + std::to_string(header_len) + " runs past the end of the file");
  uint64_t hsum;
  std::memcpy(&hsum, d + kPreambleSize + header_len, 8);
  if (hsum != xxh3(d, kPreambleSize + header_len)) corrupt("header", kPreambleSize, "checksum mismatch");
  nlohmann::ordered_json versions;  // 1.1: every stage's version (the footer's variants need them too)
  {
    const auto parsed = parse_json_capped<nlohmann::ordered_json>(
        std::string_view(reinterpret_cast<const char*>(d + kPreambleSize), header_len));
    if (!parsed.error.empty()) corrupt("header", kPreambleSize, parsed.error);
    const nlohmann::ordered_json& j = parsed.value;
    if (!j.is_object()) corrupt("header", kPreambleSize, "not a JSON object");
    auto bad = [&](const std::string& why) { corrupt("header", kPreambleSize, why); };
    auto field = [&](const char* key) -> const nlohmann::ordered_json& {
      const auto it = j.find(key);
      if (it == j.end()) bad(std::string("missing field \"") + key + "\"");
      return *it;
    };
    auto string_field = [&](const char* key) {
      const auto& v = field(key);
      if (!v.is_string()) bad("\"" + std::string(key) + "\" must be a string, not " + json_shown(v));
      return v.get<std::string>();
    };
    // A JSON integer from 0 to `max` (written without a fraction or exponent, as the writer does).
    auto unsigned_field = [&](const char* key, uint64_t max) {
      const auto& v = field(key);
      if (!v.is_number_unsigned() || v.get<uint64_t>() > max)
        bad("\"" + std::string(key) + "\" must be an integer from 0 to " + std::to_string(max) + ", not " +
            json_shown(v));
      return v.get<uint64_t>();
    };
    if (!j.contains("format") || j["format"] != "gcz") bad("\"format\" must be \"gcz\"");
    header_.tool = string_field("tool");
    if (minor_ == 0) {
      header_.pipeline_json = field("pipeline").dump();  // nests at most kMaxJsonDepth: dump() recurses that deep
      header_.pipeline_text = string_field("pipeline_text");
    } else {
      header_.pipeline_text = string_field("pipeline");
      versions = field("versions");
      const std::string why = pipeline_from_text(header_.pipeline_text, versions, header_.pipeline_json);
      if (!why.empty()) bad(why);
    }
    header_.format_minor = minor_;
    header_.seed = unsigned_field("seed", UINT64_MAX);
    header_.keyframe_interval = static_cast<uint32_t>(unsigned_field("keyframe_interval", UINT32_MAX));
    const std::string inputs_error = check_inputs(field("inputs"));
    if (!inputs_error.empty()) bad("\"inputs\"" + inputs_error);
    header_.inputs_json = j["inputs"].dump();
    if (j.contains("target")) {  // optional (docs/format.md): an object, shown by inspect
      if (!j["target"].is_object()) bad("\"target\" must be an object, not " + json_shown(j["target"]));
      header_.target_json = j["target"].dump();
    }
  }
  const uint64_t body_start = kPreambleSize + header_len + 8;
  // footer
  uint64_t footer_off;
  std::memcpy(&footer_off, t, 8);
  const uint64_t footer_end = size - kTrailerSize;
  if (footer_off < body_start || footer_off > footer_end || footer_end - footer_off < 4 + 8 + 8)
    corrupt("trailer", size - kTrailerSize, "footer offset " + std::to_string(footer_off) + " out of range");
  if (std::memcmp(d + footer_off, "FOOT", 4) != 0) corrupt("footer", footer_off, "bad tag");
  uint64_t flen;
  std::memcpy(&flen, d + footer_off + 4, 8);
  if (flen != footer_end - footer_off - 20) corrupt("footer", footer_off + 4, "length does not match the file");
  uint64_t fsum;
  std::memcpy(&fsum, d + footer_off + 12 + flen, 8);
  if (fsum != xxh3(d + footer_off, 12 + flen)) corrupt("footer", footer_off, "checksum mismatch");
  if (minor_ == 1) {
    const std::vector<std::string> paths = gcz::input_paths(header_.inputs_json);
    auto ix = std::make_shared<gcz::Index>(gcz::parse_index({d + footer_off + 12, flen}, body_start, footer_off,
                                                            footer_off, paths, file_->path() + ": corrupt container: footer"));
    frames_ = ix->frames;
    for (const auto& recs : ix->records) {
      records_.emplace_back();
      for (const auto& rec : recs) records_.back().emplace_back(rec.offset, rec.size);
    }
    variants_.push_back(header_.pipeline_json);
    for (size_t v = 0; v < ix->variants.size(); ++v) {
      std::string json;
      const std::string why = pipeline_from_text(ix->variants[v], versions, json);
      if (!why.empty()) corrupt("footer", footer_off, "variant " + std::to_string(v + 1) + ": " + why);
      variants_.push_back(std::move(json));
    }
    index_ = std::move(ix);
  } else {
    read_footer_v10(footer_off, body_start);
  }
  // Every pipeline must name stages and versions this gradcodec decodes (checked once, here, so
  // that decode and inspect refuse such a file alike).
  for (size_t v = 0; v < variants_.size(); ++v) {
    try {
      (void)Pipeline::from_json(variants_[v]);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Corrupt) throw;
      if (v == 0) corrupt("header", kPreambleSize, e.what());
      corrupt("footer", footer_off, "variant " + std::to_string(v) + ": " + e.what());
    }
  }
}

void ContainerReader::read_footer_v10(uint64_t footer_off, uint64_t body_start) {
  const uint8_t* d = file_->data();
  uint64_t flen;
  std::memcpy(&flen, d + footer_off + 4, 8);
  ByteReader r({d + footer_off + 12, flen}, file_->path() + ": corrupt container: footer");
  uint32_t nframes = r.u32();
  if (nframes > r.remaining() / 12) corrupt("footer", footer_off, "frame count " + std::to_string(nframes) + " exceeds its size");
  for (uint32_t f = 0; f < nframes; ++f) {
    uint64_t foff = r.u64();
    uint32_t nrec = r.u32();
    if (nrec > r.remaining() / 16) corrupt("footer", footer_off, "tensor count " + std::to_string(nrec) + " exceeds its size");
    std::vector<std::pair<uint64_t, uint64_t>> recs(nrec);
    for (auto& [off, sz] : recs) {
      off = r.u64();
      sz = r.u64();
      if (off < body_start || off > footer_off || sz > footer_off - off || sz < 16)
        corrupt("footer", footer_off, "record " + std::to_string(&off - &recs[0].first) + " of frame " +
                                          std::to_string(f) + " lies outside the body");
    }
    // frame section
    if (foff < body_start || foff > footer_off || footer_off - foff < 16) corrupt("footer", footer_off, "frame offset out of range");
    if (std::memcmp(d + foff, "FRAM", 4) != 0) corrupt("frame " + std::to_string(f), foff, "bad tag");
    uint32_t plen;
    std::memcpy(&plen, d + foff + 4, 4);
    if (plen > footer_off - foff - 16) corrupt("frame " + std::to_string(f), foff + 4, "length runs past the body");
    uint64_t psum;
    std::memcpy(&psum, d + foff + 8 + plen, 8);
    if (psum != xxh3(d + foff, 8 + plen)) corrupt("frame " + std::to_string(f), foff, "checksum mismatch");
    ByteReader fr({d + foff + 8, plen}, file_->path() + ": corrupt container: frame " + std::to_string(f));
    FrameInfo fi;
    fi.index = fr.u32();
    if (fi.index != f) corrupt("frame " + std::to_string(f), foff, "frame number " + std::to_string(fi.index) + " out of sequence");
    fi.keyframe = (fr.u8() & 1) != 0;
    fi.source = fr.str16();
    fr.expect_end();
    frames_.push_back(fi);
    records_.push_back(std::move(recs));
  }
  uint32_t nvar = r.u32();
  variants_.push_back(header_.pipeline_json);
  for (uint32_t v = 0; v < nvar; ++v) {
    uint32_t len = r.u32();
    auto b = r.bytes(len);
    variants_.emplace_back(b.begin(), b.end());
  }
  r.expect_end();
}

const FrameInfo& ContainerReader::frame(size_t f) const {
  if (f >= frames_.size()) fail(ErrorCode::Usage, "frame " + std::to_string(f) + " does not exist (the container has " +
                                                      std::to_string(frames_.size()) + ")");
  return frames_[f];
}

size_t ContainerReader::record_count(size_t f) const {
  frame(f);
  return records_[f].size();
}

RecordMeta parse_record(std::span<const uint8_t> rec, uint64_t offset, size_t variants, const std::string& where) {
  const uint8_t* d = rec.data();
  const uint64_t size = rec.size();
  auto corrupt = [&](uint64_t at, const std::string& why) {
    throw ContainerError(where + " at offset " + std::to_string(at) + ": " + why);
  };
  const uint64_t off = offset;
  // (A container's footer places no record shorter than this.)
  if (size < 16) corrupt(off, std::to_string(size) + " bytes, too short to be a record (at least 16)");
  if (std::memcmp(d, "TREC", 4) != 0) corrupt(off, "bad tag");
  uint32_t mlen;
  std::memcpy(&mlen, d + 4, 4);
  if (mlen > kMaxMetaBytes || mlen > size - 16) corrupt(off + 4, "metadata length " + std::to_string(mlen) + " out of range");
  uint64_t msum;
  std::memcpy(&msum, d + 8 + mlen, 8);
  if (msum != xxh3(d, 8 + mlen)) corrupt(off, "checksum mismatch");
  ByteReader r({d + 8, mlen}, where);
  RecordMeta m;
  m.offset = off;
  m.size = size;
  m.info.name = r.str16();
  uint8_t dt = r.u8();
  if (dt > static_cast<uint8_t>(DType::F64)) corrupt(off, "unknown dtype code " + std::to_string(dt));
  m.info.dtype = static_cast<DType>(dt);
  m.info.big_endian = (r.u8() & 1) != 0;
  if (m.info.dtype == DType::Other) m.info.descr = r.str16();
  uint8_t ndim = r.u8();
  if (ndim > kMaxDims) corrupt(off, std::to_string(ndim) + " dimensions (at most 32)");
  m.info.shape.resize(ndim);
  for (auto& dim : m.info.shape) dim = r.u64();
  uint64_t elements = 1;
  for (uint64_t dim : m.info.shape) {
    if (dim != 0 && elements > (uint64_t{1} << 61) / dim) corrupt(off, "shape " + shape_string(m.info.shape) + " overflows");
    elements *= dim;
  }
  uint8_t st = r.u8();
  if (st > static_cast<uint8_t>(Storage::PassThrough)) corrupt(off, "unknown storage " + std::to_string(st));
  m.storage = static_cast<Storage>(st);
  uint64_t var = r.varint();
  if (var >= variants) corrupt(off, "unknown pipeline variant " + std::to_string(var));
  m.variant = static_cast<uint32_t>(var);
  uint8_t ns = r.u8();
  if (ns > kMaxStreams) corrupt(off, "too many streams");
  uint64_t pos = off + 16 + mlen;
  for (uint8_t s = 0; s < ns; ++s) {
    StreamInfo si;
    uint8_t nl = r.u8();
    auto nb = r.bytes(nl);
    si.name.assign(nb.begin(), nb.end());
    for (const auto& earlier : m.streams)  // (at most 64 streams) a reader looks streams up by name
      if (earlier.name == si.name) corrupt(off, "stream '" + si.name + "' appears twice");
    si.width = r.u8();
    si.size = r.u64();
    si.checksum = r.u64();
    if (si.size > off + size - pos) corrupt(off, "stream '" + si.name + "' runs past the record");
    si.offset = pos;
    pos += si.size;
    m.streams.push_back(std::move(si));
  }
  r.expect_end();
  if (pos != off + size)
    corrupt(off, "streams do not fill the record (" + std::to_string(off + size - pos) + " bytes after them)");
  if ((m.storage == Storage::Raw) &&
      (m.streams.size() != 1 || m.streams[0].name != "raw" || m.info.dtype == DType::Other ||
       m.streams[0].size != elements * dtype_size(m.info.dtype)))
    corrupt(off, "raw record does not hold " + shape_string(m.info.shape) + " " + dtype_name(m.info.dtype));
  if (m.storage == Storage::PassThrough && (m.streams.size() != 1 || m.streams[0].name != "raw"))
    corrupt(off, "pass-through record without its raw stream");
  return m;
}

RecordMeta ContainerReader::record(size_t f, size_t i) const {
  frame(f);
  if (i >= records_[f].size()) fail(ErrorCode::Internal, "record index out of range");
  auto [off, size] = records_[f][i];
  if (index_) {  // 1.1: the footer holds the metadata (checked when the container was opened)
    const gcz::IndexRecord& rec = index_->records[f][i];
    const gcz::Layout& l = index_->layouts[rec.layout];
    RecordMeta m;
    m.info = index_->tensors[rec.tensor];
    m.storage = l.storage;
    m.variant = l.variant;
    m.offset = rec.offset;
    m.size = rec.size;
    m.whole_check = true;
    m.check = rec.check;
    uint64_t pos = rec.offset;
    for (size_t k = 0; k < l.streams.size(); ++k) {
      StreamInfo si;
      si.name = l.streams[k].first;
      si.width = l.streams[k].second;
      si.offset = pos;
      si.size = index_->sizes[rec.sizes_at + k];
      pos += si.size;
      m.streams.push_back(std::move(si));
    }
    return m;
  }
  // (The footer's checks placed the record inside the file.)
  return parse_record({file_->data() + off, size}, off, variants_.size(),
                      file_->path() + ": corrupt container: record " + std::to_string(i) + " of frame " +
                          std::to_string(f));
}

void ContainerReader::verify_streams(const RecordMeta& m) const {
  if (m.whole_check) return check_record(m);
  for (size_t k = 0; k < m.streams.size(); ++k) stream_bytes(m, k);
}

void ContainerReader::check_record(const RecordMeta& m) const {
  std::vector<uint64_t> sums;
  for (const auto& si : m.streams) {
    const uint8_t* p = file_->data() + si.offset;
    populate_read(p, si.size);  // the checksum reads it all: map it at once
    sums.push_back(xxh3(p, si.size));
  }
  if (record_check(sums) != m.check) corrupt("record of tensor " + m.info.name, m.offset, "checksum mismatch");
}

std::span<const uint8_t> ContainerReader::stream_bytes(const RecordMeta& m, size_t k) const {
  if (k >= m.streams.size()) fail(ErrorCode::Internal, "stream index out of range");
  const auto& si = m.streams[k];
  if (m.whole_check) {
    check_record(m);
    return {file_->data() + si.offset, si.size};
  }
  const uint8_t* p = file_->data() + si.offset;
  populate_read(p, si.size);  // the checksum reads it all: map it at once
  if (xxh3(p, si.size) != si.checksum)
    corrupt("stream '" + si.name + "' of tensor " + m.info.name, si.offset, "checksum mismatch");
  return {p, si.size};
}

struct ContainerReader::StreamChunks::Impl {
  const ContainerReader* reader;
  const InputFile* file;
  std::string what;  // "stream 'x' of tensor y"
  uint64_t offset, size, checksum;
  uint64_t pos = 0;
  size_t chunk;
  std::optional<ThreadBuffer> buffer;  // file reads land here (kept by the thread between streams)
  Xxh3Stream hash;
  bool checked = false;
  // 1.1: the record's check, and every stream's checksum (this one's when its last chunk passes).
  bool whole = false;
  uint32_t check = 0;
  size_t k = 0;
  std::vector<uint64_t> sums;
  // Compares this stream's checksum `sum` with what the record says.
  void compare(uint64_t sum) {
    checked = true;
    if (whole) {
      sums[k] = sum;
      if (record_check(sums) != check) reader->corrupt("record of " + what.substr(what.find("tensor ")), offset, "checksum mismatch");
    } else if (sum != checksum) {
      reader->corrupt(what, offset, "checksum mismatch");
    }
  }
};

ContainerReader::StreamChunks::StreamChunks(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ContainerReader::StreamChunks::StreamChunks(StreamChunks&&) noexcept = default;
ContainerReader::StreamChunks::~StreamChunks() = default;
uint64_t ContainerReader::StreamChunks::size() const noexcept { return impl_->size; }

std::span<const uint8_t> ContainerReader::StreamChunks::next() {
  Impl& c = *impl_;
  if (c.pos == c.size) return {};
  const size_t n = static_cast<size_t>(std::min<uint64_t>(c.chunk, c.size - c.pos));
  const uint8_t* p;
  if (c.file->reads_file()) {
    c.file->read_at(c.offset + c.pos, c.buffer->data(), n);
    p = c.buffer->data();
  } else {
    p = c.file->data() + c.offset + c.pos;
  }
  c.hash.update(p, n);
  c.pos += n;
  if (c.pos == c.size) c.compare(c.hash.digest());  // the last chunk: checked before anyone reads it
  return {p, n};
}

void ContainerReader::StreamChunks::finish() {
  while (!impl_->checked) next();
}

ContainerReader::StreamChunks ContainerReader::stream_chunks(const RecordMeta& m, size_t k, size_t chunk) const {
  if (k >= m.streams.size()) fail(ErrorCode::Internal, "stream index out of range");
  const auto& si = m.streams[k];
  auto c = std::make_unique<StreamChunks::Impl>();
  c->reader = this;
  c->file = file_.get();
  c->what = "stream '" + si.name + "' of tensor " + m.info.name;
  c->offset = si.offset;
  c->size = si.size;
  c->checksum = si.checksum;
  c->chunk = std::max<size_t>(chunk, 64);
  if (file_->reads_file()) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(c->chunk, std::max<uint64_t>(si.size, 1)));
    c->buffer.emplace(n);
  }
  if (m.whole_check) {  // 1.1: the record's other streams are hashed first (small, next to this one)
    c->whole = true;
    c->check = m.check;
    c->k = k;
    for (const auto& o : m.streams) {
      const uint8_t* p = file_->data() + o.offset;
      if (&o != &si) populate_read(p, o.size);
      c->sums.push_back(&o == &si ? 0 : xxh3(p, o.size));
    }
  }
  if (si.size == 0) c->compare(xxh3(nullptr, 0));  // nothing to hand out: checked now
  return StreamChunks(std::move(c));
}

Buffer ContainerReader::raw_view(const RecordMeta& m) const {
  if ((m.storage != Storage::Raw && m.storage != Storage::PassThrough) || m.streams.size() != 1)
    fail(ErrorCode::Internal, "raw_view of a record that is not raw");
  const std::span<const uint8_t> b = stream_bytes(m, 0);
  // Tensors' data is aligned for their element type (the format readers guarantee it): bytes at
  // a misaligned address are copied into aligned memory. Pass-through bytes (width 0) never are.
  const size_t w = dtype_size(m.info.dtype);
  if (w > 1 && reinterpret_cast<uintptr_t>(b.data()) % w != 0) return Buffer(std::vector<uint8_t>(b.begin(), b.end()));
  return file_->slice(m.streams[0].offset, m.streams[0].size);
}

std::vector<std::span<const uint8_t>> ContainerReader::record_streams(const RecordMeta& m) const {
  std::vector<std::span<const uint8_t>> out;
  if (m.whole_check) check_record(m);
  for (size_t k = 0; k < m.streams.size(); ++k)
    out.push_back(m.whole_check ? stream_bytes_unchecked(m, k) : stream_bytes(m, k));
  return out;
}

std::span<const uint8_t> ContainerReader::stream_bytes_unchecked(const RecordMeta& m, size_t k) const {
  if (k >= m.streams.size()) fail(ErrorCode::Internal, "stream index out of range");
  return {file_->data() + m.streams[k].offset, m.streams[k].size};
}

Streams ContainerReader::streams(const RecordMeta& m) const {
  Streams out;
  const std::vector<std::span<const uint8_t>> b = record_streams(m);
  for (size_t k = 0; k < m.streams.size(); ++k)
    out.add(m.streams[k].name, m.streams[k].width).bytes.assign(b[k].begin(), b[k].end());
  return out;
}

}  // namespace gradcodec
