// SPDX-License-Identifier: BSD-3-Clause
// The zfp and fpzip decoders on arbitrary value streams: byte 0 picks a stage text, bytes 1–2 the
// value count (little-endian, 0..65535 — fpzip's chunk), the rest is the stream. For fpzip the
// stream's XXH3-64 is put in front of the rest (kHashed), so that the fuzzer reaches the chunk
// lengths and the stage's fpzip decoder rather than the hash check. decode() must produce exactly
// `count` values or throw gradcodec::Error; anything else is a finding.
#include "fuzz_target.hpp"

#include <gradcodec/codec.hpp>
#include <gradcodec/plugin/registry.hpp>

#include "base/checksum.hpp"

#include <iterator>

using namespace gradcodec;

namespace {

struct Text {
  const char* pipeline;
  bool hashed;  // fpzip: the stream's hash is prepended
};
constexpr Text kTexts[] = {
    {"zfp(mode=rate, rate=4)", false},     {"zfp(mode=rate, rate=13.75)", false},
    {"zfp(mode=precision, precision=7)", false}, {"zfp(mode=accuracy, tolerance=1e-5)", false},
    {"zfp(mode=reversible)", false},       {"fpzip", true},
    {"fpzip(precision=16)", true},         {"fpzip(precision=3)", true},
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const Text& text = kTexts[data[0] % std::size(kTexts)];
  const uint64_t count = data[1] | uint64_t{data[2]} << 8;
  const Pipeline pipeline = Pipeline::parse(text.pipeline);
  const auto& st = pipeline.stages().front();
  auto stage = find_stage(st.name)->make(st.params, st.version);
  auto* q = static_cast<Quantizer*>(stage.get());

  Streams in;
  Stream& s = in.add(kValueStream);
  if (text.hashed) {
    const uint64_t h = xxh3(data + 3, size - 3);
    for (int i = 0; i < 8; ++i) s.bytes.push_back(static_cast<uint8_t>(h >> (8 * i)));
  }
  s.bytes.insert(s.bytes.end(), data + 3, data + size);

  TensorInfo info;
  info.name = "fuzz.weight";
  info.dtype = DType::F32;
  info.shape = {count};
  Payload p;
  p.info = &info;
  p.n = count;
  p.exact = false;
  StageContext ctx;
  ctx.info = &info;
  try {
    q->decode(p, in, ctx);
    if (p.values.size() != count) fuzz::finding("decoded value count differs from the tensor's");
  } catch (const Error&) {
  }
  return 0;
}
