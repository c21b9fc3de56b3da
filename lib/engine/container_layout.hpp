// SPDX-License-Identifier: BSD-3-Clause
// The .gcz container v1: what its writers (container_write.cpp, container_part.cpp) and reader
// (container_read.cpp) share. Byte layout: docs/format.md.
#pragma once

#include <gradcodec/container.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
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
// The footer's FOOT section then the trailer, the footer starting at `footer_offset`.
struct FrameIndex {
  uint64_t offset = 0;
  std::vector<std::pair<uint64_t, uint64_t>> records;  // (offset, size)
};
std::vector<uint8_t> footer_and_trailer(std::span<const FrameIndex> frames, std::span<const std::string> variants,
                                        uint64_t footer_offset);

}  // namespace gradcodec::gcz
