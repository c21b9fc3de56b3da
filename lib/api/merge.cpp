// SPDX-License-Identifier: BSD-3-Clause
// merge(): the facade over check_mergeable and merge_containers (gradcodec.hpp, docs/merge.md).
#include <gradcodec/gradcodec.hpp>

#include "api/open.hpp"
#include "api/threads.hpp"

#include <gradcodec/merge.hpp>

namespace gradcodec {

MergeSummary merge(const std::vector<std::string>& inputs, const std::string& output, const MergeSettings& s) {
  MergeOptions o;
  o.method = parse_merge_method(s.method);
  if (!s.preset.empty() || !s.pipeline.empty()) {
    EncoderOptions chosen;
    chosen.preset = s.preset;
    chosen.pipeline = s.pipeline;
    o.pipeline = Pipeline::parse(canonical_pipeline(chosen));
  }
  o.seed = s.seed;
  o.eta = s.eta;
  o.compensation = s.compensation;
  o.full_sync = s.full_sync;
  o.threads = api::thread_count(s.threads);
  o.memory_limit = s.memory_limit;
  o.progress = s.progress;
  o.nonfinite_advice = s.nonfinite_advice;
  // Every input opened and checked before the output is created.
  std::vector<ContainerReader> readers;
  readers.reserve(inputs.size());
  for (const auto& path : inputs) readers.emplace_back(api::open_container_file(path));
  std::vector<const ContainerReader*> ptrs;
  for (const auto& r : readers) ptrs.push_back(&r);
  check_mergeable(ptrs, o);
  const MergeReport r = merge_containers(ptrs, output, s.overwrite, o, s.inputs_json.empty() ? "[]" : s.inputs_json);
  return {r.frames, r.tensors, r.pipeline_text, r.hop_bits, r.bytes_written};
}

}  // namespace gradcodec
