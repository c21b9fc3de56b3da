// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — running a pipeline over tensors, frames and sequences.
//
// SequenceEncoder turns snapshots (frames) into container records; SequenceDecoder turns records
// back into tensors. Stateful stages keep per-tensor state across frames; the encoder mirrors the
// decoder (it decodes each record it writes) so both sides hold the same state. Output bytes do
// not depend on the thread count.
#pragma once

#include <gradcodec/container.hpp>
#include <gradcodec/frame.hpp>
#include <gradcodec/pipeline.hpp>
#include <gradcodec/plugin/pipeline_stages.hpp>

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace gradcodec {

// The helper threads an encoder or a decoder works on besides the calling thread, joined when
// the last owner lets go of them. One object may be shared by several encoders and decoders
// (EncodeOptions::workers, DecodeOptions::workers), also used at once from several threads; an
// encoder or decoder given none makes its own. It stays usable in a child made by fork(), where
// it starts helpers of its own.
std::shared_ptr<Workers> make_workers();

struct EncodeOptions {
  bool time_stages = false;        // fill TensorOutcome::times (bench)
  NonFinite nonfinite = NonFinite::Refuse;
  // What the refusal under NonFinite::Refuse advises (merge, which stores nothing raw, says its own).
  std::string nonfinite_advice = kNonfiniteRawAdvice;
  uint64_t seed = 0;
  uint32_t keyframe_interval = 0;  // 0: only frame 0 is a keyframe
  unsigned threads = 1;
  // Largest working memory one tensor may take to encode (PipelineStages::work_bytes: its bytes
  // and what the pipeline's stages hold for it), as DecodeOptions::memory_limit: a tensor over it
  // is refused (Error Input naming it) before it is loaded, so a small input (a compressed NPZ
  // member, a sparse file) cannot demand a huge allocation.
  uint64_t memory_limit = uint64_t{8} << 30;
  // Called once per tensor, after its record is written, in record order and never two calls at
  // once (though perhaps on a worker thread): the CLI's progress bar. Must not throw.
  std::function<void(const TensorInfo&)> progress;
  // The helper threads to use (make_workers); null: the encoder makes its own.
  std::shared_ptr<Workers> workers;
  // Which tensors, by name, this encoder encodes (null: all): one process's share of a
  // container that several write together (ContainerPart). The others are neither loaded nor
  // encoded, but are checked as every tensor is (names, sizes, the same tensors in every frame)
  // and take part in a frame plan (PipelineStages::plan_frame), which may load them; a stateful
  // pipeline that plans over the frame (tcs) encodes them all, to keep every tensor's state for
  // the next frame's plan, and hands on the owned records only.
  std::function<bool(const std::string&)> owns;
};

// What happened to one tensor of one frame.
struct TensorOutcome {
  TensorInfo info;
  Storage storage = Storage::Pipeline;
  uint64_t input_bytes = 0;   // the tensor's bytes as stored
  uint64_t record_bytes = 0;  // the whole record in the container
  std::vector<std::pair<std::string, uint64_t>> streams;  // final stream sizes
  uint64_t kept = 0;          // values coded (all of them for raw records; 0 for pass-through)
  StageTimes times;           // when EncodeOptions::time_stages
  StageStats stats;           // the stages' figures for this record (empty for raw records)
};

// Refuses what a container cannot record (Error Input naming `source` and the tensor): a name or
// a dtype description over kMaxStr16 bytes, more than kMaxDims dimensions.
void check_storable(const TensorInfo& info, const std::string& source);

// One tensor's record, as SequenceEncoder::encode_frame makes it.
struct EncodedRecord {
  Storage storage = Storage::Pipeline;
  Streams streams;    // as the container stores them (lossless stages applied)
  int variant = -1;   // the PipelineStages::variant() that made it, or -1: the pipeline itself
  uint64_t kept = 0;  // TensorOutcome::kept
  StageTimes times;   // when `timed`
  StageStats stats;
};
// The engine's step for one tensor, which encode_frame runs for each tensor of a frame (and the
// facade's Compressor for one tensor at a time): tensor `t` encoded with `ctx` (seed, frame, the
// tensor's index in its frame, keyframe, the frame's plan) and `st`, its state from the frames
// before (its decoder side cleared here on a keyframe). A non-floating tensor becomes a
// pass-through record. A lossy pipeline's tensor with NaN/Inf or values beyond float32's range,
// or one a stage cannot represent (Payload::overflow), is refused (Error Input naming `source`
// and the tensor, ending with `advice`) or stored raw, as `nonfinite` says; so is, raw, one whose streams would not be
// smaller than its bytes. `decoded`, when given, receives what a decoder of the record returns
// (for a stateful pipeline, what the encoder's mirror decoder makes anyway). A tensor refused
// for its NaN/Inf or its values beyond float32 by a pipeline that does not screens_nonfinite()
// (every stateful one) is refused before `st` is touched (but for the keyframe's clearing of
// its decoder side); another exception may leave `st` part-way updated.
EncodedRecord encode_record(const PipelineStages& stages, const Tensor& t, const StageContext& ctx,
                            PipelineStages::TensorState& st, NonFinite nonfinite, bool timed,
                            const std::string& source, Tensor* decoded = nullptr,
                            const std::string& advice = kNonfiniteRawAdvice);

class SequenceEncoder {
 public:
  SequenceEncoder(const Pipeline& pipeline, const EncodeOptions& options);
  ~SequenceEncoder();
  ContainerHeader header(const std::string& inputs_json) const;
  // Encodes one frame into `writer` (records in source order). Non-floating tensors are stored
  // as pass-through records. Returns one outcome per tensor.
  std::vector<TensorOutcome> encode_frame(const FrameSource& frame, RecordSink& writer);
  uint32_t frames_done() const noexcept { return frame_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint32_t frame_ = 0;
};

struct DecodeOptions {
  // Largest working memory one tensor may need to decode (its f32 values or its bytes, whichever
  // is larger), like zstd's --memory: a record over it is refused (Error Input) before anything
  // is allocated, so a small file cannot demand a huge allocation.
  uint64_t memory_limit = uint64_t{8} << 30;
  // Threads SequenceDecoder::decode_frame decodes tensors on. The tensors reach the sink in
  // order, the same for any thread count, and the error reported for a damaged container is the
  // first one in record order. Decoded tensors waiting for the sink hold at most
  // (threads + ½) × the largest tensor's decoding memory.
  unsigned threads = 1;
  // The helper threads to use (make_workers); null: the decoder makes its own.
  std::shared_ptr<Workers> workers;
};

class SequenceDecoder {
 public:
  explicit SequenceDecoder(const ContainerReader& reader, DecodeOptions options = {});
  ~SequenceDecoder();
  // Decodes tensor `i` of frame `f`. For stateful pipelines, decodes that tensor's records from
  // the last keyframe up to f first (reported through frames_read()).
  Tensor decode(size_t f, size_t i);
  // Decodes every tensor of frame f, calling `sink` for each in order (on the calling thread;
  // DecodeOptions::threads of them are decoded at once).
  void decode_frame(size_t f, const std::function<void(Tensor&&)>& sink);
  // The same for the tensors `which` of frame f (indices in increasing order, each below the
  // frame's record count), in that order; each is what decode(f, i) returns.
  void decode_frame(size_t f, std::span<const size_t> which, const std::function<void(Tensor&&)>& sink);
  // Frames read by the last decode() call (for --verbose).
  size_t frames_read() const noexcept;
  // Values sent for the record the last decode() call returned, counted as the encoder counts
  // them (TensorOutcome::kept): inspect's compression-ratio breakdown.
  uint64_t kept() const noexcept;
  bool stateful() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The tool's version string ("gradcodec 0.1.0").
const char* tool_version() noexcept;

}  // namespace gradcodec
