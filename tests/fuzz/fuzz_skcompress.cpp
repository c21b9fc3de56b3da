// SPDX-License-Identifier: BSD-3-Clause
// The skcompress and deltabin decoders (docs/stages.md "skcompress", "deltabin") on any streams:
// byte 0 picks a tensor shape, byte 1 the length L of the `index` stream (deltabin's) that
// follows, the next byte the count M of bucket means (the `scale` stream holds 1, 2, ..., M as
// f32), and the rest is the `value` stream (sign bits, code lengths, Huffman-coded sketch cells).
// The record must decode through the preset's pipeline or be refused with Corrupt; a decoded
// tensor has the shape's size and holds only zeros and ±(one of the means). Anything else — a
// crash, a sanitizer report, another exception or error code, another value — is a finding.
#include "fuzz_target.hpp"

#include <gradcodec/codec.hpp>
#include <gradcodec/plugin/pipeline_stages.hpp>

#include <cmath>
#include <cstring>

using namespace gradcodec;

namespace {

const std::vector<uint64_t> kShapes[] = {{64}, {8, 16}, {3, 5, 7}, {1}, {1000}, {2, 3, 3, 3}};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  TensorInfo info;
  info.name = "fuzz.weight";
  info.dtype = DType::F32;
  info.shape = kShapes[data[0] % std::size(kShapes)];
  const size_t l = std::min<size_t>(data[1], size - 3);
  const std::span<const uint8_t> index(data + 3, l);
  const uint32_t means = data[2];
  const std::span<const uint8_t> value(data + 3 + l, size - 3 - l);
  static const PipelineStages pipeline(
      Pipeline::parse("topk(ratio=0.1) | skcompress(buckets=16, rows=2, cols=0.5) | deltabin(group=4)"));
  Streams streams;
  streams.add("index").bytes.assign(index.begin(), index.end());
  streams.add("value").bytes.assign(value.begin(), value.end());
  Stream& scale = streams.add("scale", 4);
  scale.bytes.resize(4 * size_t{means});
  for (uint32_t j = 0; j < means; ++j) {
    const float v = static_cast<float>(j + 1);
    std::memcpy(scale.bytes.data() + 4 * j, &v, 4);
  }
  StageContext ctx;
  ctx.info = &info;
  PipelineStages::TensorState state;
  Tensor back;
  try {
    back = pipeline.decode(info, std::move(streams), true, ctx, state);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Corrupt) fuzz::finding("the pipeline refused with another code than Corrupt");
    return 0;
  }
  const uint64_t d = info.elements();
  if (back.info.shape != info.shape || back.data.size() != d * 4) fuzz::finding("decoded shape or size differs");
  for (uint64_t i = 0; i < d; ++i) {
    float v;
    std::memcpy(&v, back.data.data() + 4 * i, 4);
    const float a = std::fabs(v);
    if (v != 0.0f && (a != std::floor(a) || a < 1.0f || a > static_cast<float>(means)))
      fuzz::finding("a decoded value that is no bucket mean");
  }
  return 0;
}
