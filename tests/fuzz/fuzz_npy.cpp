// SPDX-License-Identifier: BSD-3-Clause
// npy reader: any bytes as a .npy file — open, list, read every array.
#include "fuzz_target.hpp"

#include "readers.hpp"

using namespace gradcodec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return fuzz::read_every_array(data, size, "fuzz.npy", formats::open_npy);
}
