// safetensors reader: any bytes as a .safetensors file — open, list, read every array.
#include "fuzz_target.hpp"

#include "readers.hpp"

using namespace gradcodec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto r = formats::open_safetensors(InputFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.safetensors"));
    for (size_t i = 0; i < r->arrays().size(); ++i) {
      Tensor t = r->read(i);
      if (is_float(t.dtype()) && t.data.size() != t.elements() * dtype_size(t.dtype()))
        fuzz::finding("array bytes differ from its shape");
    }
  } catch (const Error&) {
  }
  return 0;
}
