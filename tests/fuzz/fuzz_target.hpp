// SPDX-License-Identifier: BSD-3-Clause
// One libFuzzer entry point per target file. Each target is built twice: as a libFuzzer binary
// (clang, -DGRADCODEC_FUZZ=ON; see docs/robustness.md) and, in every build, as a replay program
// that runs the committed corpus in tests/fuzz/corpus/<target>/ as an ordinary test.
//
// A target may throw gradcodec::Error (the documented way to refuse bad input); anything else
// — a crash, a sanitizer report, another exception, a broken invariant (abort) — is a finding.
#pragma once

#include <gradcodec/error.hpp>
#include <gradcodec/file_io.hpp>
#include <gradcodec/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace gradcodec::fuzz {
// Reports a broken invariant and aborts (the fuzzer records the input).
[[noreturn]] inline void finding(const char* what) {
  std::fprintf(stderr, "fuzz finding: %s\n", what);
  std::abort();
}

// The reader targets (npy, npz, safetensors): open `data` as a file of that format, list it and
// read every array; a floating array whose bytes disagree with its shape is a finding. Refusals
// (gradcodec::Error) are the expected outcome for most inputs.
template <class Open>
int read_every_array(const uint8_t* data, size_t size, const char* name, Open open) {
  try {
    auto r = open(InputFile::from_bytes(std::vector<uint8_t>(data, data + size), name));
    for (size_t i = 0; i < r->arrays().size(); ++i) {
      Tensor t = r->read(i);
      if (is_float(t.dtype()) && t.data.size() != t.elements() * dtype_size(t.dtype()))
        finding("array bytes differ from its shape");
    }
  } catch (const Error&) {
  }
  return 0;
}
}  // namespace gradcodec::fuzz
