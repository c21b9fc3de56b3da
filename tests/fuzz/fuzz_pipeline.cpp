// SPDX-License-Identifier: BSD-3-Clause
// Pipeline text parser: any text either parses or is refused with Error(Usage); what parses has a
// canonical text and JSON that parse back to themselves.
#include "fuzz_target.hpp"

#include <gradcodec/pipeline.hpp>

#include <string>

using namespace gradcodec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Pipeline p;
  try {
    p = Pipeline::parse(text);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Usage) fuzz::finding("a bad pipeline text gave an error other than Usage");
    return 0;
  }
  try {
    if (Pipeline::parse(p.text()).text() != p.text()) fuzz::finding("canonical text does not parse to itself");
    if (Pipeline::from_json(p.json()).json() != p.json()) fuzz::finding("canonical JSON does not parse to itself");
  } catch (const Error&) {
    fuzz::finding("a canonical pipeline was refused");
  }
  return 0;
}
