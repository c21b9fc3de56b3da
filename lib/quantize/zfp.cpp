// SPDX-License-Identifier: BSD-3-Clause
#include "quantize/zfp.hpp"

#include "quantize/codes.hpp"

#include <zfp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace gradcodec::stages {

namespace {

enum class Mode { Rate, Precision, Accuracy, Reversible };

struct StreamDeleter {
  void operator()(zfp_stream* z) const noexcept { zfp_stream_close(z); }
};
struct BitsDeleter {
  void operator()(bitstream* b) const noexcept { stream_close(b); }
};
struct FieldDeleter {
  void operator()(zfp_field* f) const noexcept { zfp_field_free(f); }
};

class Zfp final : public Quantizer {
 public:
  Zfp(Mode mode, double rate, unsigned precision, double tolerance)
      : mode_(mode), rate_(rate), precision_(precision), tolerance_(tolerance) {}
  // Its stream, at zfp's bound (encode writes into that much, then cuts it): bytes per value.
  double work_per_element(const TensorInfo&, double kept) const noexcept override {
    const double bits_per_block = mode_ == Mode::Rate ? std::max(9.0, std::floor(4 * rate_ + 0.5)) : 146;
    return bits_per_block / 32 * kept + 0.01;
  }

  void encode(Payload& p, Streams& out, const StageContext&) override {
    const std::span<const float> v = codes::coded_values(p);
    Stream& s = out.add(kValueStream, 1);
    if (v.empty()) return;
    // zfp reads the array through the field and does not write it.
    std::unique_ptr<zfp_field, FieldDeleter> field(
        zfp_field_1d(const_cast<float*>(v.data()), zfp_type_float, v.size()));
    auto zs = configured();
    if (!field || !zs) fail(ErrorCode::Internal, "zfp: cannot allocate a stream");
    // Written straight into the stream: zfp's bound for a 1-D float array is round(4·rate) bits
    // per block at fixed rate, else 146 bits per block (about 4.6 bytes a value), plus a header's
    // worth; the stream is cut to its last byte after.
    const size_t cap = zfp_stream_maximum_size(zs.get(), field.get()) + 16;  // whole words past it
    s.bytes.resize(cap);
    std::unique_ptr<bitstream, BitsDeleter> bits(stream_open(s.bytes.data(), cap));
    if (!bits) fail(ErrorCode::Internal, "zfp: cannot allocate a bit stream");
    zfp_stream_set_bit_stream(zs.get(), bits.get());
    zfp_stream_rewind(zs.get());
    // Block by block as zfp_compress does for a contiguous 1-D array, so that the stream can end
    // at its last bit's byte: zfp_compress would pad it to the library's word size (8 or 64 bits
    // depending on how zfp was built), which is not part of the wire.
    const uint64_t n = v.size(), full = n / 4;
    for (uint64_t k = 0; k < full; ++k) zfp_encode_block_float_1(zs.get(), v.data() + 4 * k);
    if (n % 4) zfp_encode_partial_block_strided_float_1(zs.get(), v.data() + 4 * full, n % 4, 1);
    const uint64_t used = (stream_wtell(bits.get()) + 7) / 8;
    stream_flush(bits.get());
    if (used > cap) fail(ErrorCode::Internal, "zfp: compression overran its buffer");
    s.bytes.resize(used);
  }

  // Decoded block by block (as zfp_decompress does) from a copy of the stream followed by
  // ZFP_MAX_BITS of zero padding: a block never reads more than maxbits ≤ ZFP_MAX_BITS bits, so a
  // hostile stream cannot make zfp read outside the copy; the read position is checked after
  // every block against the stream's own end.
  void decode(Payload& p, const Streams& in, const StageContext&) override {
    const std::span<const uint8_t> b = in.get(kValueStream);
    const uint64_t count = p.value_count();
    p.values.clear();
    if (count == 0) {
      if (!b.empty()) fail(ErrorCode::Corrupt, "zfp: value stream holds " + std::to_string(b.size()) + " bytes for no values");
      return;
    }
    auto zs = configured();
    if (!zs) fail(ErrorCode::Internal, "zfp: cannot allocate a stream");
    const uint64_t blocks = (count + 3) / 4;
    if (mode_ == Mode::Rate) {
      // Every block takes exactly maxbits bits; the stream ends at the next whole byte.
      const uint64_t expected = (blocks * zs->maxbits + 7) / 8;
      if (b.size() != expected)
        fail(ErrorCode::Corrupt, "zfp: value stream holds " + std::to_string(b.size()) + " bytes, expected " +
                                     std::to_string(expected) + " for " + std::to_string(count) + " values at fixed rate");
    } else {
      // At least one bit per block, at most maxbits, to the next whole byte.
      const uint64_t most = (blocks * zs->maxbits + 7) / 8;
      if (b.size() > most || b.size() * 8 < blocks)
        fail(ErrorCode::Corrupt, "zfp: value stream holds " + std::to_string(b.size()) + " bytes, not a zfp stream of " +
                                     std::to_string(count) + " values");
    }
    constexpr size_t kPadWords = ZFP_MAX_BITS / 64 + 2;
    std::vector<uint64_t> words((b.size() + 7) / 8 + kPadWords, 0);
    std::memcpy(words.data(), b.data(), b.size());
    std::unique_ptr<bitstream, BitsDeleter> bits(stream_open(words.data(), words.size() * 8));
    if (!bits) fail(ErrorCode::Internal, "zfp: cannot allocate a bit stream");
    zfp_stream_set_bit_stream(zs.get(), bits.get());
    zfp_stream_rewind(zs.get());
    const uint64_t end = static_cast<uint64_t>(b.size()) * 8;
    p.values.resize(count);
    float* out = p.values.data();
    const uint64_t full = count / 4;
    for (uint64_t k = 0; k <= full; ++k) {
      if (k < full)
        zfp_decode_block_float_1(zs.get(), out + 4 * k);
      else if (count % 4)
        zfp_decode_partial_block_strided_float_1(zs.get(), out + 4 * k, count % 4, 1);
      else
        break;
      if (stream_rtell(bits.get()) > end)
        fail(ErrorCode::Corrupt, "zfp: value stream ends inside block " + std::to_string(k) + " of " +
                                     std::to_string(blocks));
    }
    const uint64_t ends = (stream_rtell(bits.get()) + 7) / 8;
    if (ends != b.size())
      fail(ErrorCode::Corrupt, "zfp: value stream holds " + std::to_string(b.size()) + " bytes, its blocks end at byte " +
                                   std::to_string(ends));
  }

 private:
  std::unique_ptr<zfp_stream, StreamDeleter> configured() const {
    std::unique_ptr<zfp_stream, StreamDeleter> zs(zfp_stream_open(nullptr));
    if (!zs) return zs;
    switch (mode_) {
      case Mode::Rate: zfp_stream_set_rate(zs.get(), rate_, zfp_type_float, 1, zfp_false); break;
      case Mode::Precision: zfp_stream_set_precision(zs.get(), precision_); break;
      case Mode::Accuracy: zfp_stream_set_accuracy(zs.get(), tolerance_); break;
      case Mode::Reversible: zfp_stream_set_reversible(zs.get()); break;
    }
    return zs;
  }

  Mode mode_;
  double rate_;
  unsigned precision_;
  double tolerance_;
};

}  // namespace

std::unique_ptr<Stage> make_zfp(const Params& p, uint32_t) {
  const std::string& m = p.text("mode");
  const Mode mode = m == "rate" ? Mode::Rate
                    : m == "precision" ? Mode::Precision
                    : m == "accuracy" ? Mode::Accuracy
                                      : Mode::Reversible;
  // Exactly the parameter of the mode: another one would be silently ignored.
  const char* wanted = mode == Mode::Rate ? "rate" : mode == Mode::Precision ? "precision" : mode == Mode::Accuracy ? "tolerance" : nullptr;
  for (const char* name : {"rate", "precision", "tolerance"}) {
    const bool want = wanted && std::string(name) == wanted;
    if (want && !p.has(name)) fail(ErrorCode::Usage, "zfp: mode=" + m + " needs " + name);
    if (!want && p.has(name))
      fail(ErrorCode::Usage, std::string("zfp: ") + name + " does not apply to mode=" + m +
                                 (wanted ? std::string(" (give ") + wanted + ")" : std::string(" (no parameter)")));
  }
  return std::make_unique<Zfp>(mode, mode == Mode::Rate ? p.num("rate") : 0,
                               mode == Mode::Precision ? static_cast<unsigned>(p.integer("precision")) : 0,
                               mode == Mode::Accuracy ? p.num("tolerance") : 0);
}

}  // namespace gradcodec::stages
