// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — aggregation of several workers' gradients (docs/merge.md).
//
// Workers 1..M hold the same tensors; they are aggregated along a ring in the order given (worker
// 1 first). Four methods:
//   marsit    Marsit's one-bit sign aggregation (Wu, He, Guo et al. 2022 (Marsit) §4.1.1): the
//             running sign bit meets each worker's bit through the seeded bitwise operator ⊙, so
//             P(final bit = 1) = (#workers with bit 1)/M; output ±η with η = the mean of the
//             workers' scales (or given).
//   cascade   each hop decodes what it received, adds its own gradient and re-compresses the sum
//             with ssdm (seeded); the final sum is divided by M (Marsit §3.2, appendix A s₃).
//   majority  signSGD majority vote: bit = 1 when at least half of the workers have bit 1 (a tie
//             goes to 1, the "0 counts as +" convention); output ±η as marsit.
//   mean      the plain average of the workers' values.
// A worker's sign bit is 1 for a non-negative value; its scale is the mean |value| of the tensor
// (for a tensor decoded from a sign or ssdm record this is exactly the record's scale).
//
// All randomness comes from Rng(seed, frame, tensor, RngPurpose::Merge), addressed by position
// (element, hop), so results do not depend on the thread count.
#pragma once

#include <gradcodec/container.hpp>
#include <gradcodec/frame.hpp>
#include <gradcodec/pipeline.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace gradcodec {

enum class MergeMethod : uint8_t { Marsit, Cascade, Majority, Mean };

// "marsit", "cascade", "majority", "mean".
const char* merge_method_name(MergeMethod m) noexcept;
// Parses a method name; Error(Usage) listing the four otherwise.
MergeMethod parse_merge_method(const std::string& name);
// Every method, in the order above.
const std::vector<MergeMethod>& merge_methods();

// Where a tensor sits: keys the random stream of the stochastic methods.
struct MergeKey {
  uint64_t seed = 0;
  uint32_t frame = 0;
  uint32_t tensor = 0;
};

// One tensor merged in memory.
struct MergedValues {
  std::vector<float> values;       // the aggregate, one per element
  std::vector<uint64_t> hop_bits;  // bits hop h sends (h = 1..M−1: workers 1..h → worker h+1)
};

// Merges one tensor's worker values (M ≥ 2 spans of equal length, ring order). `eta` overrides
// the output scale of marsit and majority. Error(Usage) for M < 2 or unequal lengths.
// hop_bits follow docs/merge.md: marsit and cascade n + 32 (bits + one f32 scale or norm),
// majority n·⌈log2(h+1)⌉ + 32 (a count in 0..h per element), mean 32·n.
MergedValues merge_values(MergeMethod method, const std::vector<std::span<const float>>& workers,
                          const MergeKey& key, std::optional<double> eta = std::nullopt);

// Marsit's ring one worker at a time, for a ring whose hops cross a network (bench --collective,
// docs/scale-out.md). A worker's sign bits (unpacked, 1 = value ≥ 0) and scale (mean |value|, in
// double) are merge_sign_bits and merge_scale of its values. Worker 1 sends its bits and scale;
// worker m (m = 2..M) applies marsit_hop to the running bits it received, with its own bits, and
// adds its scale to the running sum; worker M's bits are merge_values' marsit bits, and ±η with
// η = the sum / M its values (the same arithmetic in the same order: equal bit for bit). `key` as
// merge_values'. Error(Usage) for m outside 2..M or bits of unequal lengths.
std::vector<uint8_t> merge_sign_bits(std::span<const float> values);
double merge_scale(std::span<const float> values);
void marsit_hop(std::span<uint8_t> running, std::span<const uint8_t> own, uint32_t m, uint32_t workers,
                const MergeKey& key);

// Marsit over a sequence of frames, with its global compensation and periodic full-precision
// synchronisation (Marsit, Algorithm 1 lines 1, 9–13 and §4.1.3; Algorithm 2 line 1).
// Each worker m keeps, per tensor, a compensation vector c^(m), zero at the start. Frame t (t =
// MergeKey::frame, frames given in order 0, 1, 2, ...):
//   one-bit frame (full_sync = 0, or t mod full_sync ≠ 0): u^(m) = g^(m) + c^(m) (f32); the ring
//     merges the signs of the u^(m) with marsit's ⊙ (as merge_values); the output is
//     g_t = ±η, η = `eta` or the mean of the workers' mean |g^(m)| — plain marsit's η, of the
//     gradients and not of u, so the step does not grow with c (Marsit's η_s is a global step
//     size, line 9); then, with compensation, c^(m) ← u^(m) − g_t (line 10, applied to the
//     compensated update of line 1).
//   full-precision frame (full_sync = K > 0 and t mod K = 0, so frame 0 is one): g_t = the mean
//     of the g^(m) (line 12; as merge_values' mean) and every c^(m) ← 0 (line 13); the hops send
//     32 bits per element.
// Without compensation c stays 0 and a one-bit frame is merge_values' marsit. It needs each
// worker's full-precision gradient: sign-only inputs carry no u^(m) to compensate.
// Over T one-bit frames Σ_t g_t = Σ_t mean_t − mean_m c_T^(m): the compensation bounds the
// accumulated error by the final compensation instead of letting it grow with T.
// Thread safety: merge() calls for different tensors may run at once; one tensor's frames come in
// order, on one thread at a time.
struct MarsitSequenceOptions {
  bool compensation = true;
  uint32_t full_sync = 0;  // K: full-precision frames every K frames; 0 = never
};

class MarsitSequence {
 public:
  // `tensors`: the tensor indices (MergeKey::tensor) are 0..tensors−1.
  MarsitSequence(size_t tensors, MarsitSequenceOptions options);
  bool full_precision_frame(uint32_t frame) const noexcept {
    return options_.full_sync > 0 && frame % options_.full_sync == 0;
  }
  // One tensor of frame key.frame; the workers' full-precision values in ring order. Error(Usage)
  // as merge_values; Error(Input) for a tensor whose worker count or length changed since its
  // last frame.
  MergedValues merge(const std::vector<std::span<const float>>& workers, const MergeKey& key,
                     std::optional<double> eta = std::nullopt);
  // Worker m's compensation vector of `tensor` (empty before its first frame).
  const std::vector<float>& compensation(size_t tensor, size_t worker) const;

 private:
  MarsitSequenceOptions options_;
  std::vector<std::vector<std::vector<float>>> c_;  // [tensor][worker][element]
};

// True when `p`'s decoded values are one sign per element times a per-tensor magnitude, so marsit
// and majority apply: no reducer, quantizer sign, ssdm or onebit, transforms only `ef` (which
// changes what is encoded, not how it decodes). onebit's two means per column are reduced to one
// scale (mean |decoded value|).
bool is_sign_pipeline(const Pipeline& p);
// True when `p` decodes its input bit for bit (lossless, raw): each worker's full-precision
// gradient, which marsit's compensation needs.
bool is_full_precision_pipeline(const Pipeline& p);

struct MergeOptions {
  MergeMethod method = MergeMethod::Mean;
  // marsit over inputs that all hold full-precision (bit-exact: lossless, raw) frames: merged as
  // a MarsitSequence with these options. Ignored for sign inputs, which carry no full-precision
  // gradient (check_mergeable refuses full_sync > 0 with them).
  bool compensation = true;
  uint32_t full_sync = 0;
  uint64_t seed = 0;                 // stored in the output container
  std::optional<double> eta;         // marsit/majority output scale (default: mean of the inputs')
  std::optional<Pipeline> pipeline;  // mean only: re-encode with it (default: lossless)
  unsigned threads = 1;
  uint64_t memory_limit = uint64_t{8} << 30;  // per tensor, as DecodeOptions::memory_limit
  // Called as the work advances, with the work done and the whole run's work, in elements: each
  // tensor's are counted once as each worker's copy is decoded, once when merged and once when
  // its record is written. Never two calls at once (though perhaps on a worker thread); `done`
  // never decreases and reaches `total` at the end. The CLI's progress bar. Must not throw.
  std::function<void(uint64_t done, uint64_t total)> progress;
  // What a refusal of a merged tensor the output pipeline cannot code (NaN/Inf, or values beyond
  // its types) advises: merge stores no tensor raw, so the way out is the mean re-encoded
  // losslessly, named as the caller's users spell it (the CLI: --method mean --preset lossless).
  std::string nonfinite_advice = kMergeNonfiniteAdvice;
};

struct MergeReport {
  size_t frames = 0;
  size_t tensors = 0;              // records per frame
  std::string pipeline_text;       // the output container's pipeline
  std::vector<uint64_t> hop_bits;  // summed over every tensor and frame, per hop
  uint64_t bytes_written = 0;
};

// Checks that the inputs can be merged (at least 2; same frame count; per frame the same tensor
// names, dtypes and shapes in the same order; the method applies to every input's pipeline),
// throwing Error(Usage) for a method/option that does not apply and Error(Input) for inputs that
// do not match, naming the files and the mismatch. Nothing is written.
void check_mergeable(const std::vector<const ContainerReader*>& inputs, const MergeOptions& options);

// Merges the inputs frame by frame into a new container at `output` (temp file + rename; an
// existing file is replaced only when `overwrite`). Frame f of the output is the merge of frame f
// of every input, each decoded with its own pipeline and state. marsit of full-precision inputs
// runs a MarsitSequence over the frames (options.compensation, options.full_sync) and writes
// `lossless` when full_sync > 0 (its full-precision frames need it). marsit, cascade and majority
// otherwise write the `sign` pipeline (one bit per element and one f32 scale per tensor; plain decode reads
// it); mean writes options.pipeline or lossless. Non-floating (pass-through) records are copied
// from the first input. Calls check_mergeable first.
MergeReport merge_containers(const std::vector<const ContainerReader*>& inputs, const std::string& output,
                             bool overwrite, const MergeOptions& options, const std::string& inputs_json = "[]");

}  // namespace gradcodec
