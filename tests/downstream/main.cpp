// SPDX-License-Identifier: BSD-3-Clause
// Uses the installed library: parse a preset, round-trip a tensor in memory, print the result.
#include <gradcodec/codec.hpp>
#include <gradcodec/formats/snapshot_io.hpp>

#include <cstdio>
#include <cstring>
#include <vector>

int main() {
  using namespace gradcodec;
  PipelineStages stages(Pipeline::preset("lossless"));
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.001f * static_cast<float>(i);
  Tensor t;
  t.info.name = "w";
  t.info.shape = {1000};
  std::vector<uint8_t> bytes(4000);
  std::memcpy(bytes.data(), v.data(), 4000);
  t.data = Buffer(bytes);
  PipelineStages::TensorState enc, dec;
  StageContext ctx;
  ctx.info = &t.info;
  auto e = stages.encode(t, ctx, enc);
  Tensor back = stages.decode(t.info, e.streams, true, ctx, dec);
  bool same = back.data.size() == 4000 && std::memcmp(back.data.data(), bytes.data(), 4000) == 0;
  std::printf("downstream: %s, %s, %llu -> %llu bytes\n", stages.pipeline().text().c_str(),
              formats::format_name(formats::format_for_output("x.npz")),
              4000ULL, static_cast<unsigned long long>(e.streams.total_bytes()));
  return same ? 0 : 1;
}
