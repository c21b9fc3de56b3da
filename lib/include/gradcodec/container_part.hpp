// SPDX-License-Identifier: BSD-3-Clause
// One process's share of a .gcz container that several processes write together
// (docs/scale-out.md): each encodes some tensors (every frame of each, EncodeOptions::owns) into a
// ContainerPart, the parts exchange their descriptions, and each writes its own records at the
// offsets they all compute alike; one part, the lead, also writes the header, the frames'
// sections and the footer. The file then holds, byte for byte, what one ContainerWriter given
// every record in order would have written.
#pragma once

#include <gradcodec/container.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace gradcodec {

class ContainerPart final : public RecordSink {
 public:
  ContainerPart();
  ~ContainerPart() override;
  void begin_frame(const FrameInfo& frame) override;
  uint32_t variant(const std::string& pipeline_json) override;
  // Keeps the streams (in memory) until write().
  void add_record(uint32_t index, const TensorInfo& info, Storage storage, uint32_t variant, Streams&& streams,
                  std::span<const uint64_t> checksums) override;
  uint64_t bytes_written() const noexcept override;

  // What the other parts need of this one: every record's frame, place, metadata and stream
  // sizes and checksums (not the streams' bytes), and the frames' count.
  std::vector<uint8_t> describe() const;

  // Writes this part's bytes of the container that `parts` (every part's describe(), this one's
  // among them, in any order) make: its records' metadata and streams and, for the lead, the
  // preamble and header, every frame's section, the footer and the trailer, each through
  // write_at(offset, bytes). Every part computes the same layout. Parts that disagree (a frame
  // count, a record claimed twice or by none) are Error(Internal). Returns the container's size.
  using WriteAt = std::function<void(uint64_t offset, std::span<const uint8_t> bytes)>;
  uint64_t write(const ContainerHeader& header, std::span<const std::vector<uint8_t>> parts, bool lead,
                 const WriteAt& write_at) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gradcodec
