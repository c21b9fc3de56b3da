// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — the library's public API (docs/api.md).
//
// Encoder writes tensors into a .gcz container (docs/format.md) through a pipeline
// (docs/grammar.md, docs/stages.md); Decoder reads them back. Both own their worker threads. For
// the same tensors (names, order, dtypes, bytes), pipeline, seed and description of the inputs,
// an Encoder writes the same bytes as `gradcodec encode`, for any thread count. Compressor runs a
// pipeline over tensors one at a time, without files, and returns what a decoder would get.
//
// Errors are thrown as gradcodec::Error (<gradcodec/error.hpp>), whose code() is the CLI's exit
// code: Usage (a bad pipeline, an option out of range), Input (a tensor refused, a failed
// write), Corrupt (a damaged container). The library never prints and never exits.
//
// The headers included below are part of the API too (docs/api.md): the small types (tensor,
// error, frame, byte_sink), the stage and preset catalogue, the collective's per-step
// aggregation, bench --workers' comparison of the merge methods, and the utilities a program
// built on the library needs around it: files written atomically and the temporaries a signal
// handler removes (file_io), inputs that shrink while mapped (input_changes), messages made safe
// to print (one_line), bounds-checked byte framing (bytes) and half-precision conversions (half).
#pragma once

#include <gradcodec/byte_sink.hpp>
#include <gradcodec/bytes.hpp>
#include <gradcodec/catalogue.hpp>
#include <gradcodec/collective.hpp>
#include <gradcodec/error.hpp>
#include <gradcodec/file_io.hpp>
#include <gradcodec/frame.hpp>
#include <gradcodec/half.hpp>
#include <gradcodec/input_changes.hpp>
#include <gradcodec/one_line.hpp>
#include <gradcodec/tensor.hpp>
#include <gradcodec/workers_bench.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace gradcodec {

// "gradcodec 0.1.0": the tool string every container's header records.
const char* version() noexcept;

struct EncoderOptions {
  // The pipeline: a preset name (`gradcodec list presets`) or a pipeline text, not both; neither
  // is the preset "lossless". A bad name or text is Error(Usage) when the Encoder is made.
  std::string preset;
  std::string pipeline;
  uint64_t seed = 0;               // every random choice; recorded in the container
  unsigned threads = 1;            // worker threads (0: one per core); the bytes do not depend on it
  uint32_t keyframe_interval = 0;  // every K-th frame needs no earlier one (0: only the first)
  // The container format's minor version (docs/format.md): 1, compact framing, or 0, a 1.0
  // container as gradcodec before 1.1 reads it. Anything else is Error(Usage).
  unsigned format_minor = 1;
  NonFinite nonfinite = NonFinite::Refuse;
  // The words that end a refusal under NonFinite::Refuse, naming the raw policy as the caller's
  // own users spell it (the CLI: "--nonfinite=raw stores such tensors raw"; the Python module:
  // its keyword).
  std::string nonfinite_advice = kNonfiniteRawAdvice;
  // Largest working memory one tensor may take to encode; a tensor over it is refused
  // (Error Input naming it) before any of it is read.
  uint64_t memory_limit = uint64_t{8} << 30;
  // Called once per tensor after its record is written, in order, never two calls at once
  // (perhaps on a worker thread). Must not throw.
  std::function<void(const TensorInfo&)> progress;
  // Encoder::to_path: replace a file that exists (else Error(Usage), before anything is written).
  bool overwrite = false;
  // The header's description of the inputs: a JSON array with one object per frame
  // (docs/format.md, "inputs"); the CLI records {"path", "format"} and the input's metadata.
  // Empty: [].
  std::string inputs_json;
  // The header's "target" (docs/target.md): a JSON object recording the search that chose the
  // pipeline, TargetResult::json; empty: none.
  std::string target_json;
};

// The canonical text of the options' pipeline (Error Usage for a bad preset name or text, as
// the Encoder would throw): to check a pipeline before opening anything.
std::string canonical_pipeline(const EncoderOptions& options);

// What one tensor became.
struct TensorSummary {
  TensorInfo info;
  std::string storage;        // "pipeline", "raw" or "pass-through" (docs/format.md)
  uint64_t input_bytes = 0;   // the tensor's bytes
  uint64_t record_bytes = 0;  // its record in the container, framing included
};

// What finish() reports: the figures `gradcodec encode` prints.
struct EncodeSummary {
  uint64_t frames = 0;
  uint64_t tensors = 0;
  uint64_t input_bytes = 0;     // every tensor's bytes
  uint64_t output_bytes = 0;    // the whole container
  uint64_t float_elements = 0;  // parameters of the floating tensors
  double ratio() const noexcept { return output_bytes ? double(input_bytes) / double(output_bytes) : 0.0; }
  double bits_per_parameter() const noexcept {
    return float_elements ? 8.0 * double(output_bytes) / double(float_elements) : 0.0;
  }
};

// Compress to a target (docs/target.md): a bits-per-parameter budget for the whole snapshot, or
// a relative L2 error ||g - g^||/||g|| for every tensor (Scope::Tensor) or over the snapshot.
struct Target {
  enum class Kind : uint8_t { Bits, RelL2 } kind = Kind::Bits;
  enum class Scope : uint8_t { Tensor, Snapshot } scope = Scope::Snapshot;
  double value = 0;
  std::string text() const;  // "bits=1", "rel_l2=0.5"
};
// "bits=B" or "rel_l2=E" (E, B > 0) and the scope "tensor", "snapshot" or "" (rel_l2: tensor;
// bits: snapshot, the only scope it takes). Error(Usage) otherwise.
Target parse_target(const std::string& text, const std::string& scope = "");

struct TargetResult {
  std::string pipeline;            // the chosen pipeline, canonical text
  std::string stage, param, value; // the searched parameter and its chosen value (canonical text)
  std::string coarser, finer;      // the grid's neighbours of the value ("" at either end)
  // The header's "target" record: {"target", "scope", "stage", "param"}. Every candidate was
  // encoded with it; give it as EncoderOptions::target_json to write the container measured.
  std::string json;
  double bits_per_parameter = 0;   // the container's, header included (EncodeSummary's figure)
  double rel_l2 = 0;               // RelL2 targets: the worst tensor's or the snapshot's
  bool has_error = false;          // rel_l2 was measured
  size_t encodes = 0;              // candidates encoded
};
// Searches the main parameter of the first stage of options' pipeline that declares one
// (TargetParam, plugin/registry.hpp) by bisection on its grid, encoding `frame` (loaded once and
// held in memory) with `options` as Encoder would, header included, and decoding it for an error
// target. Returns the finest value whose bits are <= B, or the coarsest whose error is <= E; the
// search assumes the parameter is monotone (docs/target.md). Error(Usage) when no stage declares a
// parameter, Error(Input) naming the target and the best figure reachable when none meets it; the
// encoder's errors as Encoder's. Deterministic: the same frame, options and target give the same
// result for any thread count.
TargetResult search_target(const EncoderOptions& options, const FrameSource& frame, const Target& target);
// The pipeline text a search starts from: `text` with its first searched stage's parameter
// filled in (the grid's finest value, which the search replaces) when the text names the stage
// without it or its alternative ("topk" -> "topk(ratio=1)"); otherwise `text` as given.
// search_target applies it to options.pipeline; callers that check the text first use it too.
std::string target_pipeline(const std::string& text);

class Encoder {
 public:
  // A container written to `path` under a temporary name and renamed into place by finish()
  // ("-": standard output); an Encoder destroyed before finish() leaves nothing behind.
  static Encoder to_path(const std::string& path, const EncoderOptions& options = {});
  // A container written to an open descriptor as it is made (the descriptor stays the caller's).
  static Encoder to_fd(int fd, const EncoderOptions& options = {});
  // A container handed to `sink` (which must outlive the Encoder); sink.finish() after the last
  // byte. VectorSink collects it in memory.
  static Encoder to_sink(ByteSink& sink, const EncoderOptions& options = {});

  Encoder(Encoder&&) noexcept;
  Encoder& operator=(Encoder&&) noexcept;
  ~Encoder();

  // Encodes one frame: the tensors in order, each read in place (no copy of the caller's data).
  // `source` is recorded as the frame's source. Non-floating tensors (DType::Other) are kept
  // as they are. After an exception the Encoder is unusable (finish() refuses).
  std::vector<TensorSummary> add_frame(std::span<const TensorView> tensors, const std::string& source = "");
  // The same for tensors loaded one at a time (a file too large to hold, a format reader).
  std::vector<TensorSummary> add_frame(const FrameSource& frame);
  // Writes the footer and completes the container (renames it into place, or sink.finish()).
  EncodeSummary finish();
  // The pipeline in canonical text ("topk(ratio=0.01) | varint | zstd(level=3)").
  std::string pipeline_text() const;

 private:
  struct Impl;
  explicit Encoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// One process's share of a container that several processes write together, as the ranks of an
// MPI job do (docs/scale-out.md). Every process makes a PartEncoder with the same options and
// gives it the same frames (add_frame); each encodes only the tensors `owns` selects by name,
// in every frame (a stateful pipeline's state stays in one process), and holds their records in
// memory. The processes then exchange describe() (a few dozen bytes per record), and each calls
// write() with all of them: the file holds, byte for byte, what one Encoder given the same
// frames, options and inputs_json writes. The library does no communication and no file I/O here:
// the caller moves the descriptions and places the bytes.
class PartEncoder {
 public:
  PartEncoder(const EncoderOptions& options, std::function<bool(const std::string& name)> owns);
  PartEncoder(PartEncoder&&) noexcept;
  PartEncoder& operator=(PartEncoder&&) noexcept;
  ~PartEncoder();

  // Encodes this part's tensors of the frame. Every tensor's metadata is checked as Encoder
  // checks it, so every part refuses the same frame; a pipeline that plans over a whole frame
  // (PipelineStages::plan_frame) reads every tensor in every part, and a stateful one (tcs)
  // encodes every tensor in every part, for their states. Returns this part's tensors.
  std::vector<TensorSummary> add_frame(const FrameSource& frame);
  // What the other parts need of this one: its records' metadata and figures, not their bytes.
  std::vector<uint8_t> describe() const;
  // Hands write_at(offset, bytes) this part's bytes of the container made of `parts` (every
  // part's describe(), this one's among them): its records and, when `lead` (one part), the
  // header, the frames' sections and the footer. Returns the whole container's figures, the same
  // in every part.
  using WriteAt = std::function<void(uint64_t offset, std::span<const uint8_t> bytes)>;
  EncodeSummary write(std::span<const std::vector<uint8_t>> parts, bool lead, const WriteAt& write_at) const;
  std::string pipeline_text() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct DecoderOptions {
  unsigned threads = 1;  // worker threads for decode_frame (0: one per core)
  // Largest working memory one tensor may need to decode; a record over it is refused
  // (Error Input) before anything is allocated.
  uint64_t memory_limit = uint64_t{8} << 30;
};

struct FrameEntry {
  uint32_t index = 0;
  bool keyframe = true;
  std::string source;
};

class Decoder {
 public:
  // Opens a container file ("-": standard input). Every section it reads is checked first:
  // a damaged container is Error(Corrupt) naming the file, the section and the offset; a
  // snapshot file given in its place is Error(Input) saying what it is.
  static Decoder open(const std::string& path, const DecoderOptions& options = {});
  // A container held in memory; `name` names it in error messages.
  static Decoder from_bytes(std::vector<uint8_t> bytes, const DecoderOptions& options = {},
                            const std::string& name = "<memory>");

  Decoder(Decoder&&) noexcept;
  Decoder& operator=(Decoder&&) noexcept;
  ~Decoder();

  // The header: the pipeline (canonical text), seed, keyframe interval, writing tool and the
  // description of the inputs (JSON text).
  std::string pipeline_text() const;
  uint64_t seed() const;
  uint32_t keyframe_interval() const;
  std::string tool() const;
  std::string inputs_json() const;
  // Per frame, the key/value metadata its input file had (safetensors' __metadata__): the string
  // members of inputs_json()[f]["metadata"], in order; empty where there is none, and for every
  // frame when the description is not an array of one object per frame.
  std::vector<std::vector<std::pair<std::string, std::string>>> input_metadata() const;
  uint64_t file_size() const;

  size_t frame_count() const;
  FrameEntry frame(size_t f) const;
  // The tensors of frame f, in record order, from their records' metadata (nothing decoded).
  std::vector<TensorInfo> tensors(size_t f) const;
  // The index of the tensor named `name` in frame f, if there is one.
  std::optional<size_t> find(size_t f, const std::string& name) const;

  // Decodes tensor i of frame f (for a stateful pipeline, that tensor's records from the last
  // keyframe up to f first).
  Tensor decode(size_t f, size_t i);
  // Decodes every tensor of frame f, handing each to `sink` in record order on the calling
  // thread (DecoderOptions::threads of them decoded at once).
  void decode_frame(size_t f, const std::function<void(Tensor&&)>& sink);
  // The same for some of frame f's tensors: their indices `which`, in increasing order (else
  // Error Usage), handed to `sink` in that order; each is what decode(f, i) returns, and the
  // first error met is that of the lowest index that fails. A process decoding its share of a
  // frame (the ranks of an MPI job, docs/scale-out.md) decodes just its own.
  void decode_frame(size_t f, std::span<const size_t> which, const std::function<void(Tensor&&)>& sink);
  // Frames the last decode()/decode_frame() read (more than one for a stateful pipeline).
  size_t frames_read() const noexcept;
  // Whether the pipeline carries state from frame to frame (a frame needs the ones before it).
  bool stateful() const noexcept;

 private:
  struct Impl;
  explicit Decoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Compressor: a pipeline applied inside a training loop, without files. Each call encodes one
// tensor as the next frame of its name's sequence and returns what a receiver decoding those
// records gets, so a program can train on the compressed gradients directly.
struct CompressorOptions {
  // As EncoderOptions: a preset name or a pipeline text, not both; neither is "lossless". A bad
  // name or text is Error(Usage) when the Compressor is made.
  std::string preset;
  std::string pipeline;
  uint64_t seed = 0;  // every random choice, as EncoderOptions::seed
  NonFinite nonfinite = NonFinite::Refuse;
  std::string nonfinite_advice = kNonfiniteRawAdvice;  // as EncoderOptions::nonfinite_advice
  // Largest working memory one tensor may take to encode (EncoderOptions::memory_limit).
  uint64_t memory_limit = uint64_t{8} << 30;
};

// The contract. Every name is a sequence of its own, with the state of the pipeline's stateful
// stages (error feedback, TCS's masks, PowerSGD's warm start, ...) carried from one call to the
// next; names are independent of each other. Call c (0, 1, ...) of a name is frame c of an Encoder
// container with keyframe_interval 0 (only frame 0 is a keyframe), the same pipeline and seed,
// and the name's tensor is record `index` of its frame, where `index` is the number of names
// whose first record was made before the name's first record (a call refused before it made a
// record takes no index): calling roundtrip(name_j, F_i[j]) for the frames F_0..F_k
// in order (each frame's tensors in one order) returns, bit for bit, the tensors a Decoder
// returns for the container an Encoder writes of F_0..F_k. Only for a pipeline whose reducer
// makes a snapshot-wide plan (topk(scope=global), tcs, bird(vectors=attach), accordion over
// one: solo_frames()), a record depends on the other tensors of its frame; the Compressor then
// makes each call a frame of its own (the name's tensor alone, index 0): the result is what a
// Decoder returns for a container of the name's tensors alone, one per frame. A Compressor
// works on the calling thread, one call at a time.
//
// Between processes (a data-parallel training hook): encode() returns the record's bytes, and a
// Decompressor made with the same options (pipeline, seed) that is given a Compressor's records
// of each name in order returns, bit for bit, what that Compressor's encode()/roundtrip()
// returned. The receiver numbers names as the sender does, in the order it first sees them: it
// must see the sender's names in the order of the sender's first calls (any interleaving after
// that), as an all-gather of every call's records, decoded in order, does.
class Compressor {
 public:
  explicit Compressor(const CompressorOptions& options = {});
  Compressor(Compressor&&) noexcept;
  Compressor& operator=(Compressor&&) noexcept;
  ~Compressor();

  // Encodes `tensor` (recorded under `name`; its view's name is ignored) as the next frame of
  // that name's sequence and returns the decoded tensor: `name`, the view's dtype and shape
  // (a non-floating tensor comes back as it is). The view is read in place, not kept. Errors
  // as Encoder::add_frame: a non-finite value with NonFinite::Refuse, a tensor over the memory
  // limit, a name or shape a container cannot store are Error(Input), and change nothing (the
  // name's sequence goes on at the next call as if this one had not been made). After any
  // other exception (a stage's value overflow refused, ...) a stateful pipeline's state of
  // `name` is dropped: its next call is frame 0 again (calls(name) = 0). Other names are never
  // touched.
  Tensor roundtrip(const std::string& name, const TensorView& tensor);
  // The same call (the same state, frame and index, the same errors), returning the record's
  // bytes: its TREC section and its streams exactly as they stand in a container
  // (docs/format.md, "Tensor record"), but for the variant number, which a record on its own
  // gives as k + 1 for the control stage's alternative k (a container numbers variants in the
  // order of their first use). `decoded`, when given, receives what roundtrip() returns (without
  // it a stateless pipeline does not decode the record).
  std::vector<uint8_t> encode(const std::string& name, const TensorView& tensor, Tensor* decoded = nullptr);
  // The bytes the last successful roundtrip's or encode's record takes in the container, framing
  // included (TensorSummary::record_bytes; encode()'s size); 0 before the first.
  uint64_t last_bytes() const noexcept;
  // Frames done for `name` (0 for a name never called).
  uint64_t calls(const std::string& name) const;
  // The pipeline in canonical text.
  std::string pipeline_text() const;
  // Whether the pipeline carries state from call to call of a name.
  bool stateful() const noexcept;
  // Whether each call is a frame of its own (the pipeline's reducer plans whole frames).
  bool solo_frames() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The receiving side of Compressor::encode (the contract above): decodes one name's records in
// the order they were made, carrying each name's state from one to the next as the sender does.
// Made with the sender's CompressorOptions (preset or pipeline, and seed: a different seed
// decodes other values; memory_limit bounds the decoding, nonfinite is not used).
class Decompressor {
 public:
  explicit Decompressor(const CompressorOptions& options = {});
  Decompressor(Decompressor&&) noexcept;
  Decompressor& operator=(Decompressor&&) noexcept;
  ~Decompressor();

  // Decodes `record` (the bytes encode() returned) as the next call of `name` and returns what
  // the sender's encode()/roundtrip() returned. A record that is not one is refused before any
  // state is touched and changes nothing (the next good record decodes as if it had not come):
  // Error(Corrupt) naming the record ("corrupt record 2 of tensor 'w' ...") and what failed for
  // a record whose metadata or a stream fails its checksum, a truncated record or one with bytes
  // after it, metadata out of range (dtype, shape, storage, variant, streams), a record of
  // another name; Error(Input) for a record that needs more memory to decode than memory_limit,
  // before anything is allocated. Only a record that passes every checksum and that a stage still
  // cannot decode (made by no Compressor) may stop part-way: a stateful pipeline's state of
  // `name` is then dropped (its next record is frame 0 again, calls(name) = 0).
  Tensor decode(const std::string& name, std::span<const uint8_t> record);
  // Records of `name` decoded (0 for a name never seen): the sender's calls(name).
  uint64_t calls(const std::string& name) const;
  // Starts `name`'s sequence again (its next record is frame 0; its position is kept), as a
  // Compressor does after an error that dropped the name's state (its calls(name) back to 0).
  void reset(const std::string& name);
  // The pipeline in canonical text.
  std::string pipeline_text() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct InspectOptions {
  // Decode every record to count the values it sends (the kept fraction, index / value / overall
  // CR); false: metadata and checksums only (faster; those figures are left out).
  bool decode = true;
};

// What `gradcodec inspect --json` prints for the container at `path` (same fields, docs/api.md):
// header, every frame's tensors with their stages, sizes, ratios and streams, and the totals.
// Every stream's checksum is verified. Returns the JSON text.
std::string inspect(const std::string& path, const InspectOptions& options = {});

// bench(): compressors compared side by side on the caller's tensors (docs/bench.md).
struct BenchOptions {
  // The rows: each preset, then each pipeline text; neither: every preset.
  std::vector<std::string> presets;
  std::vector<std::string> pipelines;
  // "STAGE.PARAM=a,b,c": every row with the stage becomes one row per value (repeatable).
  std::vector<std::string> sweeps;
  unsigned repeat = 3;      // timed encodes and decodes per row, at least
  double min_time = 0.2;    // and at least this many seconds of each
  unsigned seeds = 1;       // stochastic pipelines: seeds 0..N-1 for the bias and the error spread
  unsigned threads = 1;     // 0: one per core; the figures but the speeds do not depend on it
  NonFinite nonfinite = NonFinite::Refuse;
  std::string nonfinite_advice = kNonfiniteRawAdvice;  // as EncoderOptions::nonfinite_advice
  bool per_tensor = false;  // per-tensor figures in the report
  // Where the timed runs' container is written (and removed after each row); empty: /dev/shm
  // when writable (the disk stays out of the figures), else the system's temporary directory.
  std::string temp_dir;
  // Each frame's source as a container records it, one per frame (empty: "<memory>" for each, as
  // Encoder::add_frame records a frame given none); the frame sections count in the output bytes
  // as they do for `gradcodec encode`.
  std::vector<std::string> sources;
  // The report's "inputs" (empty: `sources`), and the header's description of them (empty: []).
  std::vector<std::string> inputs;
  std::string inputs_json;
  // Called before each row (done rows, all rows, the row's name) and once at the end with
  // done == total. Must not throw.
  std::function<void(size_t done, size_t total, const std::string& row)> progress;
  // The link model (docs/bench.md, "Link model"): with link_rate > 0, every row also predicts one
  // aggregation of `link_workers` workers' gradients over a link of link_rate bytes per second
  // with link_latency seconds per message: the bytes each worker sends, the communication time,
  // and the step time and speed-up against plain fp32 and fp16 all-reduce.
  double link_rate = 0;        // bytes per second; 0: no link model
  unsigned link_workers = 0;   // N >= 2 with a link rate
  double link_latency = 1e-5;  // seconds per message (alpha); default 10 microseconds
  // How the encoded payloads are aggregated: "auto" (each row's own: docs/bench.md), "allreduce"
  // (ring all-reduce of payloads that sum in their encoded form), "allgather" (every worker's
  // payload to every other), or "ring" (Marsit's one-bit ring for signs).
  std::string collective = "auto";
  // Compress to a target (docs/target.md): "bits=B" or "rel_l2=E" (empty: none), its scope as
  // parse_target's. Each row's main parameter is first chosen by search_target on the first
  // frame, and the row measured with the chosen value. A row without a searched parameter, or
  // whose target no value on the grid meets, is measured as given; the report's "target" says
  // which. Error(Usage) for a malformed target or one given with sweeps.
  std::string target, target_scope;
  // Which rows to measure, by their place in bench_plan() (null: every row). The report holds
  // those alone, in order: the ranks of an MPI job each measure some and rank 0 joins their
  // reports (docs/scale-out.md). A row's figures do not depend on the others.
  std::function<bool(size_t row)> rows;
};

// Measures every row on `frames` (each a frame's tensors, read in place) and returns the report
// `gradcodec bench --json` prints (same fields, docs/bench.md). Every decoded run is checked:
// Error(Mismatch) when a lossless row does not return its input bit for bit, or a run differs
// from the first. Error(Usage) for a bad preset, pipeline or sweep, before anything is measured.
std::string bench(std::span<const std::vector<TensorView>> frames, const BenchOptions& options = {});
// The same for tensors already loaded (a formats reader's, with their byte order kept).
std::string bench(const std::vector<std::vector<Tensor>>& frames, const BenchOptions& options = {});
// The names of the rows bench() would measure, in order (a preset's name, a pipeline's canonical
// text, "[stage.param=v]" after a swept one): the options checked (Error Usage) before any input
// is read.
std::vector<std::string> bench_plan(const BenchOptions& options);

// merge(): several workers' containers aggregated into one, frame by frame (docs/merge.md).
struct MergeSettings {
  std::string method;                // "marsit", "cascade", "majority" or "mean"
  uint64_t seed = 0;                 // marsit's and cascade's random choices; stored in the output
  std::optional<double> eta;         // marsit/majority: the output scale (default: the inputs' mean)
  std::string preset, pipeline;      // mean: re-encode the average with this (default lossless)
  bool compensation = true;          // marsit of full-precision workers: global compensation
  uint32_t full_sync = 0;            // marsit of full-precision workers: every K-th frame in full
  unsigned threads = 1;              // 0: one per core; the bytes do not depend on it
  uint64_t memory_limit = uint64_t{8} << 30;  // per tensor, as DecoderOptions::memory_limit
  // The work done and the whole run's work, in elements; `done` never decreases. Must not throw.
  std::function<void(uint64_t done, uint64_t total)> progress;
  bool overwrite = false;            // replace `output` if it exists
  std::string inputs_json;           // the output header's description of the inputs; empty: []
  std::string nonfinite_advice = kMergeNonfiniteAdvice;  // as MergeOptions::nonfinite_advice
};

struct MergeSummary {
  size_t frames = 0;
  size_t tensors = 0;              // records per frame
  std::string pipeline_text;       // the output container's pipeline
  std::vector<uint64_t> hop_bits;  // bits each hop of the ring sends, over every tensor and frame
  uint64_t bytes_written = 0;      // the output container
};

// Merges the containers `inputs` (in ring order, at least 2, the same tensors frame by frame)
// into `output` (temporary file + rename; "-": standard output). Refused with Error(Usage) for
// a method or option that does not apply, Error(Input) for inputs that do not match, before
// anything is written.
MergeSummary merge(const std::vector<std::string>& inputs, const std::string& output, const MergeSettings& settings);

}  // namespace gradcodec
