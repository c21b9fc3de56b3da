// SPDX-License-Identifier: BSD-3-Clause
// The lossless decoders fed whole and in chunks (differential): a container hands a stream over
// in chunks of a few MiB, and a decoder must give the same outcome however the stream is cut —
// the same bytes, or the same refusal. Input:
//
//   byte 0  the stage text (kTexts)
//   byte 1  bits 0–3: the chunk size (kChunks); bits 4–5: the output's room step (kRooms);
//           bit 7: ragged chunks (sizes 1 … 2·chunk drawn from a generator seeded by byte 1)
//   byte 2  bits 0–1: the element width hint (1, 2, 4, 8); bits 5 and 6 both set: the plain
//           bytes tiled to just over one 2^18-element block (encode mode only; a slow run, so
//           not a common one); bit 7: encode mode
//   then    raw mode: the stored stream itself, decoded with a bound of 1 MiB;
//           encode mode: byte 3 is the length of a mask at the end of the input (all of the
//           rest when shorter); the bytes before it are the plain bytes P. The stage's encoding
//           of P, with the mask XORed in from its start, is decoded with P's size as the bound
//           (as the container bounds a stream by its tensor's size).
//
// A finding: a crash, a sanitizer report, an exception other than gradcodec::Error; whole and
// chunked decodes that differ; a refusal other than Corrupt; output beyond the bound or other
// than the size the decoder announced; an unmasked encoding that does not decode to P.
#include "fuzz_target.hpp"

#include <gradcodec/codec.hpp>
#include <gradcodec/plugin/registry.hpp>
#include <gradcodec/rng.hpp>

#include <algorithm>
#include <iterator>
#include <memory>
#include <string>
#include <utility>

using namespace gradcodec;

namespace {

constexpr const char* kTexts[] = {
    "zsplit",          "zsplit(level=3)", "zstd",   "zstd(level=-1000, literals=huffman)", "zstd(level=1, literals=raw)",
    "lzma(preset=0)",  "lzma(preset=1)",  "shuffle", "shuffle(block=7)", "shuffle(width=4, block=3)",
};
constexpr size_t kChunks[] = {1, 2, 3, 5, 8, 13, 64, 100, 1000, 4093, 65536, 786433, 1 << 20, 7, 31, 257};
constexpr size_t kRooms[] = {0, 1, 4096, SIZE_MAX};  // 0: write() only; SIZE_MAX: all that is asked
constexpr uint8_t kWidths[] = {1, 2, 4, 8};
constexpr uint64_t kRawBound = uint64_t{1} << 20;

// Keeps what a decoder writes and checks the ByteOut protocol: begin() once, before any byte,
// announcing no more than the bound; then the bytes (room() filled in place, or write()); then
// end() with exactly the announced size when it was exact, at most it otherwise.
class Sink final : public ByteOut {
 public:
  Sink(size_t room_step, uint64_t bound) : step_(room_step), bound_(bound) {}
  void begin(uint64_t size, bool exact) override {
    if (begun_) fuzz::finding("begin() called twice");
    if (size > bound_) fuzz::finding("a decoder announced more bytes than its bound");
    begun_ = true, size_ = size, exact_ = exact;
  }
  void write(std::span<const uint8_t> b) override {
    check_open();
    bytes.insert(bytes.end(), b.begin(), b.end());
    check_size();
  }
  std::span<uint8_t> room(size_t want) override {
    check_open();
    if (step_ == 0) return {};
    base_ = bytes.size();
    bytes.resize(base_ + std::min(want, step_), uint8_t{0xee});  // unspecified content
    return {bytes.data() + base_, bytes.size() - base_};
  }
  void commit(size_t k) override {
    if (base_ + k > bytes.size()) fuzz::finding("commit() past the room");
    bytes.resize(base_ + k);
    check_size();
  }
  void end() override {
    check_open();
    ended_ = true;
    if (exact_ ? bytes.size() != size_ : bytes.size() > size_) fuzz::finding("output size differs from begin()'s");
  }
  std::vector<uint8_t> bytes;

 private:
  void check_open() const {
    if (!begun_ || ended_) fuzz::finding("bytes outside begin() … end()");
  }
  void check_size() const {
    if (bytes.size() > size_) fuzz::finding("more bytes than begin() announced");
  }
  size_t step_, base_ = 0;
  uint64_t bound_, size_ = 0;
  bool begun_ = false, ended_ = false, exact_ = false;
};

// (−1, the bytes) when the stream decodes, else (the refusal's code, nothing). The stream is
// handed over in `chunk`-byte pieces (ragged: sizes drawn from `ragged` when given), each from a
// buffer that is overwritten once write() returns, as the container's read buffer is.
std::pair<int, std::vector<uint8_t>> decode(const Lossless& l, std::span<const uint8_t> stream, uint64_t bound,
                                            size_t chunk, size_t room, Rng* ragged) {
  try {
    Sink out(room, bound);
    auto d = l.decoder(out, stream.size(), bound);
    std::vector<uint8_t> buffer;
    for (size_t at = 0; at < stream.size();) {
      const size_t want = ragged ? 1 + static_cast<size_t>(ragged->below(2 * chunk)) : chunk;
      const size_t k = std::min(want, stream.size() - at);
      buffer.assign(stream.begin() + static_cast<std::ptrdiff_t>(at), stream.begin() + static_cast<std::ptrdiff_t>(at + k));
      d->write(buffer);
      std::fill(buffer.begin(), buffer.end(), uint8_t{0xa5});
      at += k;
    }
    d->end();
    return {-1, std::move(out.bytes)};
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Corrupt) fuzz::finding("a decoder refused a stream with a code other than Corrupt");
    return {static_cast<int>(e.code()), {}};
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const Pipeline pipeline = Pipeline::parse(kTexts[data[0] % std::size(kTexts)]);
  const StageSpec& spec = pipeline.stages().back();
  const std::unique_ptr<Stage> stage = find_stage(spec.name)->make(spec.params, spec.version);
  const auto& l = static_cast<const Lossless&>(*stage);
  const size_t chunk = kChunks[data[1] & 15], room = kRooms[(data[1] >> 4) & 3];
  const uint8_t width = kWidths[data[2] & 3];
  const bool encode_mode = data[2] & 0x80, tile = (data[2] & 0x60) == 0x60;

  std::vector<uint8_t> stream, plain;
  uint64_t bound = kRawBound;
  bool masked = false;
  if (!encode_mode) {
    stream.assign(data + 3, data + size);
  } else {
    if (size < 4) return 0;
    const std::span<const uint8_t> rest(data + 4, size - 4);
    const size_t cut = rest.size() - std::min<size_t>(rest.size(), data[3]);
    plain.assign(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(cut));
    if (tile && !plain.empty()) {  // just over one zsplit block: a second block and a tail
      const size_t want = ((size_t{1} << 18) + 37) * width + 3;
      plain.resize(want);
      for (size_t i = cut; i < want; ++i) plain[i] = plain[i % cut];
    }
    try {
      stream = l.encode(plain, width);
    } catch (const Error&) {
      fuzz::finding("encoding bytes failed");
    }
    const std::span<const uint8_t> mask = rest.subspan(cut);
    for (size_t i = 0; i < std::min(mask.size(), stream.size()); ++i) {
      stream[i] ^= mask[i];
      masked |= mask[i] != 0;
    }
    bound = plain.size();
  }

  const auto whole = decode(l, stream, bound, std::max<size_t>(stream.size(), 1), room, nullptr);
  Rng rng(data[1], 0, 0, RngPurpose::Test);
  const auto cut = decode(l, stream, bound, chunk, room, data[1] & 0x80 ? &rng : nullptr);
  if (whole != cut) fuzz::finding("the stream decodes differently whole and in chunks");
  if (whole.first == -1 && whole.second.size() > bound) fuzz::finding("a decode produced more than its bound");
  if (encode_mode && !masked && (whole.first != -1 || whole.second != plain))
    fuzz::finding("an encoding did not decode to its input");
  return 0;
}
