#include "lossless/zstd.hpp"

#include "core/pages.hpp"

#include <zstd.h>

namespace gradcodec::stages {

namespace {

class Zstd final : public Lossless {
 public:
  explicit Zstd(int level) : level_(level) {}
  std::vector<uint8_t> encode(std::span<const uint8_t> in, uint8_t) const override {
    std::vector<uint8_t> out(ZSTD_compressBound(in.size()));
    size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), level_);
    if (ZSTD_isError(n)) fail(ErrorCode::Internal, std::string("zstd: ") + ZSTD_getErrorName(n));
    out.resize(n);
    out.shrink_to_fit();  // the bound's spare capacity would stay allocated with the record
    return out;
  }
  std::vector<uint8_t> decode(std::span<const uint8_t> in, uint64_t max_out) const override {
    unsigned long long size = ZSTD_getFrameContentSize(in.data(), in.size());
    if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN)
      fail(ErrorCode::Corrupt, "zstd: not a zstd frame with a content size");
    if (size > max_out)
      fail(ErrorCode::Corrupt, "zstd: frame claims " + std::to_string(size) +
                                   " bytes, more than the tensor allows (" + std::to_string(max_out) + ")");
    auto out = zeroed_fresh<uint8_t>(size);
    size_t n = ZSTD_decompress(out.data(), out.size(), in.data(), in.size());
    if (ZSTD_isError(n) || n != size) fail(ErrorCode::Corrupt, "zstd: corrupt frame");
    return out;
  }

 private:
  int level_;
};

}  // namespace

std::unique_ptr<Stage> make_zstd(const Params& p, uint32_t) {
  auto s = std::make_unique<Zstd>(static_cast<int>(p.integer("level")));
  s->only_stream = p.text("stream") == "all" ? "" : p.text("stream");
  return s;
}

}  // namespace gradcodec::stages
