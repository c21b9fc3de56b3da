// SPDX-License-Identifier: BSD-3-Clause
// The collective's per-step aggregation (collective.hpp): the facade over merge.hpp's pieces.
#include <gradcodec/collective.hpp>

#include "api/facade.hpp"

#include <gradcodec/merge.hpp>

namespace gradcodec {

CollectiveTraits collective_traits(const std::string& preset, const std::string& pipeline) {
  const Pipeline p = api::chosen_pipeline(preset, pipeline);
  CollectiveTraits t;
  t.pipeline = p.text();
  t.signs = is_sign_pipeline(p);
  for (const auto& s : p.stages()) {
    if (s.name == "ef") continue;
    if (t.cast) {  // a second coding stage (a lossless one after the cast)
      t.cast.reset();
      break;
    }
    if (s.name == "raw") t.cast = DType::F32;
    else if (s.name == "fp16") t.cast = DType::F16;
    else if (s.name == "bf16") t.cast = DType::BF16;
    else break;
  }
  return t;
}

std::vector<float> workers_mean(const std::vector<std::span<const float>>& workers) {
  return merge_values(MergeMethod::Mean, workers, MergeKey{}).values;
}

std::vector<uint8_t> ring_sign_bits(std::span<const float> values) { return merge_sign_bits(values); }

double ring_scale(std::span<const float> values) { return merge_scale(values); }

void ring_hop(std::span<uint8_t> running, std::span<const uint8_t> own, uint32_t m, uint32_t workers,
              uint64_t seed, uint32_t frame, uint32_t tensor) {
  marsit_hop(running, own, m, workers, MergeKey{seed, frame, tensor});
}

}  // namespace gradcodec
