// SPDX-License-Identifier: BSD-3-Clause
// merge of 2-4 containers: byte 0 gives their count (2 + byte 0 % 3), byte 1 the method (marsit,
// cascade, majority, mean) and the seed; then each container but the last is a u32 length
// (little-endian) and that many bytes, and the last one is the rest. The containers are opened
// and merged (64 MiB decode limit per tensor) into a temporary file; a merge that succeeds must
// write a container that decodes, tensor for tensor, to the shapes of the first input. Refusals
// (gradcodec::Error) are the expected outcome for most inputs; anything else is a finding.
#include "fuzz_target.hpp"

#include <gradcodec/codec.hpp>
#include <gradcodec/container.hpp>
#include <gradcodec/file_io.hpp>
#include <gradcodec/merge.hpp>

#include <cstdio>
#include <memory>
#include <string>
#include <unistd.h>

using namespace gradcodec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t count = 2 + data[0] % 3;
  MergeOptions opt;
  opt.method = merge_methods()[data[1] % merge_methods().size()];
  opt.seed = data[1] >> 2;
  opt.memory_limit = 64 << 20;  // a fuzzed shape may not demand more
  size_t pos = 2;
  std::vector<std::vector<uint8_t>> parts;
  for (size_t k = 0; k + 1 < count; ++k) {
    if (size - pos < 4) return 0;
    uint64_t len = 0;
    for (int b = 0; b < 4; ++b) len |= static_cast<uint64_t>(data[pos + b]) << (8 * b);
    pos += 4;
    if (len > size - pos) return 0;
    parts.emplace_back(data + pos, data + pos + len);
    pos += len;
  }
  parts.emplace_back(data + pos, data + size);

  const std::string out = "/tmp/gradcodec-fuzz-merge-" + std::to_string(::getpid()) + ".gcz";
  try {
    std::vector<std::unique_ptr<ContainerReader>> readers;
    std::vector<const ContainerReader*> inputs;
    for (size_t k = 0; k < parts.size(); ++k) {
      readers.push_back(std::make_unique<ContainerReader>(
          InputFile::from_bytes(std::move(parts[k]), "fuzz" + std::to_string(k) + ".gcz")));
      inputs.push_back(readers.back().get());
    }
    merge_containers(inputs, out, true, opt);
  } catch (const Error&) {
    std::remove(out.c_str());
    return 0;
  }
  // The merge succeeded: its output must decode.
  try {
    ContainerReader r = ContainerReader::open(out);
    SequenceDecoder dec(r);
    for (size_t f = 0; f < r.frame_count(); ++f)
      for (size_t i = 0; i < r.record_count(f); ++i) {
        Tensor t = dec.decode(f, i);
        if (is_float(t.dtype()) && t.data.size() != t.elements() * dtype_size(t.dtype()))
          fuzz::finding("merged tensor's size differs from its shape");
      }
  } catch (const Error&) {
    std::remove(out.c_str());
    fuzz::finding("a merge that succeeded wrote a container that does not decode");
  }
  std::remove(out.c_str());
  return 0;
}
