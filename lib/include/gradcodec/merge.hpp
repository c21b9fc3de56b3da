// gradcodec — aggregation of several workers' gradients (ALGORITHMS.md "Aggregation of several
// workers (merge)"; docs/merge.md).
//
// Workers 1..M hold the same tensors; they are aggregated along a ring in the order given (worker
// 1 first). Four methods:
//   marsit    Marsit's one-bit sign aggregation (seed 003 §4.1.1): the running sign bit meets each
//             worker's bit through the seeded bitwise operator ⊙, so P(final bit = 1) = (#workers
//             with bit 1)/M; output ±η with η = the mean of the workers' scales (or given).
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

// True when `p`'s decoded values are one sign per element times a per-tensor magnitude, so marsit
// and majority apply: no reducer, quantizer sign, ssdm or onebit, transforms only `ef` (which
// changes what is encoded, not how it decodes). onebit's two means per column are reduced to one
// scale (mean |decoded value|).
bool is_sign_pipeline(const Pipeline& p);

struct MergeOptions {
  MergeMethod method = MergeMethod::Mean;
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
// of every input, each decoded with its own pipeline and state. marsit, cascade and majority
// write the `sign` pipeline (one bit per element and one f32 scale per tensor; plain decode reads
// it); mean writes options.pipeline or lossless. Non-floating (pass-through) records are copied
// from the first input. Calls check_mergeable first.
MergeReport merge_containers(const std::vector<const ContainerReader*>& inputs, const std::string& output,
                             bool overwrite, const MergeOptions& options, const std::string& inputs_json = "[]");

}  // namespace gradcodec
