// SPDX-License-Identifier: BSD-3-Clause
// Helpers of the sequence-codec tests (tcs, powersgd, accordion): encode frames into a real
// container (SequenceEncoder, frame pre-passes, mirror decoder, variants) and read it back.
#pragma once

#include "support.hpp"

#include <gradcodec/container.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace gradcodec::test {

struct EncodedSequence {
  std::vector<uint8_t> bytes;                             // the container
  std::vector<std::vector<TensorOutcome>> outcomes;       // per frame, per tensor
};

// Encodes `frames` frames; make(f) returns the tensors of frame f (called once per frame, so a
// large frame need not outlive its encoding).
inline EncodedSequence encode_sequence(const std::string& pipeline, size_t frames,
                                       const std::function<std::vector<Tensor>(size_t)>& make,
                                       uint32_t keyframe_interval = 0, uint64_t seed = 3, unsigned threads = 1,
                                       NonFinite nonfinite = NonFinite::Refuse) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("gradcodec_seq_" + std::to_string(::getpid()) + ".gcz")).string();
  EncodedSequence out;
  {
    EncodeOptions eo;
    eo.seed = seed;
    eo.keyframe_interval = keyframe_interval;
    eo.threads = threads;
    eo.nonfinite = nonfinite;
    SequenceEncoder enc(Pipeline::parse(pipeline), eo);
    ContainerWriter w(path, true, enc.header("[]"));
    for (size_t f = 0; f < frames; ++f) {
      const std::vector<Tensor> fr = make(f);
      FrameSource src = frame_source(fr);
      src.source = "frame" + std::to_string(f);
      out.outcomes.push_back(enc.encode_frame(src, w));
    }
    w.finish();
  }
  std::ifstream in(path, std::ios::binary);
  out.bytes.assign(std::istreambuf_iterator<char>(in), {});
  std::filesystem::remove(path);
  return out;
}

inline EncodedSequence encode_sequence(const std::string& pipeline, const std::vector<std::vector<Tensor>>& frames,
                                       uint32_t keyframe_interval = 0, uint64_t seed = 3, unsigned threads = 1) {
  return encode_sequence(
      pipeline, frames.size(), [&](size_t f) { return frames[f]; }, keyframe_interval, seed, threads);
}

// A sequence of one tensor per frame.
inline EncodedSequence encode_sequence(const std::string& pipeline, const std::vector<Tensor>& frames,
                                       uint32_t keyframe_interval = 0, uint64_t seed = 3, unsigned threads = 1) {
  return encode_sequence(
      pipeline, frames.size(), [&](size_t f) { return std::vector<Tensor>{frames[f]}; }, keyframe_interval, seed,
      threads);
}

// Every frame decoded in order by one decoder: [frame][tensor] values.
inline std::vector<std::vector<std::vector<float>>> decode_all(const ContainerReader& r) {
  SequenceDecoder dec(r);
  std::vector<std::vector<std::vector<float>>> out(r.frame_count());
  for (size_t f = 0; f < r.frame_count(); ++f)
    for (size_t i = 0; i < r.record_count(f); ++i) out[f].push_back(values_of(dec.decode(f, i)));
  return out;
}

// Bytes of the named streams of one outcome.
inline uint64_t stream_bytes(const TensorOutcome& o, std::initializer_list<const char*> names) {
  uint64_t b = 0;
  for (const auto& [name, size] : o.streams)
    for (const char* n : names)
      if (name == n) b += size;
  return b;
}

// The parameter tensors of ResNet-18, CIFAR variant (kuangliu/pytorch-cifar, 10 classes): 62
// tensors, 11,173,962 parameters (the d of TCS's and PowerSGD's CIFAR-10 experiments).
inline std::vector<std::pair<std::string, std::vector<uint64_t>>> resnet18_cifar_shapes() {
  std::vector<std::pair<std::string, std::vector<uint64_t>>> s = {
      {"conv1.weight", {64, 3, 3, 3}}, {"bn1.weight", {64}}, {"bn1.bias", {64}}};
  uint64_t in = 64;
  const uint64_t planes[4] = {64, 128, 256, 512};
  for (int layer = 0; layer < 4; ++layer) {
    for (int b = 0; b < 2; ++b) {
      const uint64_t p = planes[layer];
      const std::string pre = "layer" + std::to_string(layer + 1) + "." + std::to_string(b) + ".";
      const bool shortcut = b == 0 && (layer > 0 || in != p);
      s.push_back({pre + "conv1.weight", {p, in, 3, 3}});
      s.push_back({pre + "bn1.weight", {p}});
      s.push_back({pre + "bn1.bias", {p}});
      s.push_back({pre + "conv2.weight", {p, p, 3, 3}});
      s.push_back({pre + "bn2.weight", {p}});
      s.push_back({pre + "bn2.bias", {p}});
      if (shortcut) {
        s.push_back({pre + "shortcut.0.weight", {p, in, 1, 1}});
        s.push_back({pre + "shortcut.1.weight", {p}});
        s.push_back({pre + "shortcut.1.bias", {p}});
      }
      in = p;
    }
  }
  s.push_back({"linear.weight", {10, 512}});
  s.push_back({"linear.bias", {10}});
  return s;
}

}  // namespace gradcodec::test
