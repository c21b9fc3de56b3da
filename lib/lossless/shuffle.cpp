#include "lossless/shuffle.hpp"

namespace gradcodec::stages {

namespace {

class Shuffle final : public Lossless {
 public:
  explicit Shuffle(unsigned width) : width_(width) {}
  std::vector<uint8_t> encode(std::span<const uint8_t> in, uint8_t hint) const override {
    unsigned w = width_ ? width_ : hint;
    if (w == 0) w = 1;
    std::vector<uint8_t> out(in.size() + 1);
    out[0] = static_cast<uint8_t>(w);
    const size_t n = in.size() / w;
    uint8_t* o = out.data() + 1;
    for (unsigned j = 0; j < w; ++j)
      for (size_t i = 0; i < n; ++i) *o++ = in[i * w + j];
    for (size_t i = n * w; i < in.size(); ++i) *o++ = in[i];
    return out;
  }
  std::vector<uint8_t> decode(std::span<const uint8_t> in, uint64_t max_out) const override {
    if (in.empty()) fail(ErrorCode::Corrupt, "shuffle: empty stream");
    unsigned w = in[0];
    if (w == 0) fail(ErrorCode::Corrupt, "shuffle: element width 0");
    const size_t size = in.size() - 1;
    if (size > max_out) fail(ErrorCode::Corrupt, "shuffle: stream larger than the tensor allows");
    std::vector<uint8_t> out(size);
    const size_t n = size / w;
    const uint8_t* s = in.data() + 1;
    for (unsigned j = 0; j < w; ++j)
      for (size_t i = 0; i < n; ++i) out[i * w + j] = *s++;
    for (size_t i = n * w; i < size; ++i) out[i] = *s++;
    return out;
  }

 private:
  unsigned width_;
};

}  // namespace

std::unique_ptr<Stage> make_shuffle(const Params& p, uint32_t) {
  auto s = std::make_unique<Shuffle>(static_cast<unsigned>(p.integer("width")));
  s->only_stream = p.text("stream") == "all" ? "" : p.text("stream");
  return s;
}

}  // namespace gradcodec::stages
