// SPDX-License-Identifier: BSD-3-Clause
// torch.save reader and its restricted pickle reader: bytes starting "PK" are a whole .pt file
// (open, list, read every array); any other bytes are a data.pkl given straight to the pickle
// reader, so the fuzzer mutates pickles without having to keep a zip's CRC-32 right.
#include "fuzz_target.hpp"

#include "pickle_restricted.hpp"
#include "readers.hpp"

using namespace gradcodec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= 2 && data[0] == 'P' && data[1] == 'K')
    return fuzz::read_every_array(data, size, "fuzz.pt", formats::open_torch);
  try {
    const formats::pickle::Result r = formats::pickle::read_torch_pickle(data, size, "fuzz.pkl", "root");
    for (const auto& t : r.tensors) {
      if (t.storage >= r.storages.size()) fuzz::finding("tensor on a storage that is not listed");
      if (t.shape.size() != t.stride.size()) fuzz::finding("shape and strides of different ranks");
    }
  } catch (const Error&) {
  }
  return 0;
}
