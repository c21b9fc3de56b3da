// SPDX-License-Identifier: BSD-3-Clause
// Encodes a snapshot held in memory: two float32 tensors made here, one frame, into OUT.gcz.
//   example_encode_memory OUT.gcz [PRESET [SEED]]
#include <gradcodec/gradcodec.hpp>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT.gcz [PRESET [SEED]]\n", argv[0]);
    return 1;
  }
  // A layer's weight gradient (64 × 128) and its bias gradient (64): values in [-0.5, 0.5).
  std::vector<float> weight(64 * 128), bias(64);
  for (size_t i = 0; i < weight.size(); ++i) weight[i] = float(int(i * 7919 % 1000) - 500) / 1000.0f;
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = float(int(i * 104729 % 1000) - 500) / 1000.0f;

  gradcodec::EncoderOptions options;
  options.preset = argc > 2 ? argv[2] : "topk-1pct";
  options.seed = argc > 3 ? std::stoull(argv[3]) : 0;
  options.overwrite = true;
  const gradcodec::TensorView frame[] = {
      {"fc.weight", {64, 128}, weight.data()},
      {"fc.bias", {64}, bias.data()},
  };
  try {
    gradcodec::Encoder encoder = gradcodec::Encoder::to_path(argv[1], options);
    encoder.add_frame(frame, "memory");
    const gradcodec::EncodeSummary s = encoder.finish();
    std::printf("%s: %s, %llu bytes -> %llu bytes (ratio %.2fx, %.3f bits/param)\n", argv[1],
                encoder.pipeline_text().c_str(), static_cast<unsigned long long>(s.input_bytes),
                static_cast<unsigned long long>(s.output_bytes), s.ratio(), s.bits_per_parameter());
  } catch (const gradcodec::Error& e) {
    std::fprintf(stderr, "example_encode_memory: %s\n", e.what());
    return static_cast<int>(e.code());
  }
  return 0;
}
