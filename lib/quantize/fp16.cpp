#include "quantize/fp16.hpp"

#include "core/pages.hpp"

#include <gradcodec/half.hpp>

#include <cstring>

namespace gradcodec::stages {

namespace {

template <uint16_t (*To)(float), DType Half>
class HalfCast final : public Quantizer {
 public:
  explicit HalfCast(const char* name) : name_(name) {}
  void encode(Payload& p, Streams& out, const StageContext&) override {
    const std::vector<float>& v = p.sparse || p.lowrank ? p.values : p.dense_f32();
    Stream& s = out.add(kValueStream, 2);
    s.bytes.resize(v.size() * 2);
    uint8_t* d = s.bytes.data();
    for (size_t i = 0; i < v.size(); ++i) {
      uint16_t h = To(v[i]);
      std::memcpy(d + 2 * i, &h, 2);
    }
  }
  void decode(Payload& p, const Streams& in, const StageContext&) override {
    auto b = in.get(kValueStream);
    const uint64_t count = p.value_count();
    if (b.size() != count * 2)
      fail(ErrorCode::Corrupt, std::string(name_) + ": value stream holds " + std::to_string(b.size()) +
                                   " bytes, expected " + std::to_string(count * 2));
    // Converted in chunks appended to fresh memory (written once, not zero-filled first).
    p.values.clear();
    append_chunked<4096>(p.values, count, [&](float* dst, uint64_t first, uint64_t n) {
      to_f32(Half, b.data() + 2 * first, n, dst);
    });
  }

 private:
  const char* name_;
};

}  // namespace

std::unique_ptr<Stage> make_fp16(const Params&, uint32_t) {
  return std::make_unique<HalfCast<f32_to_f16, DType::F16>>("fp16");
}
std::unique_ptr<Stage> make_bf16(const Params&, uint32_t) {
  return std::make_unique<HalfCast<f32_to_bf16, DType::BF16>>("bf16");
}

}  // namespace gradcodec::stages
