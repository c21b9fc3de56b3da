// SPDX-License-Identifier: BSD-3-Clause
#include "lossless/lzma.hpp"

#include "lossless/whole.hpp"

#include <lzma.h>

namespace gradcodec::stages {

namespace {

// The preset's options with the dictionary capped at `size` (rounded up to a power of two, at
// least LZMA_DICT_SIZE_MIN): a raw LZMA2 stream never refers further back than its own length,
// so a larger dictionary only costs its set-up (per stream, on both sides; docs/performance.md,
// "Figures behind design choices") and changes no byte of the output.
lzma_options_lzma options_for(uint32_t preset, uint64_t size, bool for_decode) {
  lzma_options_lzma opt{};
  if (lzma_lzma_preset(&opt, preset))
    fail(for_decode ? ErrorCode::Corrupt : ErrorCode::Usage, "lzma: bad preset " + std::to_string(preset));
  uint64_t dict = LZMA_DICT_SIZE_MIN;
  while (dict < size && dict < opt.dict_size) dict *= 2;
  if (dict < opt.dict_size) opt.dict_size = static_cast<uint32_t>(dict);
  return opt;
}

class Encode final : public WholeInput {
 public:
  Encode(ByteOut& out, uint64_t size, uint32_t preset) : WholeInput(out, size, "lzma"), preset_(preset) {
    out_.begin(bound(size), false);
  }

 private:
  static uint64_t bound(uint64_t size) { return 11 + size + size / 2 + 1024; }
  void done(std::span<const uint8_t> in) override {
    std::vector<uint8_t> out;
    ByteWriter w(out);
    w.u8(static_cast<uint8_t>(preset_));
    w.varint(in.size());
    lzma_options_lzma opt = options_for(preset_, in.size(), false);
    lzma_filter filters[2] = {{LZMA_FILTER_LZMA2, &opt}, {LZMA_VLI_UNKNOWN, nullptr}};
    const size_t head = out.size();
    out.resize(head + in.size() + in.size() / 2 + 1024);
    size_t pos = head;
    const lzma_ret r = lzma_raw_buffer_encode(filters, nullptr, in.data(), in.size(), out.data(), &pos, out.size());
    if (r != LZMA_OK) fail(ErrorCode::Internal, "lzma: encoder failed (" + std::to_string(r) + ")");
    out_.write({out.data(), pos});
  }
  uint32_t preset_;
};

class Decode final : public WholeInput {
 public:
  Decode(ByteOut& out, uint64_t size, uint64_t max_out) : WholeInput(out, size, "lzma"), max_out_(max_out) {}

 private:
  void done(std::span<const uint8_t> in) override {
    ByteReader r(in, "lzma stream");
    const uint8_t preset = r.u8();
    if (preset > 9) fail(ErrorCode::Corrupt, "lzma: bad preset byte " + std::to_string(preset));
    const uint64_t size = r.varint();
    if (size > max_out_)
      fail(ErrorCode::Corrupt, "lzma: stream claims " + std::to_string(size) +
                                   " bytes, more than the tensor allows (" + std::to_string(max_out_) + ")");
    lzma_options_lzma opt = options_for(preset, size, true);
    lzma_filter filters[2] = {{LZMA_FILTER_LZMA2, &opt}, {LZMA_VLI_UNKNOWN, nullptr}};
    const auto body = r.bytes(r.remaining());
    std::vector<uint8_t> out(static_cast<size_t>(size) + 1);  // +1: liblzma wants room even for empty output
    size_t in_pos = 0, out_pos = 0;
    const lzma_ret ret = lzma_raw_buffer_decode(filters, nullptr, body.data(), &in_pos, body.size(), out.data(),
                                                &out_pos, size == 0 ? 1 : static_cast<size_t>(size));
    if ((ret != LZMA_OK && ret != LZMA_STREAM_END) || out_pos != size || in_pos != body.size())
      fail(ErrorCode::Corrupt, "lzma: corrupt stream");
    out_.begin(size, true);
    if (size) out_.write({out.data(), static_cast<size_t>(size)});
  }
  uint64_t max_out_;
};

class Lzma final : public Lossless {
 public:
  explicit Lzma(uint32_t preset) : preset_(preset) {}
  std::unique_ptr<ByteOut> encoder(ByteOut& out, uint64_t size, uint8_t) const override {
    return std::make_unique<Encode>(out, size, preset_);
  }
  std::unique_ptr<ByteOut> decoder(ByteOut& out, uint64_t size, uint64_t max_out) const override {
    return std::make_unique<Decode>(out, size, max_out);
  }

 private:
  uint32_t preset_;
};

}  // namespace

std::unique_ptr<Stage> make_lzma(const Params& p, uint32_t) {
  auto s = std::make_unique<Lzma>(static_cast<uint32_t>(p.integer("preset")));
  s->only_stream = p.text("stream") == "all" ? "" : p.text("stream");
  return s;
}

}  // namespace gradcodec::stages
