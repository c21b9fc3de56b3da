// SPDX-License-Identifier: BSD-3-Clause
// Stage decoders on mutated streams: byte 0 picks a preset, byte 1 the shape of a small f32
// tensor (and the seed), byte 2 the pipeline variant of a control stage (accordion). The tensor
// (values from the seed) is encoded with the preset, which gives a valid record's streams; the
// rest of the input then changes them, stream by stream in record order:
//
//   u16 length (little-endian; 0xFFFF keeps the stream's length, else the stream is cut or
//   zero-extended to it), then up to that many bytes XORed into the stream from its start.
//
// Input that ends early leaves the remaining streams as encoded, so a 3-byte input decodes a
// valid record and every mutation starts from one. The pipeline's decoder (lossless stages
// included) must decode the streams to a tensor of the record's shape or throw gradcodec::Error;
// anything else — a crash, a sanitizer report, another exception, a wrong size — is a finding.
#include "fuzz_target.hpp"

#include <gradcodec/codec.hpp>
#include <gradcodec/plugin/registry.hpp>
#include <gradcodec/rng.hpp>

#include <algorithm>
#include <cstring>

using namespace gradcodec;

namespace {

const std::vector<uint64_t> kShapes[] = {{64}, {8, 16}, {4, 2, 3, 3}, {1}, {3, 5}, {16, 16}, {2, 40}, {129}};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const auto& presets = preset_table();
  const Preset& preset = presets[data[0] % presets.size()];
  const uint64_t seed = data[1];
  Tensor t;
  t.info.name = "fuzz.weight";
  t.info.dtype = DType::F32;
  t.info.shape = kShapes[data[1] % std::size(kShapes)];
  {
    // Gradient-like finite values from the seed (the codec screens non-finite input out).
    Rng rng(seed, 0, 0, RngPurpose::Test);
    std::vector<uint8_t> bytes(t.info.elements() * 4);
    for (size_t i = 0; i < t.info.elements(); ++i) {
      const float v = static_cast<float>((rng.uniform() - 0.5) * 0.02);
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    }
    t.data = Buffer(std::move(bytes));
  }
  PipelineStages stages(Pipeline::preset(preset.name));
  StageContext ctx;
  ctx.seed = seed;
  ctx.info = &t.info;
  PipelineStages::TensorState enc_state;
  PipelineStages::Encoded enc;
  try {
    enc = stages.encode(t, ctx, enc_state);
  } catch (const Error&) {
    fuzz::finding("encoding a small finite tensor failed");
  }
  if (!enc.overflow.empty() || enc.nonfinite) fuzz::finding("a small finite tensor was refused");
  // The record's pipeline: the variant the control stage chose, or with byte 2's high bit set
  // the other of its two (a record may name the wrong one).
  const PipelineStages* ds = &stages;
  if (enc.variant >= 0) ds = &stages.variant(data[2] & 0x80 ? data[2] & 1 : enc.variant);

  size_t pos = 3;
  for (auto& s : enc.streams.all()) {
    if (size - pos < 2) break;
    const uint16_t len = static_cast<uint16_t>(data[pos] | data[pos + 1] << 8);
    pos += 2;
    if (len != 0xFFFF) s.bytes.resize(len, 0);
    const size_t n = std::min<size_t>(s.bytes.size(), size - pos);
    for (size_t i = 0; i < n; ++i) s.bytes[i] ^= data[pos + i];
    pos += n;
  }
  try {
    PipelineStages::TensorState dec_state;
    Tensor back = ds->decode(t.info, std::move(enc.streams), true, ctx, dec_state);
    if (back.info.shape != t.info.shape || back.data.size() != t.data.size())
      fuzz::finding("decoded tensor's shape or size differs from the record's");
  } catch (const Error&) {
  }
  return 0;
}
