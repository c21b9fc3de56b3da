// SPDX-License-Identifier: BSD-3-Clause
#include "quantize/fpzip.hpp"

#include "base/checksum.hpp"
#include "quantize/codes.hpp"
#include "quantize/fpzip_decode.hpp"

#include <fpzip.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

namespace gradcodec::stages {

namespace {

constexpr uint64_t kChunk = 65536;  // values per fpzip stream
// fpzip's coded size per value at worst (incompressible floats, measured under 4.1): the stream's
// reservation; an overrun only makes the vector grow.
constexpr double kBytesPerValue = 4.2;

// fpzip 1.3 reports errors through fpzip_errno, one process-wide variable that every call of
// the library writes: calls (encoding only; decoding does not use the library) are serialised so that threads encoding tensors at once do not race.
std::mutex& fpzip_lock() {
  static std::mutex m;
  return m;
}

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
uint64_t get_le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

class Fpzip final : public Quantizer {
 public:
  explicit Fpzip(int precision) : precision_(precision) {}
  // Its stream, reserved at the bound; the one-chunk buffer is a constant 512 KiB at most.
  double work_per_element(const TensorInfo&, double kept) const noexcept override { return kBytesPerValue * kept + 0.01; }

  void encode(Payload& p, Streams& out, const StageContext&) override {
    const std::span<const float> v = codes::coded_values(p);
    Stream& s = out.add(kValueStream, 1);
    if (v.empty()) return;
    std::vector<uint8_t>& w = s.bytes;
    // Reserved at the bound (never moved while it grows; pages touched only as written).
    w.reserve(8 + static_cast<size_t>((v.size() + kChunk - 1) / kChunk) * 4 + static_cast<size_t>(kBytesPerValue * double(v.size())) + 1024);
    w.assign(8, 0);
    // Room for one chunk (fpzip's output of incompressible floats stays within about 4.1 bytes a
    // value), no more than the values need: a bias of ten values does not zero 512 KiB.
    std::vector<uint8_t> buf(std::min<uint64_t>(kChunk, v.size()) * 8 + 1024);
    for (uint64_t first = 0; first < v.size(); first += kChunk) {
      const uint64_t n = std::min<uint64_t>(kChunk, v.size() - first);
      size_t bytes = 0;
      {
        std::lock_guard<std::mutex> lock(fpzip_lock());
        FPZ* fpz = fpzip_write_to_buffer(buf.data(), buf.size());
        if (!fpz) fail(ErrorCode::Internal, "fpzip: cannot open a stream");
        fpz->type = FPZIP_TYPE_FLOAT, fpz->prec = precision_;
        fpz->nx = static_cast<int>(n), fpz->ny = 1, fpz->nz = 1, fpz->nf = 1;
        bytes = fpzip_write(fpz, v.data() + first);
        fpzip_write_close(fpz);
        if (bytes == 0) fail(ErrorCode::Internal, std::string("fpzip: ") + fpzip_errstr[fpzip_errno]);
      }
      put_u32(w, static_cast<uint32_t>(bytes));
      w.insert(w.end(), buf.begin(), buf.begin() + static_cast<ptrdiff_t>(bytes));
    }
    const uint64_t h = xxh3(w.data() + 8, w.size() - 8);
    for (int i = 0; i < 8; ++i) w[i] = static_cast<uint8_t>(h >> (8 * i));
  }

  // Every length is checked against the stream and the hash against its bytes; each chunk is
  // decoded by our bounds-checked decoder (fpzip_decode.hpp; libfpzip's own decoder reads and
  // indexes without bounds on a crafted stream), and must end exactly where its length says.
  void decode(Payload& p, const Streams& in, const StageContext&) override {
    const std::span<const uint8_t> b = in.get(kValueStream);
    const uint64_t count = p.value_count();
    p.values.clear();
    if (count == 0) {
      if (!b.empty()) fail(ErrorCode::Corrupt, "fpzip: value stream holds " + std::to_string(b.size()) + " bytes for no values");
      return;
    }
    if (b.size() < 8) fail(ErrorCode::Corrupt, "fpzip: value stream of " + std::to_string(b.size()) + " bytes has no hash");
    if (xxh3(b.data() + 8, b.size() - 8) != get_le(b.data(), 8))
      fail(ErrorCode::Corrupt, "fpzip: value stream does not match its hash");
    const uint64_t chunks = (count + kChunk - 1) / kChunk;
    // The chunk lengths first, so that a short stream is refused before anything is allocated.
    std::vector<std::span<const uint8_t>> parts;
    uint64_t pos = 8;
    for (uint64_t c = 0; c < chunks; ++c) {
      if (b.size() - pos < 4) fail(ErrorCode::Corrupt, "fpzip: value stream ends before chunk " + std::to_string(c));
      const uint64_t len = get_le(b.data() + pos, 4);
      pos += 4;
      if (len < 4 || len > b.size() - pos)
        fail(ErrorCode::Corrupt, "fpzip: chunk " + std::to_string(c) + " claims " + std::to_string(len) + " bytes, " +
                                     std::to_string(b.size() - pos) + " left");
      parts.push_back(b.subspan(pos, len));
      pos += len;
    }
    if (pos != b.size())
      fail(ErrorCode::Corrupt, "fpzip: " + std::to_string(b.size() - pos) + " bytes after the last chunk");
    p.values.resize(count);
    for (uint64_t c = 0; c < chunks; ++c) {
      const uint64_t n = std::min<uint64_t>(kChunk, count - c * kChunk);
      const size_t read = fpzip::decode_floats(parts[c], precision_, std::span<float>(p.values.data() + c * kChunk, n));
      if (read != parts[c].size())
        fail(ErrorCode::Corrupt, "fpzip: chunk " + std::to_string(c) + " decodes from " + std::to_string(read) +
                                     " bytes, its length says " + std::to_string(parts[c].size()));
    }
  }

 private:
  int precision_;  // 0: full (lossless)
};

}  // namespace

std::unique_ptr<Stage> make_fpzip(const Params& p, uint32_t) {
  const auto prec = p.integer("precision");
  if (prec == 1) fail(ErrorCode::Usage, "fpzip: precision must be 0 (lossless) or 2..32 bits, got 1");
  return std::make_unique<Fpzip>(static_cast<int>(prec));
}

}  // namespace gradcodec::stages
