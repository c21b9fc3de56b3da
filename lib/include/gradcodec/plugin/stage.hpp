// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — the stage interface, one small interface per stage kind (docs/architecture.md, docs/grammar.md).
//
// A pipeline is   transform* [sparsifier | lowrank] [quantizer] [index coder] lossless*
// Encoding runs the stages left to right over a Payload; decoding runs them right to left:
//   lossless⁻¹ → index decode → quantizer decode → sparsifier/lowrank decode → transforms⁻¹.
// A stage's output is a set of named streams (`index`, `value`, `scale`, `side`, ...).
// Stateful stages keep per-tensor state in the StageState slot the codec hands them; the decoder
// rebuilds the same state from what it decodes (the encoder runs a mirror decoder for that).
//
// Part of the interface for stage authors (include/gradcodec/plugin/, docs/api.md "Writing a
// stage"): not yet stable, it changes with the engine.
#pragma once

#include <gradcodec/bytes.hpp>
#include <gradcodec/plugin/byte_out.hpp>
#include <gradcodec/rng.hpp>
#include <gradcodec/tensor.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace gradcodec {

enum class StageKind : uint8_t { Transform, Sparsifier, LowRank, Quantizer, IndexCoder, Lossless };

class Workers;  // helper threads of an encoder or decoder (make_workers in codec.hpp)
const char* stage_kind_name(StageKind k) noexcept;

// Stream names used across stages; the bench breakdown groups bits by them.
inline constexpr const char* kIndexStream = "index";
inline constexpr const char* kValueStream = "value";
inline constexpr const char* kScaleStream = "scale";
inline constexpr const char* kSideStream = "side";

struct Stream {
  std::string name;
  std::vector<uint8_t> bytes;
  uint8_t width = 1;  // element width in bytes (a hint for `shuffle`); 1 for bit streams
  // A stream may be lent, not copied: `lent` points at bytes it does not own and `bytes` stays
  // empty. On the encode side a quantizer lends the tensor's own bytes (`raw` on a dense exact
  // tensor; valid while the tensor lives), and the codec hands every stream on owning its bytes
  // (the lossless stages' output, or own()). On the decode side a stream no lossless stage has to
  // undo lends the container's bytes (valid while its ContainerReader lives). Stages read a
  // stream through view().
  bool is_lent = false;
  std::span<const uint8_t> lent;
  std::span<const uint8_t> view() const noexcept { return is_lent ? lent : std::span<const uint8_t>(bytes); }
  void lend(std::span<const uint8_t> b) noexcept {
    bytes.clear();
    lent = b;
    is_lent = true;
  }
  // Makes a lent stream own a copy of its bytes (nothing for one that owns them).
  void own();
};

// The streams of one tensor record, in the order stages produced them.
class Streams {
 public:
  Stream& add(std::string name, uint8_t width = 1);  // throws Internal on a duplicate name
  Stream* find(const std::string& name) noexcept;
  const Stream* find(const std::string& name) const noexcept;
  // The stream's bytes; throws Corrupt naming the stream when it is missing.
  std::span<const uint8_t> get(const std::string& name) const;
  std::vector<Stream>& all() noexcept { return list_; }
  const std::vector<Stream>& all() const noexcept { return list_; }
  uint64_t total_bytes() const noexcept;

 private:
  std::vector<Stream> list_;
};

// What flows between the stages of one tensor.
//
// `values` holds the working values in f32: all n elements while dense, the kept ones once
// sparse (index.size()·block of them, block-major), or the factors of a low-rank stage.
// While `exact` is true the values are, bit for bit, elements of `source` (at `index` when
// sparse), so the `raw` value codec can store the source's own bytes (f16/bf16/f64 kept exact).
// `values` may be left empty while exact and dense: call dense_f32() to materialise it.
struct Payload {
  const Tensor* source = nullptr;  // the input tensor (encode); null on decode
  const TensorInfo* info = nullptr;
  uint64_t n = 0;  // elements of the tensor

  std::vector<float> values;
  bool exact = true;

  // Encode side: NaN/Inf among an f32 source's elements, counted by the stage that screens_nonfinite()
  // (a Reducer, or the Quantizer of a pipeline without one); when non-zero the pipeline stops
  // and the codec applies --nonfinite.
  uint64_t nonfinite = 0;
  // Encode side: set by a stage whose output would hold ±Inf/NaN although its input is finite —
  // a value or a scale beyond what the stage can represent (float16's range, a norm beyond
  // float32's). Says why, beginning with the stage's name; the pipeline stops there and the
  // codec applies --nonfinite, as for NaN/Inf in the input.
  std::string overflow;

  bool sparse = false;
  uint64_t universe = 0;          // positions are in [0, universe): elements, or blocks
  uint32_t block = 1;             // elements per position (block sparsifiers)
  std::vector<uint64_t> index;    // ascending unless value_order
  bool value_order = false;       // index follows value order (curvefit) — not sorted
  bool index_implicit = false;    // the decoder regenerates the index (randk shared seed)

  bool lowrank = false;           // values are factors; no index
  // Set by a control stage (accordion): which of its Reducer::alternatives() encoded this
  // record; the codec then records the record under that pipeline variant. -1: none.
  int alternative = -1;

  // Decode side: values stored exactly in this dtype (raw codec), scattered as bytes.
  std::vector<uint8_t> exact_bytes;
  DType exact_dtype = DType::F32;

  // Materialises `values` (all n elements, f32) from `source` when empty; returns it.
  std::vector<float>& dense_f32();
  // The n dense values in f32 for reading: a view of `source`'s own bytes when nothing has
  // written `values` yet and the source is 4-byte-aligned f32 (no copy: a memory-mapped input
  // is read in place), else dense_f32(). Valid until `values` or `source` changes.
  std::span<const float> f32_view();
  // Number of values a quantizer codes: n when dense, index.size()·block when sparse.
  uint64_t value_count() const noexcept {
    return sparse ? static_cast<uint64_t>(index.size()) * block : (lowrank ? values.size() : n);
  }
};

// A figure a stage reports about the records it wrote (bloom's policy errors rate, curvefit's
// RMSE), read back from its own streams so that `bench` and `inspect` show the same numbers.
// Aggregated over tensors and frames as Σnum / Σden (or its square root when `root`).
struct StageStat {
  std::string name;     // "<stage>.<figure>", e.g. "bloom.policy_errors_rate"
  double num = 0, den = 0;
  bool root = false;    // value = sqrt(num/den) (an RMS figure) instead of num/den
  std::string formula;  // how the figure is defined, printed under reports
  double value() const noexcept;  // 0 when den == 0
};
using StageStats = std::vector<StageStat>;
// Adds `add` into `into`, summing num and den of figures with the same name.
void merge_stats(StageStats& into, const StageStats& add);

// Opaque per-tensor, per-stage state kept across the frames of a sequence.
struct StageState {
  virtual ~StageState() = default;
};

// Everything a stage may know about the tensor it works on.
struct StageContext {
  uint64_t seed = 0;
  uint32_t frame = 0;
  uint32_t tensor = 0;  // index of the tensor in its snapshot
  bool keyframe = true; // no earlier frame may be used
  const TensorInfo* info = nullptr;
  // Encoder-private state of this stage for this tensor (ef's memory); null when decoding.
  std::unique_ptr<StageState>* state = nullptr;
  // State both sides keep identically (delta's previous frame, PowerSGD's Q): read it when
  // encoding, update it only when decoding — the encoder's mirror decoder updates its copy.
  std::unique_ptr<StageState>* shared = nullptr;
  uint32_t stage_pos = 0;  // position of the stage in its pipeline
  // This stage's snapshot-wide plan for the current frame (Reducer::plan_frame), or null.
  const StageState* frame_plan = nullptr;
  // Threads a Reducer::plan_frame may use (the encoder's --threads); its result must not depend
  // on this number. The threads besides the calling one are helpers of `workers` (the encoder's;
  // null: the calling thread only).
  unsigned threads = 1;
  Workers* workers = nullptr;

  // A generator unique to (seed, frame, tensor, purpose, stage position).
  Rng rng(RngPurpose p) const noexcept {
    return Rng(seed ^ (static_cast<uint64_t>(stage_pos) << 56), frame, tensor, p);
  }
  template <class S>
  S& state_as() const { return slot_as<S>(state); }
  template <class S>
  S& shared_as() const { return slot_as<S>(shared); }
  template <class S>
  static S& slot_as(std::unique_ptr<StageState>* slot) {
    if (!slot) throw Error(ErrorCode::Internal, "stage asked for state it has no slot for");
    if (!*slot) *slot = std::make_unique<S>();
    return static_cast<S&>(**slot);
  }
};

class Stage {
 public:
  virtual ~Stage() = default;
  virtual StageKind kind() const noexcept = 0;
  // True when the stage keeps state across frames (the codec then mirrors decoding).
  virtual bool stateful() const noexcept { return false; }
  // True when the stage draws random numbers (bench reports bias over seeds for such pipelines).
  virtual bool stochastic() const noexcept { return false; }
  // Figures the stage stored in its own streams (`in`: the record's streams before lossless
  // coding), appended to `out`; throws Corrupt on a malformed stream. Default: none.
  virtual bool has_stats() const noexcept { return false; }
  virtual void stream_stats(const Streams& in, StageStats& out) const { (void)in, (void)out; }
  // Encode side: an upper bound on the working memory the stage holds for one tensor `t` — its
  // outputs, its scratch buffers and its state of the tensor — in bytes per element of `t`, when
  // the pipeline's reducer passes on the fraction `kept` of the values (1 when dense). The
  // pipeline adds them up (PipelineStages::work_bytes) and `encode --memory-limit` refuses a
  // tensor whose sum exceeds the limit before loading it. Default: by kind (stage.cpp).
  virtual double work_per_element(const TensorInfo& t, double kept) const noexcept;
};

// dense → dense, before selection; may be stateful (ef, delta).
class Transform : public Stage {
 public:
  StageKind kind() const noexcept override { return StageKind::Transform; }
  // Modifies p.values (dense) in place before the rest of the pipeline runs.
  virtual void encode(Payload& p, const StageContext& ctx) = 0;
  // Called after the record was made, with the dense f32 values the rest of the pipeline
  // reconstructs from it (what the decoder gets before this transform's inverse); lets the
  // encoder update its memory (ef: m ← g − decoded).
  virtual void after_encode(std::span<const float> input, std::span<const float> reconstructed,
                            const StageContext& ctx) {
    (void)input, (void)reconstructed, (void)ctx;
  }
  // Inverse on the decode side (delta adds the previous frame); runs on both the decoder and the
  // encoder's mirror decoder. `dense` holds the tensor's n values.
  virtual void decode(std::vector<float>& dense, const StageContext& ctx) { (void)dense, (void)ctx; }
  // Decode side, when the record was stored raw: `output` is the tensor as decoded.
  virtual void on_raw(std::span<const float> output, const StageContext& ctx) { (void)output, (void)ctx; }
};

// The tensors of one frame, for snapshot-wide pre-passes. load() reads a tensor again (cheap for
// memory-mapped inputs); the pre-pass must not keep more than it needs.
struct FrameView {
  size_t count = 0;
  std::function<TensorInfo(size_t)> info;
  std::function<Tensor(size_t)> load;
  // The planning stage's own state slots of tensor i from the earlier frames (encoder side), or
  // null: its encoder-private state and its shared state (as the mirror decoder left it; stale
  // on a keyframe, where it is about to be cleared). Empty functions when the codec has none.
  std::function<const StageState*(size_t)> state;
  std::function<const StageState*(size_t)> shared;
};

// dense → kept positions + values (sparsifier), or dense → factors (lowrank). Side streams
// (scales, attached entries) go into `out`.
class Reducer : public Stage {
 public:
  // Snapshot-wide decisions made once per frame before the per-tensor work (a global top-k
  // threshold, BIRD's attach rule); the result reaches encode() as ctx.frame_plan. `ctx` has the
  // frame's seed/frame/stage position (tensor = 0). Default: no plan.
  virtual std::shared_ptr<const StageState> plan_frame(const FrameView& frame, const StageContext& ctx) const {
    (void)frame, (void)ctx;
    return nullptr;
  }
  // True when plan_frame() may return a plan, i.e. a tensor's record may depend on the other
  // tensors of its frame (a stage that overrides plan_frame must say so). The facade's
  // Compressor, which sees one tensor at a time, makes each tensor a frame of its own then.
  virtual bool plans_frame() const noexcept { return false; }
  virtual void encode(Payload& p, Streams& out, const StageContext& ctx) = 0;
  // True when encode() reads the dense input only through Payload::f32_view() (and writes
  // `values` only once it is sparse): the codec then skips materialising an f32 copy.
  virtual bool reads_f32_view() const noexcept { return false; }
  // True when encode(), given an f32 source, sets p.nonfinite to its number of NaN/Inf elements
  // (and may stop there, the output then being discarded). The codec, which refuses or stores raw
  // a lossy pipeline's non-finite tensor, then skips its own count: one pass over the data fewer.
  virtual bool screens_nonfinite() const noexcept { return false; }
  // Before the index is decoded: fill p.index when it is implicit (randk), and set universe/block.
  virtual void prepare_decode(Payload& p, const Streams& in, const StageContext& ctx) = 0;
  // After index and values are decoded: produce the dense f32 values in p.values (n elements),
  // or leave p.exact_bytes scattered (the default scatter handles both).
  virtual void decode(Payload& p, const Streams& in, const StageContext& ctx) = 0;
  // Upper bound on the fraction of t's elements whose values reach the quantizer (kept positions
  // × block, or low-rank factors); 1 (the default) when it cannot be known before encoding.
  virtual double kept_fraction(const TensorInfo& t) const noexcept {
    (void)t;
    return 1;
  }
  // Elements per kept position (block sparsifiers): the index coder codes kept_fraction / this
  // many positions per element. Default 1.
  virtual uint64_t kept_block(const TensorInfo& t) const noexcept {
    (void)t;
    return 1;
  }
  // Whether an index coder must follow (false for implicit indices and low-rank factors).
  virtual bool needs_index_coder() const noexcept { return true; }
  // Whether the kept values are the input's own elements (selection) rather than computed ones.
  virtual bool values_exact() const noexcept { return true; }
  // Encoder side, after the record is final: the dense f32 values the decoder reconstructs
  // before the transforms' inverses (the tensor itself when the record was stored raw); lets a
  // stage with its own error memory update it (tcs, powersgd: e ← input − decoded).
  virtual void after_encode(std::span<const float> reconstructed, const StageContext& ctx) {
    (void)reconstructed, (void)ctx;
  }
  // Both sides, when the record was stored raw: `output` is the tensor as decoded (f32).
  virtual void on_raw(std::span<const float> output, const StageContext& ctx) { (void)output, (void)ctx; }
  // Control stages (accordion): the pipelines of the reducers it may apply, one of which encodes
  // each record (Payload::alternative). Each is one reducer stage, written in place of this one
  // to form the record's pipeline variant, which is what decodes the record. Empty otherwise.
  virtual std::vector<std::string> alternatives() const { return {}; }
};

// Scatters a decoded sparse payload (p.values or p.exact_bytes at p.index, p.block elements per
// position) into a dense one of p.n elements, zeros elsewhere. Checks every position (Corrupt).
void scatter_to_dense(Payload& p);

// values → value streams (and scale/side streams). May drop positions (sbc).
class Quantizer : public Stage {
 public:
  StageKind kind() const noexcept override { return StageKind::Quantizer; }
  virtual void encode(Payload& p, Streams& out, const StageContext& ctx) = 0;
  // Decodes p.value_count() values into p.values (or p.exact_bytes for exact codecs).
  virtual void decode(Payload& p, const Streams& in, const StageContext& ctx) = 0;
  // decode() for a caller that is done with its own streams: a codec that stores the values
  // verbatim may move the stream's bytes out instead of copying them (`raw`). Same result.
  virtual void decode_owned(Payload& p, Streams& in, const StageContext& ctx) { decode(p, in, ctx); }
  // True when encode() reorders p.index into value order (curvefit): the pipeline then needs a
  // sparsifier with coded positions and an index coder that keeps_order().
  virtual bool reorders_index() const noexcept { return false; }
  // True when encode(), coding all n values of an f32 source (no reducer, no transform before
  // it), sets p.nonfinite to their number of NaN/Inf (its output is then discarded): as for
  // Reducer::screens_nonfinite(), the codec then skips its own pass over the data.
  virtual bool screens_nonfinite() const noexcept { return false; }
};

// positions → the `index` stream.
class IndexCoder : public Stage {
 public:
  StageKind kind() const noexcept override { return StageKind::IndexCoder; }
  // Codes p.index (positions in [0, p.universe)); must store its own count.
  virtual void encode(const Payload& p, Streams& out, const StageContext& ctx) = 0;
  // Fills p.index from the stream; p.universe is set.
  virtual void decode(Payload& p, const Streams& in, const StageContext& ctx) = 0;
  // Whether the coder keeps an unsorted (value-order) index as given.
  virtual bool keeps_order() const noexcept { return false; }
  // When true, select() runs after the sparsifier and before the quantizer, and may change the
  // selection: bloom's false-positive-aware mode replaces p.index by the positions its decoder
  // will pick and p.values by the values there. `dense` holds the n values the sparsifier
  // selected from (after transforms). Default: no such step.
  virtual bool selects() const noexcept { return false; }
  virtual void select(Payload& p, std::span<const float> dense, const StageContext& ctx) {
    (void)p, (void)dense, (void)ctx;
  }
};

// bytes → bytes on one or all streams, streaming both ways: a stage makes an encoder and a
// decoder, each a ByteOut that takes its input front to back and writes its output into the next
// ByteOut (the next stage, or the stream). The pipeline chains any number of them
// (encode_chain, decode_chain). A stage may hold what it needs (a whole run, a whole stream)
// before it writes; it must let its decoder bound its output: `max_out` is the largest size the
// stage may produce (decompression-bomb guard), refused as Corrupt before it is written.
class Lossless : public Stage {
 public:
  StageKind kind() const noexcept override { return StageKind::Lossless; }
  // The input of an encode: exactly `size` bytes written into it (its begin() is not called),
  // then end(); it calls out.begin() before its first byte and out.end() after its last.
  // `width` is the stream's element width (a hint).
  virtual std::unique_ptr<ByteOut> encoder(ByteOut& out, uint64_t size, uint8_t width) const = 0;
  // The input of a decode: the `size` stored bytes written into it, then end(); it writes the
  // decoded bytes into `out` as encoder() does, and calls out.begin() with their exact number.
  virtual std::unique_ptr<ByteOut> decoder(ByteOut& out, uint64_t size, uint64_t max_out) const = 0;

  // The stage over bytes held whole (one-stage chains).
  std::vector<uint8_t> encode(std::span<const uint8_t> in, uint8_t width) const;
  std::vector<uint8_t> decode(std::span<const uint8_t> in, uint64_t max_out) const;

  // Stages run in order over `in`, each one's output read by the next as it is written, the
  // last one's appended to `out`. A stage whose output size is known only once it has ended
  // (begin(size, exact=false)) has it held whole before the next stage starts.
  static void encode_chain(std::span<const Lossless* const> stages, std::span<const uint8_t> in, uint8_t width,
                           std::vector<uint8_t>& out);
  // Undoes them, the last stage first: `feed` writes the `size` stored bytes (any chunking)
  // into the ByteOut it is given; the first stage's output is appended to `out`.
  static void decode_chain(std::span<const Lossless* const> stages, uint64_t size,
                           const std::function<void(ByteOut&)>& feed, uint64_t max_out, std::vector<uint8_t>& out);

  // "" = every stream; else only the named one.
  std::string only_stream;
};

}  // namespace gradcodec
// to_f32 and from_f32, the element conversions of a floating dtype, are in <gradcodec/tensor.hpp>.
