// SPDX-License-Identifier: BSD-3-Clause
// Test helpers shared by the unit tests: tensors from values, in-memory pipeline round trips.
#pragma once

#include <gradcodec/codec.hpp>
#include <gradcodec/pipeline.hpp>
#include <gradcodec/plugin/registry.hpp>
#include <gradcodec/rng.hpp>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace gradcodec::test {

// The stage a pipeline text starts with ("topk(ratio=0.01)"), every parameter the text leaves out
// at its registered default, as a pipeline would make it (parsing may append stages: an index
// coder after a sparsifier).
inline std::unique_ptr<Stage> make_stage(const std::string& text) {
  const StageSpec s = Pipeline::parse(text).stages().front();
  return find_stage(s.name)->make(s.params, s.version);
}

// A frame for SequenceEncoder::encode_frame from tensors in memory (which must outlive it).
inline FrameSource frame_source(const std::vector<Tensor>& fr, std::string source = "frame") {
  FrameSource src;
  src.count = fr.size();
  src.info = [&fr](size_t i) { return fr[i].info; };
  src.load = [&fr](size_t i) { return fr[i]; };
  src.source = std::move(source);
  return src;
}

inline Tensor make_tensor(const std::string& name, std::vector<uint64_t> shape, const std::vector<float>& v) {
  Tensor t;
  t.info.name = name;
  t.info.dtype = DType::F32;
  t.info.shape = std::move(shape);
  std::vector<uint8_t> bytes(v.size() * 4);
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  t.data = Buffer(std::move(bytes));
  return t;
}

// A non-floating array (numpy descr, e.g. "<i8"), which every pipeline passes through as is.
inline Tensor make_other(const std::string& name, const std::string& descr, std::vector<uint64_t> shape,
                         std::vector<uint8_t> bytes) {
  Tensor t;
  t.info.name = name;
  t.info.dtype = DType::Other;
  t.info.descr = descr;
  t.info.shape = std::move(shape);
  t.data = Buffer(std::move(bytes));
  return t;
}

inline std::vector<float> values_of(const Tensor& t) {
  std::vector<float> v(t.elements());
  to_f32(t.dtype(), t.data.data(), v.size(), v.data());
  return v;
}

// Gaussian values from the project's generator (reproducible anywhere).
inline std::vector<float> gaussian(size_t n, uint64_t seed, float scale = 1.0f) {
  Rng r(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(r.normal()) * scale;
  return v;
}

// One tensor through a pipeline and back, in memory, as the codec does it (frame 0, keyframe).
struct RoundTrip {
  Tensor decoded;
  Streams streams;        // final streams (after lossless stages)
  uint64_t stream_bytes;  // their total size
};

inline RoundTrip roundtrip(const std::string& pipeline_text, const Tensor& t, uint64_t seed = 1,
                           uint32_t frame = 0, uint32_t tensor_index = 0) {
  PipelineStages stages(Pipeline::parse(pipeline_text));
  PipelineStages::TensorState enc_state, dec_state;
  StageContext ctx;
  ctx.seed = seed;
  ctx.frame = frame;
  ctx.tensor = tensor_index;
  ctx.keyframe = frame == 0;
  ctx.info = &t.info;
  auto enc = stages.encode(t, ctx, enc_state);
  if (!enc.overflow.empty()) throw std::runtime_error(enc.overflow);  // nothing to decode
  RoundTrip r;
  r.streams = enc.streams;
  r.stream_bytes = enc.streams.total_bytes();
  // A control stage (accordion) names the variant that decodes the record, as the container does.
  const PipelineStages& ds = enc.variant >= 0 ? stages.variant(enc.variant) : stages;
  r.decoded = ds.decode(t.info, std::move(enc.streams), true, ctx, dec_state);
  return r;
}

// Runs a pipeline over a sequence of frames of the same tensor with state, like the codec.
// Returns the decoded tensor of every frame (decoder side).
inline std::vector<Tensor> sequence_roundtrip(const std::string& pipeline_text, const std::vector<Tensor>& frames,
                                              uint64_t seed = 1) {
  PipelineStages stages(Pipeline::parse(pipeline_text));
  PipelineStages::TensorState enc_state, dec_state;
  std::vector<Tensor> out;
  for (uint32_t f = 0; f < frames.size(); ++f) {
    const Tensor& t = frames[f];
    StageContext ctx;
    ctx.seed = seed;
    ctx.frame = f;
    ctx.keyframe = f == 0;
    ctx.info = &t.info;
    if (ctx.keyframe) enc_state.dec.clear(), dec_state.dec.clear();
    auto enc = stages.encode(t, ctx, enc_state);
    // A stage that cannot represent the frame stops with Encoded::overflow (the codec refuses the
    // tensor or stores it raw); there is nothing to decode.
    if (!enc.overflow.empty()) throw std::runtime_error(enc.overflow);
    if (stages.stateful()) {
      std::vector<float> recon;
      (enc.variant >= 0 ? stages.variant(enc.variant) : stages).decode(t.info, enc.plain, false, ctx, enc_state, &recon);
      stages.after_encode(recon, ctx, enc_state);
    }
    const PipelineStages& ds = enc.variant >= 0 ? stages.variant(enc.variant) : stages;
    out.push_back(ds.decode(t.info, std::move(enc.streams), true, ctx, dec_state));
  }
  return out;
}

}  // namespace gradcodec::test
