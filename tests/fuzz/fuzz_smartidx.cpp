// SPDX-License-Identifier: BSD-3-Clause
// The smartidx decoder (docs/stages.md "smartidx") on any package stream: byte 0 picks a tensor
// shape (conv weights cut into kernels, and tensors that are not), the rest is the stage's `index`
// stream. When smartidx_read accepts it, the record (that stream and a value stream of the
// package's value count, value j = j + 1) must decode through the pipeline to a tensor holding
// exactly the packages' values — individual values as sent, kernel values with the pattern's signs
// — and zeros elsewhere; when it refuses, the pipeline must refuse too, with Corrupt. Anything
// else — a crash, a sanitizer report, another exception, a different tensor — is a finding.
#include "fuzz_target.hpp"

#include "sparsify/smartidx.hpp"

#include <gradcodec/codec.hpp>
#include <gradcodec/plugin/pipeline_stages.hpp>

#include <cmath>
#include <cstring>

using namespace gradcodec;

namespace {

const std::vector<uint64_t> kShapes[] = {{4, 1, 3, 3}, {2, 3, 3, 3}, {3, 2, 5, 5}, {8, 2, 1, 1},
                                         {2, 2, 1, 7}, {64},         {8, 16},      {1, 1, 2, 1}};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  TensorInfo info;
  info.name = "fuzz.weight";
  info.dtype = DType::F32;
  info.shape = kShapes[data[0] % std::size(kShapes)];
  const uint64_t d = info.elements(), m = stages::smartidx_kernel_size(info.shape);
  const std::span<const uint8_t> index(data + 1, size - 1);
  static const PipelineStages pipeline(Pipeline::parse("smartidx(ratio=0.1)"));
  stages::SmartIdxPackages pk;
  bool valid = true;
  try {
    pk = stages::smartidx_read(index, d, m);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Corrupt) fuzz::finding("smartidx_read refused with another code than Corrupt");
    valid = false;
  }
  uint64_t count = pk.individual.size();
  for (const auto& p : pk.patterns) count += p.kernels.size() * pk.m;
  Streams streams;
  streams.add("index").bytes.assign(index.begin(), index.end());
  Stream& value = streams.add("value", 4);
  value.bytes.resize(4 * count);
  for (uint64_t j = 0; j < count; ++j) {
    const float v = static_cast<float>(j + 1);
    std::memcpy(value.bytes.data() + 4 * j, &v, 4);
  }
  StageContext ctx;
  ctx.info = &info;
  PipelineStages::TensorState state;
  Tensor back;
  try {
    back = pipeline.decode(info, std::move(streams), true, ctx, state);
  } catch (const Error& e) {
    if (valid) fuzz::finding("the pipeline refused a package stream smartidx_read accepts");
    if (e.code() != ErrorCode::Corrupt) fuzz::finding("the pipeline refused with another code than Corrupt");
    return 0;
  }
  if (!valid) fuzz::finding("the pipeline decoded a package stream smartidx_read refuses");
  if (back.info.shape != info.shape || back.data.size() != d * 4) fuzz::finding("decoded shape or size differs");
  std::vector<float> want(d, 0.0f);
  uint64_t j = 0;
  for (uint64_t x : pk.individual) want[x] = static_cast<float>(++j);
  for (const auto& p : pk.patterns)
    for (uint64_t k : p.kernels)
      for (uint64_t e = 0; e < pk.m; ++e) want[k * pk.m + e] = std::copysign(static_cast<float>(++j), p.negative[e] ? -1.0f : 1.0f);
  if (std::memcmp(want.data(), back.data.data(), d * 4) != 0) fuzz::finding("decoded values differ from the packages");
  return 0;
}
