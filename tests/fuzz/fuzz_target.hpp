// One libFuzzer entry point per target file. Each target is built twice: as a libFuzzer binary
// (clang, -DGRADCODEC_FUZZ=ON; see docs/robustness.md) and, in every build, as a replay program
// that runs the committed corpus in tests/fuzz/corpus/<target>/ as an ordinary test.
//
// A target may throw gradcodec::Error (the documented way to refuse bad input); anything else
// — a crash, a sanitizer report, another exception, a broken invariant (abort) — is a finding.
#pragma once

#include <gradcodec/error.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace gradcodec::fuzz {
// Reports a broken invariant and aborts (the fuzzer records the input).
[[noreturn]] inline void finding(const char* what) {
  std::fprintf(stderr, "fuzz finding: %s\n", what);
  std::abort();
}
}  // namespace gradcodec::fuzz
