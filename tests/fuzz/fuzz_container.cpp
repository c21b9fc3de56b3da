// SPDX-License-Identifier: BSD-3-Clause
// Container decode: any bytes as a .gcz — open, list, decode every tensor of every frame.
#include "fuzz_target.hpp"

#include <gradcodec/codec.hpp>
#include <gradcodec/container.hpp>
#include <gradcodec/file_io.hpp>

using namespace gradcodec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    ContainerReader r(InputFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.gcz"));
    DecodeOptions opt;
    opt.memory_limit = 64 << 20;  // a fuzzed shape may not demand more
    SequenceDecoder dec(r, opt);
    for (size_t f = 0; f < r.frame_count(); ++f)
      for (size_t i = 0; i < r.record_count(f); ++i) {
        Tensor t = dec.decode(f, i);
        const RecordMeta m = r.record(f, i);
        if (is_float(t.dtype()) && t.data.size() != t.elements() * dtype_size(t.dtype()))
          fuzz::finding("decoded tensor size differs from its shape");
        if (t.info.shape != m.info.shape) fuzz::finding("decoded shape differs from the record's");
      }
  } catch (const Error&) {
  }
  return 0;
}
