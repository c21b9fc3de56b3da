// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — the .gcz container, version 1.1 (and 1.0, still read and written on request),
// specified byte by byte in docs/format.md.
//
//   1.1: preamble | header | record streams* | footer (the index) | trailer
//   1.0: preamble | header | (frame | record*)* | footer | trailer
// Every section carries a checksum checked before use; the footer indexes every frame and record
// so one tensor of one frame is read without reading the rest.
#pragma once

#include <gradcodec/byte_sink.hpp>
#include <gradcodec/file_io.hpp>
#include <gradcodec/plugin/stage.hpp>
#include <gradcodec/tensor.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace gradcodec {

namespace gcz {
struct Index;  // a 1.1 footer as the reader keeps it (engine/container_layout.hpp)
}

inline constexpr uint16_t kFormatMajor = 1;
inline constexpr uint16_t kFormatMinor = 1;  // what writers write unless asked for 1.0
inline constexpr uint64_t kMaxHeaderBytes = 16u << 20;   // header JSON cap
inline constexpr uint32_t kMaxMetaBytes = 1u << 20;      // one record's metadata cap
inline constexpr uint32_t kMaxStreams = 64;
inline constexpr uint32_t kMaxDims = 32;

// How a tensor record holds its data.
enum class Storage : uint8_t {
  Pipeline = 0,     // the streams of the pipeline (or of variant `variant`)
  Raw = 1,          // one stream `raw`: the tensor's bytes (encoding would have grown it)
  PassThrough = 2,  // one stream `raw`: a non-floating array kept losslessly (--pass-through)
};
const char* storage_name(Storage s) noexcept;

struct ContainerHeader {
  // The format's minor version: 1 (compact framing) or 0 (1.0, for readers older than 1.1).
  uint16_t format_minor = kFormatMinor;
  std::string tool;           // "gradcodec 0.1.0"
  std::string pipeline_json;  // canonical JSON of the pipeline
  std::string pipeline_text;  // canonical text (informative; the JSON is authoritative)
  uint64_t seed = 0;
  uint32_t keyframe_interval = 0;  // 0 = only frame 0 is a keyframe
  std::string inputs_json = "[]";  // description of the inputs: [{"path":..,"format":..}, ...]
  // What `encode --target` searched (docs/target.md): a JSON object, the header's optional
  // "target"; empty when the container was not made to a target.
  std::string target_json;
};

struct FrameInfo {
  uint32_t index = 0;
  bool keyframe = true;
  std::string source;  // input file of this frame
};

struct StreamInfo {
  std::string name;
  uint8_t width = 1;
  uint64_t offset = 0;  // absolute file offset of the stream's first byte
  uint64_t size = 0;
  uint64_t checksum = 0;
};

struct RecordMeta {
  TensorInfo info;
  Storage storage = Storage::Pipeline;
  uint32_t variant = 0;  // 0 = the header's pipeline; k = footer variant k
  std::vector<StreamInfo> streams;
  uint64_t offset = 0;  // record start (1.1: its first stream's first byte)
  uint64_t size = 0;    // whole record, metadata and streams (1.1: the streams alone)
  // 1.1: one check for the whole record (StreamInfo::checksum is then unused): the low 32 bits
  // of the XXH3-64 of the streams' XXH3-64 values (record_check()).
  bool whole_check = false;
  uint32_t check = 0;
  uint64_t stream_bytes() const noexcept;
};

// The bytes ContainerWriter::add writes for this record: its metadata section (tag, length,
// metadata, checksum) and its streams.
uint64_t record_size(const TensorInfo& info, Storage storage, uint32_t variant, const Streams& streams);

// The same bytes themselves, checksums included: one record on its own (Compressor::encode), as
// it stands in a container.
std::vector<uint8_t> record_bytes(const TensorInfo& info, Storage storage, uint32_t variant, const Streams& streams);

// The metadata of the record `rec` (its TREC section and its streams, nothing before or after),
// every field checked as ContainerReader::record checks a container's: tag, metadata length and
// checksum, dtype, dimensions, shape (elements < 2^61), storage, variant (below `variants`),
// streams (distinct names, filling the record exactly), a raw record's size. The stream
// checksums are not verified here. Offsets (RecordMeta::offset, StreamInfo::offset, those in
// messages) count from `offset`, where `rec` starts. A damage throws ContainerError
// "<where> at offset <n>: <why>" (`where` names the record: "<file>: corrupt container: record 1
// of frame 0").
RecordMeta parse_record(std::span<const uint8_t> rec, uint64_t offset, size_t variants, const std::string& where);

// The XXH3-64 checksum of each stream, in order: what a 1.0 record's metadata stores.
std::vector<uint64_t> stream_checksums(const Streams& streams);
// A 1.1 record's check from its streams' checksums: the low 32 bits of the XXH3-64 of the
// checksums written as u64 little-endian, in stream order.
uint32_t record_check(std::span<const uint64_t> checksums);

// Where SequenceEncoder puts a frame's records, in record order: a ContainerWriter, or one
// process's ContainerPart of a container that several write together (container_part.hpp).
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  virtual void begin_frame(const FrameInfo& frame) = 0;
  // The id a record made by the pipeline variant `pipeline_json` (canonical JSON) carries.
  virtual uint32_t variant(const std::string& pipeline_json) = 0;
  // Record `index` of the current frame (the tensor's place in it), its streams' checksums
  // computed beforehand (stream_checksums); the sink may keep the streams. A writer takes every
  // index in order; a part, some of them in increasing order.
  virtual void add_record(uint32_t index, const TensorInfo& info, Storage storage, uint32_t variant,
                          Streams&& streams, std::span<const uint64_t> checksums) = 0;
  // The bytes the records added so far take (the container's, for a writer).
  virtual uint64_t bytes_written() const noexcept = 0;
};

class ContainerWriter final : public RecordSink {
 public:
  // Opens the output (temp file + rename; "-" = stdout) and writes preamble and header.
  ContainerWriter(const std::string& path, bool overwrite, const ContainerHeader& header);
  // Writes to `sink` (which must outlive the writer); finish() calls sink.finish() after the
  // last byte. A writer destroyed before finish() leaves the sink with an incomplete container.
  ContainerWriter(ByteSink& sink, const ContainerHeader& header);
  ~ContainerWriter();
  void begin_frame(const FrameInfo& frame) override;
  void add(const TensorInfo& info, Storage storage, uint32_t variant, const Streams& streams);
  // The same, with the streams' checksums computed beforehand by stream_checksums(streams) (the
  // encoder's workers do it in parallel, so the writer, used one record at a time, only writes).
  // A count that does not match the streams is refused (Internal).
  void add(const TensorInfo& info, Storage storage, uint32_t variant, const Streams& streams,
           std::span<const uint64_t> checksums);
  void add_record(uint32_t index, const TensorInfo& info, Storage storage, uint32_t variant, Streams&& streams,
                  std::span<const uint64_t> checksums) override;
  // Registers a pipeline variant (canonical JSON); returns its id (≥ 1). Same JSON, same id.
  uint32_t variant(const std::string& pipeline_json) override;
  // Writes footer and trailer and moves the file into place.
  void finish();
  uint64_t bytes_written() const noexcept override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class ContainerReader {
 public:
  // Validates preamble, trailer, footer and header; throws Error(Corrupt) naming the file, the
  // section and the offset. Records are validated when first touched.
  explicit ContainerReader(std::shared_ptr<const InputFile> file);
  static ContainerReader open(const std::string& path);
  // The bytes open() reads, unchecked: a file by name (mapped; a change while it is read is
  // Error(Corrupt)), or standard input ("-") read only as far as its first bytes when they are no
  // container's, else to its end (bounded). For a caller that looks at the bytes first.
  static std::shared_ptr<const InputFile> open_file(const std::string& path);

  const ContainerHeader& header() const noexcept { return header_; }
  size_t frame_count() const noexcept { return frames_.size(); }
  const FrameInfo& frame(size_t f) const;
  size_t record_count(size_t f) const;
  // Record metadata (checksummed); reads only the record's metadata block.
  RecordMeta record(size_t f, size_t i) const;
  // The format's minor version (0 or 1).
  uint16_t format_minor() const noexcept { return minor_; }
  // Checks every stream's checksum (1.1: the record's check; Corrupt on a mismatch) without
  // copying the bytes.
  void verify_streams(const RecordMeta& m) const;
  // The record's streams, each checked against its checksum.
  Streams streams(const RecordMeta& meta) const;
  // Stream k of the record, checked against its checksum, as the container's bytes in place
  // (valid while this reader lives).
  std::span<const uint8_t> stream_bytes(const RecordMeta& meta, size_t k) const;
  // Every stream of the record, checked (1.0: each against its checksum; 1.1: the record's check,
  // made once), as the container's bytes in place (valid while this reader lives).
  std::vector<std::span<const uint8_t>> record_streams(const RecordMeta& meta) const;
  // Stream k as the container's bytes, NOT checked: for a caller whose bytes are checked before
  // it uses them another way (a 1.1 record's stream_chunks() checks every stream of the record).
  std::span<const uint8_t> stream_bytes_unchecked(const RecordMeta& meta, size_t k) const;
  // Stream k of the record handed out front to back in chunks, for a decoder that reads its
  // input as it goes (zstd): a container file's bytes are read into one buffer of `chunk` bytes
  // that every chunk reuses, so the file's pages are never mapped; bytes in memory are handed
  // out in place. The checksum is computed as the chunks pass and checked before the last one
  // is handed out (Corrupt on a mismatch, as stream_bytes(); for a 1.1 record, the record's check:
  // the other streams are hashed when the chunks are made). After a decoder's error, finish()
  // reads the rest and reports a checksum mismatch in its place. Valid while this reader lives.
  class StreamChunks {
   public:
    StreamChunks(StreamChunks&&) noexcept;
    ~StreamChunks();
    uint64_t size() const noexcept;
    // The next chunk: at most `chunk` bytes, the first at least min(size, 64); empty at the end.
    std::span<const uint8_t> next();
    // Reads what is left (if any) and checks the checksum.
    void finish();

   private:
    friend class ContainerReader;
    struct Impl;
    explicit StreamChunks(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
  };
  StreamChunks stream_chunks(const RecordMeta& meta, size_t k, size_t chunk = size_t{1} << 20) const;
  // The one stream of a raw or pass-through record, checked against its checksum, as a view of
  // the container's bytes (no copy; the view keeps the file open) when they sit at an address
  // aligned for the dtype, else an aligned copy. Internal error for other records.
  Buffer raw_view(const RecordMeta& meta) const;
  // Variant pipelines (canonical JSON); index 0 is the header's pipeline.
  const std::vector<std::string>& variants() const noexcept { return variants_; }
  uint64_t file_size() const noexcept { return file_->size(); }
  const std::string& path() const noexcept { return file_->path(); }

 private:
  [[noreturn]] void corrupt(const std::string& section, uint64_t offset, const std::string& why) const;
  void read_footer_v10(uint64_t footer_offset, uint64_t body_start);
  std::shared_ptr<const InputFile> file_;
  ContainerHeader header_;
  std::vector<FrameInfo> frames_;
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> records_;  // per frame: (offset, size)
  std::vector<std::string> variants_;
  uint16_t minor_ = 0;
  std::shared_ptr<const gcz::Index> index_;  // 1.1: every record's metadata, from the footer
  // 1.1: the streams' checksums of `m`, computed from the bytes, checked against m.check.
  void check_record(const RecordMeta& m) const;
};

}  // namespace gradcodec
