// SPDX-License-Identifier: BSD-3-Clause
// The .gcz container v1: what its writers (container_write.cpp, container_part.cpp) and reader
// (container_read.cpp) share; the 1.1 footer, the index, is container_index.cpp. Byte layout:
// docs/format.md.
#pragma once

#include <gradcodec/container.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gradcodec::gcz {

inline constexpr uint8_t kMagic[8] = {0x89, 'G', 'C', 'Z', '\r', '\n', 0x1a, '\n'};
inline constexpr uint8_t kEndMagic[8] = {0x89, 'G', 'C', 'Z', 'E', 'N', 'D', '\n'};
inline constexpr size_t kPreambleSize = 16;
inline constexpr size_t kTrailerSize = 24;

// A stream as a record's metadata lists it (its bytes are not needed to write the metadata).
struct StreamEntry {
  std::string_view name;
  uint8_t width = 1;
  uint64_t size = 0;
};
std::vector<StreamEntry> stream_entries(const Streams& streams);

// Each section exactly as a container holds it, checksum included.
// The preamble and the header (magic, version, header JSON, checksum).
std::vector<uint8_t> preamble_section(const ContainerHeader& header);
// Frame `index`'s FRAM section.
std::vector<uint8_t> frame_section(uint32_t index, const FrameInfo& frame);
// A record's TREC section: its metadata; the streams' bytes follow it in the container.
std::vector<uint8_t> record_section(const TensorInfo& info, Storage storage, uint32_t variant,
                                    std::span<const StreamEntry> streams, std::span<const uint64_t> checksums);
// A section (tag, length, payload, XXH3-64 of the three): a u64 length when `u64_len`, else u32.
std::vector<uint8_t> section(const char* tag, const std::vector<uint8_t>& payload, bool u64_len);
// The 24-byte trailer of a container of minor version `minor` whose footer is at `footer_offset`.
std::vector<uint8_t> trailer(uint64_t footer_offset, uint16_t minor);

// 1.0: the footer's FOOT section then the trailer, the footer starting at `footer_offset`.
struct FrameIndex {
  uint64_t offset = 0;
  std::vector<std::pair<uint64_t, uint64_t>> records;  // (offset, size)
};
std::vector<uint8_t> footer_and_trailer(std::span<const FrameIndex> frames, std::span<const std::string> variants,
                                        uint64_t footer_offset);

// ---- 1.1 (docs/format.md, "Format 1.1"): the body holds the streams alone, back to back; the
// footer holds the rest: a tensor table, a layout table, the variants and each frame's records.

// A record's layout: how it is stored and which streams it has, in order.
struct Layout {
  Storage storage = Storage::Pipeline;
  uint32_t variant = 0;
  std::vector<std::pair<std::string, uint8_t>> streams;  // (name, width)
};

// One record as the 1.1 footer places it.
struct IndexRecord {
  uint32_t tensor = 0, layout = 0;
  uint64_t offset = 0;    // its first stream's first byte
  uint64_t size = 0;      // its streams' bytes
  uint64_t sizes_at = 0;  // its streams' sizes start at Index::sizes[sizes_at]
  uint32_t check = 0;
};

// A 1.1 footer, every field checked (parse_index).
struct Index {
  std::vector<TensorInfo> tensors;
  std::vector<Layout> layouts;
  std::vector<std::string> variants;  // footer variants 1.. (canonical JSON)
  std::vector<FrameInfo> frames;
  std::vector<std::vector<IndexRecord>> records;  // per frame
  std::vector<uint64_t> sizes;
};

// The "path" of each of the header's inputs ("" where it has none), from its JSON.
std::vector<std::string> input_paths(const std::string& inputs_json);

// Parses the payload of a 1.1 footer whose records fill [body_start, body_end) exactly; a frame
// whose source the footer leaves out has `paths[f]` (the header's inputs). Variants are their
// canonical text. A damage throws ContainerError "<where> at offset <footer_offset>: <why>".
Index parse_index(std::span<const uint8_t> payload, uint64_t body_start, uint64_t body_end, uint64_t footer_offset,
                  std::span<const std::string> paths, const std::string& where);

// Builds a 1.1 footer as records are written, in container order.
class IndexBuilder {
 public:
  // `inputs_json`: the header's inputs (a frame's source equal to its input's path is not repeated).
  explicit IndexBuilder(const std::string& inputs_json = "[]") : paths_(input_paths(inputs_json)) {}
  void begin_frame(const FrameInfo& frame);
  // Adds the current frame's next record; returns the bytes the footer grew by.
  uint64_t add(const TensorInfo& info, Storage storage, uint32_t variant, std::span<const StreamEntry> streams,
               std::span<const uint64_t> checksums);
  uint64_t bytes() const noexcept { return bytes_; }  // the footer payload so far (estimate: ±counts)
  // The footer's FOOT section, then the trailer, the footer starting at `footer_offset`; the
  // variants are given as canonical JSON (the footer holds their canonical text).
  std::vector<uint8_t> footer_and_trailer(std::span<const std::string> variants, uint64_t footer_offset) const;

 private:
  struct Frame {
    uint8_t flags = 0;
    std::string source;
    uint64_t count = 0;
    int64_t last_tensor = -1;
    std::vector<uint8_t> entries;
  };
  std::vector<uint8_t> tensors_, layouts_;
  uint64_t tensor_count_ = 0, layout_count_ = 0;
  std::string last_name_;
  std::map<std::string, uint32_t> tensor_ids_, layout_ids_;
  std::vector<Frame> frames_;
  std::vector<std::string> paths_;
  uint64_t bytes_ = 0;
};

}  // namespace gradcodec::gcz
