// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — one tensor through a pipeline's stages: PipelineStages and its per-tensor state.
//
// Part of the interface for stage authors (include/gradcodec/plugin/, docs/api.md "Writing a
// stage"): not yet stable, it changes with the engine. Programs that encode and decode use
// <gradcodec/gradcodec.hpp>.
#pragma once

#include <gradcodec/container.hpp>
#include <gradcodec/pipeline.hpp>
#include <gradcodec/plugin/stage.hpp>

#include <functional>
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
  // True when the reducer makes a snapshot-wide plan (Reducer::plans_frame): a tensor's record
  // may depend on the other tensors of its frame.
  bool plans_frame() const noexcept;

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
  // How many variants there are (the control stage's alternatives; 0 without one).
  size_t variant_count() const noexcept { return variants_.size(); }
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
  // Runs the lossless stages that apply to stream `s` over `in` (its view()) into s.bytes, which
  // it then owns. False (s untouched) when no lossless stage applies.
  bool encode_lossless(Stream& s, std::span<const uint8_t> in) const;
  // The lossless stages that apply to the named stream, in pipeline order.
  std::vector<const Lossless*> lossless_for(const std::string& stream) const;
  // Undoes the lossless stages that apply to stream `s` (last stage first) into s.bytes, from its
  // `size` stored bytes, which `feed` writes; false (s untouched) when no lossless stage applies.
  bool undo_lossless(Stream& s, const std::function<void(ByteOut&)>& feed, uint64_t size, uint64_t n) const;
  // The same for every stream held in memory (decode/stats with lossless_applied).
  void undo_lossless(Streams& streams, uint64_t n) const;
  Pipeline pipeline_;
  std::vector<std::unique_ptr<Stage>> stages_;
  std::vector<size_t> transforms_;  // positions
  int reducer_ = -1, quantizer_ = -1, indexer_ = -1;
  std::vector<size_t> lossless_;
  bool stateful_ = false, stochastic_ = false, exact_values_ = true, has_stats_ = false, bit_exact_ = false;
  bool screens_nonfinite_ = false;
  std::vector<std::unique_ptr<PipelineStages>> variants_;  // a control reducer's alternatives
};

}  // namespace gradcodec
