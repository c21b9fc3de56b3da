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

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace gradcodec {

// Time spent per stage kind (nanoseconds), indexed by StageKind; filled when requested.
struct StageTimes {
  double ns[6] = {0, 0, 0, 0, 0, 0};
  void add(StageKind k, double v) noexcept { ns[static_cast<int>(k)] += v; }
  double of(StageKind k) const noexcept { return ns[static_cast<int>(k)]; }
  StageTimes& operator+=(const StageTimes& o) noexcept {
    for (int i = 0; i < 6; ++i) ns[i] += o.ns[i];
    return *this;
  }
};

// A pipeline's stages, instantiated and sorted by kind.
class PipelineStages {
 public:
  explicit PipelineStages(const Pipeline& p);
  ~PipelineStages();
  PipelineStages(PipelineStages&&) noexcept;
  const Pipeline& pipeline() const noexcept { return pipeline_; }
  bool stateful() const noexcept { return stateful_; }
  bool stochastic() const noexcept { return stochastic_; }
  // True when the value codec sees the source's own elements (no transform, selecting reducer).
  bool exact_values() const noexcept { return exact_values_; }
  // True when decoding gives the input bit for bit: no transform, no reducer, the `raw` value codec.
  bool lossless() const noexcept { return bit_exact_; }
  // True when encode() counts an f32 tensor's NaN/Inf itself (Encoded::nonfinite) while reading it:
  // the reducer screens_nonfinite() and sees the input first (no transform, no state).
  bool screens_nonfinite() const noexcept { return screens_nonfinite_; }
  size_t size() const noexcept { return stages_.size(); }

  struct Encoded {
    Streams streams;          // final streams (after lossless stages)
    Streams plain;            // streams before the lossless stages (for the mirror decoder)
    uint64_t kept = 0;        // values the value codec coded (n when dense, kept positions × block)
    StageTimes times;         // filled when encode() is asked to time the stages
    StageStats stats;         // the stages' figures (Stage::stream_stats), when any stage has some
    int variant = -1;         // the control stage's alternative that made it (see variant()), or -1
    uint64_t nonfinite = 0;   // screens_nonfinite(): the f32 source's NaN/Inf count; non-zero = no output
    std::string overflow;     // a stage's Payload::overflow; non-empty = no output
  };
  // Per-tensor state: one slot per stage, encoder side and decoder side.
  struct TensorState {
    std::vector<std::unique_ptr<StageState>> enc;
    std::vector<std::unique_ptr<StageState>> dec;
    std::vector<std::vector<float>> transform_inputs;  // per transform, its output at encode
  };

  // Encodes one tensor through every stage. `ctx` carries seed/frame/tensor; `st` the state.
  Encoded encode(const Tensor& t, const StageContext& ctx, TensorState& st, bool timed = false) const;
  // Runs the reducer's snapshot-wide pre-pass for a frame (null when it has none). `states`, when
  // given, returns the state of tensor i of the frame from the earlier frames (or null); the
  // reducer then sees its own slots of it (FrameView::state, ::shared).
  std::shared_ptr<const StageState> plan_frame(const FrameView& frame, const StageContext& ctx,
                                               const std::function<const TensorState*(size_t)>& states = {}) const;
  // The pipeline variant of a control stage's alternative k (Encoded::variant): this pipeline
  // with the control stage replaced in place by the alternative's reducer. Decodes its records.
  const PipelineStages& variant(int k) const;
  // Decodes streams (after lossless decoding when `lossless_applied`) to the tensor's dtype.
  // `before_transforms` (optional) receives the f32 values the reducer produced, before the
  // transforms' inverses; `kept` (optional) the number of values the value codec decoded
  // (Encoded::kept of the encoder: n when dense, kept positions × block, factor entries).
  Tensor decode(const TensorInfo& info, Streams streams, bool lossless_applied, const StageContext& ctx,
                TensorState& st, std::vector<float>* before_transforms = nullptr, uint64_t* kept = nullptr) const;
  // A record's streams read from the container with the lossless stages undone (for decode()
  // with lossless_applied = false): each stream checked against its checksum, and the first
  // lossless stage to undo reads the container's bytes in place (no copy of the record) or, when
  // it reads chunks (zstd), chunk by chunk as it decodes (ContainerReader::stream_chunks).
  Streams read_streams(const ContainerReader& reader, const RecordMeta& meta) const;
  // Upper bound on the memory encoding tensor `t` takes (for a floating tensor: its bytes plus
  // every stage's Stage::work_per_element, the lossless stages' output counted once at the size of
  // the streams they code; at least twice its bytes, for the raw record a tensor may fall back
  // to; for another dtype: its bytes and its pass-through record). EncodeOptions::memory_limit.
  uint64_t work_bytes(const TensorInfo& t) const noexcept;
  // The same per element of an f32 tensor of this shape (for `list presets` and the docs' table).
  double work_per_element(const TensorInfo& t) const noexcept;
  // True when a stage reports figures from its streams (Stage::has_stats).
  bool has_stats() const noexcept { return has_stats_; }
  // The stages' figures for one record (inspect): undoes the lossless stages when
  // `lossless_applied`, then asks every stage (Stage::stream_stats). Empty when no stage has any.
  StageStats stats(const TensorInfo& info, Streams streams, bool lossless_applied) const;
  // Records that a tensor was stored raw (decoded = the tensor) so stateful stages stay in step.
  void observe_raw(const Tensor& decoded, const StageContext& ctx, TensorState& st, bool encoder_side) const;
  // Runs the encoder-side bookkeeping after a record is final (ef memory update).
  void after_encode(const std::vector<float>& reconstructed_before_transforms, const StageContext& ctx,
                    TensorState& st) const;

 private:
  StageContext stage_ctx(const StageContext& base, size_t pos, std::vector<std::unique_ptr<StageState>>& slots) const;
  // Runs the lossless stages that apply to stream `s` over `in` (s.bytes, or the tensor's bytes
  // that the quantizer lent) into s.bytes; a stage that hands its output out in pieces to a next
  // stage that reads pieces runs with it. False (s untouched) when no lossless stage applies.
  bool encode_lossless(Stream& s, std::span<const uint8_t> in) const;
  // The lossless stages that apply to the named stream, in pipeline order.
  std::vector<const Lossless*> lossless_for(const std::string& stream) const;
  // Undoes the lossless stages that apply to stream `s` (last stage first) into s.bytes, reading
  // its stored bytes `in` where they are (the stages before the last decode into scratch memory
  // that is not zero-filled first); false (s untouched) when no lossless stage applies.
  bool undo_lossless(Stream& s, std::span<const uint8_t> in, uint64_t n) const;
  // The same for every stream held in memory (decode/stats with lossless_applied).
  void undo_lossless(Streams& streams, uint64_t n) const;
  // Whether the named stream's lossless stages can be undone from its stored bytes read chunk
  // by chunk: the last stage reads chunks (zstd), and the one before it, if any, reads pieces.
  bool undoes_chunks(const std::string& stream) const;
  Pipeline pipeline_;
  std::vector<std::unique_ptr<Stage>> stages_;
  std::vector<size_t> transforms_;  // positions
  int reducer_ = -1, quantizer_ = -1, indexer_ = -1;
  std::vector<size_t> lossless_;
  bool stateful_ = false, stochastic_ = false, exact_values_ = true, has_stats_ = false, bit_exact_ = false;
  bool screens_nonfinite_ = false;
  std::vector<std::unique_ptr<PipelineStages>> variants_;  // a control reducer's alternatives
};

// The helper threads an encoder or a decoder works on besides the calling thread, joined when
// the last owner lets go of them. One object may be shared by several encoders and decoders
// (EncodeOptions::workers, DecodeOptions::workers), also used at once from several threads; an
// encoder or decoder given none makes its own. It stays usable in a child made by fork(), where
// it starts helpers of its own.
std::shared_ptr<Workers> make_workers();

struct EncodeOptions {
  bool time_stages = false;        // fill TensorOutcome::times (bench)
  NonFinite nonfinite = NonFinite::Refuse;
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

class SequenceEncoder {
 public:
  SequenceEncoder(const Pipeline& pipeline, const EncodeOptions& options);
  ~SequenceEncoder();
  ContainerHeader header(const std::string& inputs_json) const;
  // Encodes one frame into `writer` (records in source order). Non-floating tensors are stored
  // as pass-through records. Returns one outcome per tensor.
  std::vector<TensorOutcome> encode_frame(const FrameSource& frame, ContainerWriter& writer);
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
