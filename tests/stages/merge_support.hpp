// SPDX-License-Identifier: BSD-3-Clause
// Helpers of the merge tests: worker containers written to a per-process temp directory.
#pragma once

#include "support.hpp"

#include <gradcodec/container.hpp>
#include <gradcodec/merge.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace gradcodec::test {

inline std::string merge_temp(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("gradcodec_merge_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

// Writes frames (each a list of tensors) through `pipeline` (a preset name or a pipeline text) into the container at `path`.
inline void write_container(const std::string& path, const std::string& pipeline,
                            const std::vector<std::vector<Tensor>>& frames, uint64_t seed = 1) {
  EncodeOptions eo;
  eo.seed = seed;
  SequenceEncoder enc(find_preset(pipeline) ? Pipeline::preset(pipeline) : Pipeline::parse(pipeline), eo);
  ContainerWriter w(path, true, enc.header("[]"));
  for (size_t f = 0; f < frames.size(); ++f) {
    const auto& fr = frames[f];
    FrameSource src = frame_source(fr);
    src.source = "frame" + std::to_string(f);
    enc.encode_frame(src, w);
  }
  w.finish();
}

inline std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Every frame of a container decoded: [frame][tensor] values.
inline std::vector<std::vector<std::vector<float>>> decode_container(const std::string& path) {
  ContainerReader r = ContainerReader::open(path);
  SequenceDecoder dec(r);
  std::vector<std::vector<std::vector<float>>> out(r.frame_count());
  for (size_t f = 0; f < r.frame_count(); ++f)
    for (size_t i = 0; i < r.record_count(f); ++i) out[f].push_back(values_of(dec.decode(f, i)));
  return out;
}

}  // namespace gradcodec::test
