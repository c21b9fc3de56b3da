// SPDX-License-Identifier: BSD-3-Clause
// Round trip through a random pipeline: byte 0 picks a preset, bytes 1-2 the seed and the shape,
// the rest are the tensor's f32 values (any bit patterns). Encoding may refuse (Error, or the
// overflow/non-finite outcome the codec turns into a refusal or a raw record); what it encodes
// must decode to the same shape, and lossless presets must give back every bit.
#include "fuzz_target.hpp"

#include <gradcodec/codec.hpp>
#include <gradcodec/plugin/registry.hpp>

#include <algorithm>
#include <cstring>

using namespace gradcodec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const auto& presets = preset_table();
  const Preset& preset = presets[data[0] % presets.size()];
  const uint64_t seed = data[1];
  const size_t n = (size - 3) / 4;
  Tensor t;
  t.info.name = "fuzz.weight";
  t.info.dtype = DType::F32;
  const uint64_t rows = 1 + data[2] % 8;
  t.info.shape = n % rows == 0 && n ? std::vector<uint64_t>{rows, n / rows} : std::vector<uint64_t>{n};
  t.data = Buffer(std::vector<uint8_t>(data + 3, data + 3 + 4 * n));
  try {
    PipelineStages stages(Pipeline::preset(preset.name));
    if (!stages.lossless() && count_nonfinite(t)) return 0;  // the codec refuses (or stores raw) these
    PipelineStages::TensorState enc_state, dec_state;
    StageContext ctx;
    ctx.seed = seed;
    ctx.info = &t.info;
    auto enc = stages.encode(t, ctx, enc_state);
    // The documented refusal of a finite tensor a stage cannot represent (a value beyond
    // float16's 65504, a norm beyond float32), or of NaN/Inf a stage counted while reading: no
    // streams are made, and the codec refuses the tensor or stores it raw (--nonfinite).
    if (!enc.overflow.empty() || enc.nonfinite) return 0;
    const PipelineStages& ds = enc.variant >= 0 ? stages.variant(enc.variant) : stages;
    Tensor back = ds.decode(t.info, std::move(enc.streams), true, ctx, dec_state);
    if (back.info.shape != t.info.shape || back.data.size() != t.data.size())
      fuzz::finding("round trip changed the shape or size");
    if (stages.lossless() && !std::equal(t.data.data(), t.data.data() + t.data.size(), back.data.data()))
      fuzz::finding("lossless preset changed the bits");
  } catch (const Error& e) {
    if (e.code() == ErrorCode::Internal || e.code() == ErrorCode::Corrupt)
      fuzz::finding("encoding then decoding a valid tensor failed");
  }
  return 0;
}
