// SPDX-License-Identifier: BSD-3-Clause
// Compares two presets on the first frame of a container (a `--preset lossless` one keeps the
// tensors exactly): each re-encodes the float32 tensors in memory, decodes them, and reports
// the compression ratio and the relative L2 error of the whole frame.
//   example_compare_presets IN.gcz PRESET_A PRESET_B
#include <gradcodec/gradcodec.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

std::vector<float> floats(const gradcodec::Tensor& t) {
  std::vector<float> v(t.elements());
  std::memcpy(v.data(), t.data.data(), v.size() * 4);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s IN.gcz PRESET_A PRESET_B\n", argv[0]);
    return 1;
  }
  try {
    // The frame's float32 tensors, decoded once and kept for both presets.
    gradcodec::Decoder source = gradcodec::Decoder::open(argv[1]);
    std::vector<gradcodec::Tensor> tensors;
    source.decode_frame(0, [&](gradcodec::Tensor&& t) {
      if (t.dtype() == gradcodec::DType::F32) tensors.push_back(std::move(t));
    });
    std::vector<gradcodec::TensorView> views;
    for (const auto& t : tensors)
      views.emplace_back(t.name(), t.dtype(), t.shape(), t.data.data());

    std::printf("%-12s %10s %10s %12s\n", "preset", "ratio", "bits/p", "rel L2");
    for (const char* preset : {argv[2], argv[3]}) {
      std::vector<uint8_t> bytes;
      gradcodec::VectorSink sink(bytes);
      gradcodec::EncoderOptions options;
      options.preset = preset;
      gradcodec::Encoder encoder = gradcodec::Encoder::to_sink(sink, options);
      encoder.add_frame(views);
      const gradcodec::EncodeSummary s = encoder.finish();

      gradcodec::Decoder decoder = gradcodec::Decoder::from_bytes(std::move(bytes));
      double err = 0, norm = 0;
      size_t k = 0;
      decoder.decode_frame(0, [&](gradcodec::Tensor&& t) {
        const std::vector<float> a = floats(tensors[k++]), b = floats(t);
        for (size_t i = 0; i < a.size(); ++i) {
          err += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
          norm += double(a[i]) * a[i];
        }
      });
      std::printf("%-12s %10.2f %10.3f %12.4g\n", preset, s.ratio(), s.bits_per_parameter(),
                  norm > 0 ? std::sqrt(err / norm) : 0.0);
    }
  } catch (const gradcodec::Error& e) {
    std::fprintf(stderr, "example_compare_presets: %s\n", e.what());
    return static_cast<int>(e.code());
  }
  return 0;
}
