// SPDX-License-Identifier: BSD-3-Clause
// Decodes one tensor of one frame of a container and prints its shape and first values.
//   example_decode_one IN.gcz FRAME TENSOR
#include <gradcodec/gradcodec.hpp>

#include <cstdio>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s IN.gcz FRAME TENSOR\n", argv[0]);
    return 1;
  }
  try {
    gradcodec::Decoder decoder = gradcodec::Decoder::open(argv[1]);
    const size_t frame = std::stoul(argv[2]);
    const auto index = decoder.find(frame, argv[3]);
    if (!index) {
      std::fprintf(stderr, "example_decode_one: frame %zu has no tensor %s\n", frame, argv[3]);
      return 1;
    }
    const gradcodec::Tensor t = decoder.decode(frame, *index);
    std::printf("%s %s %s (pipeline %s, %zu frame(s) read)\n", t.name().c_str(), gradcodec::dtype_name(t.dtype()),
                gradcodec::shape_string(t.shape()).c_str(), decoder.pipeline_text().c_str(), decoder.frames_read());
    if (t.dtype() == gradcodec::DType::F32) {
      for (size_t i = 0; i < t.elements() && i < 8; ++i) {
        float v;
        std::memcpy(&v, t.data.data() + 4 * i, 4);
        std::printf("%s%.9g", i ? " " : "", v);
      }
      std::printf("\n");
    }
  } catch (const gradcodec::Error& e) {
    std::fprintf(stderr, "example_decode_one: %s\n", e.what());
    return static_cast<int>(e.code());
  }
  return 0;
}
