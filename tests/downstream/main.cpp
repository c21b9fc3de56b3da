// SPDX-License-Identifier: BSD-3-Clause
// Uses the installed library through its public API only: encodes a tensor held in memory into
// a container in memory, decodes it, and checks the bytes came back.
#include <gradcodec/gradcodec.hpp>

#include <cstdio>
#include <cstring>
#include <vector>

int main() {
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.001f * static_cast<float>(i);
  std::vector<uint8_t> container;
  gradcodec::VectorSink sink(container);
  gradcodec::EncoderOptions options;
  options.preset = "lossless";
  gradcodec::Encoder enc = gradcodec::Encoder::to_sink(sink, options);
  const gradcodec::TensorView frame[] = {{"w", {1000}, v.data()}};
  enc.add_frame(frame);
  const gradcodec::EncodeSummary s = enc.finish();
  gradcodec::Decoder dec = gradcodec::Decoder::from_bytes(container);
  const gradcodec::Tensor back = dec.decode(0, 0);
  const bool same = back.data.size() == 4000 && std::memcmp(back.data.data(), v.data(), 4000) == 0;
  std::printf("downstream: %s, %s, %llu -> %llu bytes\n", gradcodec::version(), enc.pipeline_text().c_str(),
              static_cast<unsigned long long>(s.input_bytes), static_cast<unsigned long long>(s.output_bytes));
  return same ? 0 : 1;
}
