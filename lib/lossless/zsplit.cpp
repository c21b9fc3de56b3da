// SPDX-License-Identifier: BSD-3-Clause
#include "lossless/zsplit.hpp"

#include "lossless/shuffle.hpp"
#include "lossless/whole.hpp"
#include "lossless/zsplit_planes.hpp"
#include "lossless/zstd.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>

namespace gradcodec::stages {

namespace {

constexpr const char* kName = "zsplit";
constexpr uint64_t kRun = 2048;  // elements split or joined at a time (a multiple of 8: whole bitmap bytes)
constexpr int kBitmapLevel = 1;  // the bitmap's zero runs are what a match finder takes
constexpr uint64_t kBlock = uint64_t{1} << 18;  // elements per block: each block's planes stay in cache

// Streams of other element widths (f16, bf16, f64 values; byte streams) are coded with the chain
// the lossless preset used before this stage, shuffle(block=262144) | zstd(level=-1000,
// literals=huffman), inside this stage's framing: f64 converted from f32, for one, has zero low
// mantissa bytes that zstd takes and a split would store.
constexpr uint8_t kSplit = 4, kChained = 0;  // the stream's mode byte

struct Chain {
  std::unique_ptr<Lossless> shuffle = shuffle_coder(262144), zstd = zstd_coder(-1000, true);
  std::vector<const Lossless*> stages{shuffle.get(), zstd.get()};
};
const std::vector<const Lossless*>& other_widths() {
  static const Chain chain;
  return chain.stages;
}

constexpr unsigned W = 4;  // the element width split: f32

uint64_t count_nonzero(const uint8_t* x, uint64_t m) {
  uint64_t k = 0;
  for (uint64_t i = 0; i < m; ++i) {
    uint32_t v;
    std::memcpy(&v, x + W * i, 4);
    k += v != 0;
  }
  return k;
}

class Encode final : public WholeInput {
 public:
  Encode(ByteOut& out, uint64_t size, uint8_t width, int level)
      : WholeInput(out, size, kName), width_(width), level_(level) {
    // Per block: its count, low bytes and two zstd frames (each at most its bound); the tail.
    const uint64_t n = size / w_, blocks = n / kBlock + 1;
    out_.begin(11 + (w_ - 1) * n + blocks * (30 + 2 * 1024) + (n / 8 + 1) * 2 + n + n / 64 + w_, false);
  }

 private:
  void done(std::span<const uint8_t> in) override {
    const uint64_t size = in.size(), n = size / w_;
    std::vector<uint8_t> head;
    ByteWriter hw(head);
    hw.varint(size);
    hw.u8(width_ == 4 ? kSplit : kChained);
    out_.write(head);
    if (width_ != 4) {
      std::vector<uint8_t> coded;
      Lossless::encode_chain(other_widths(), in, width_, coded);
      out_.write(coded);
      return;
    }
    std::vector<uint8_t> bits, high;
    const size_t room = (w_ - 1) * kRun + w_;
    const auto spare = std::make_unique_for_overwrite<uint8_t[]>(room);
    for (uint64_t first = 0; first < n; first += kBlock) {
      const uint64_t bn = std::min(kBlock, n - first);
      const uint8_t* x = in.data() + w_ * first;
      const uint64_t k = count_nonzero(x, bn);
      head.clear();
      ByteWriter(head).varint(k);
      out_.write(head);
      bits.assign((bn + 7) / 8, 0);
      high.resize(k);
      uint8_t* hi = high.data();
      for (uint64_t i = 0; i < bn; i += kRun) {
        const uint64_t m = std::min(kRun, bn - i);
        const size_t want = (w_ - 1) * m + w_;
        const std::span<uint8_t> dst = out_.room(want);
        const bool own = dst.size() < want;
        if (own && !dst.empty()) out_.commit(0);
        const size_t got = zsplit::split_run(x + w_ * i, m, bits.data() + i / 8, hi, own ? spare.get() : dst.data());
        if (own) out_.write({spare.get(), got});
        else out_.commit(got);
      }
      frame(bits, kBitmapLevel);
      frame(high, level_);
    }
    out_.write(in.subspan(w_ * n));
  }
  void frame(const std::vector<uint8_t>& bytes, int level) {
    const std::vector<uint8_t> z = zstd_coder(level, true)->encode(bytes, 1);
    std::vector<uint8_t> len;
    ByteWriter(len).varint(z.size());
    out_.write(len);
    out_.write(z);
  }
  static constexpr unsigned w_ = W;
  uint8_t width_;
  int level_;
};

// The decoder reads its input as it comes (the container hands a stream over in chunks of a few
// MiB) and decodes each block where it lies in the chunk. Only a block that a chunk boundary cuts
// is copied, into held_: its first part, then no more of the next chunk than it needs (so held_
// ends where the block does), and decoded there. Blocks are joined into the next ByteOut's room.
class Decode final : public ByteOut {
 public:
  Decode(ByteOut& out, uint64_t size, uint64_t max_out) : out_(out), size_(size), max_out_(max_out) {}
  void begin(uint64_t, bool) override {}
  void write(std::span<const uint8_t> bytes) override {
    got_ += bytes.size();
    if (got_ > size_) fail(ErrorCode::Internal, std::string(kName) + ": more input than announced");
    std::span<const uint8_t> in = bytes;
    while (!held_.empty() && !in.empty()) {
      const size_t take = chained_ ? in.size() : std::min<size_t>(in.size(), need_ - held_.size());
      if (take == 0) fail(ErrorCode::Internal, std::string(kName) + ": no progress on a held block");  // (never)
      held_.insert(held_.end(), in.begin(), in.begin() + static_cast<std::ptrdiff_t>(take));
      in = in.subspan(take);
      if (chained_) return;
      const size_t used = parse(held_);
      held_.erase(held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(used));
      if (need_ != SIZE_MAX) need_ -= used;
    }
    if (in.empty()) return;
    const size_t used = chained_ ? 0 : parse(in);
    held_.assign(in.begin() + static_cast<std::ptrdiff_t>(used), in.end());
    if (need_ != SIZE_MAX) need_ -= used;
  }
  void end() override {
    if (got_ != size_) fail(ErrorCode::Internal, std::string(kName) + ": input ended early");
    if (chained_) {  // the chain's output of the rest of the stream, whole
      std::vector<uint8_t> out;
      Lossless::decode_chain(other_widths(), held_.size(), [&](ByteOut& o) { if (!held_.empty()) o.write(held_); },
                             out_size_ + 16, out);  // + shuffle's width byte; checked below
      if (out.size() != out_size_)
        corrupt("the chained stream holds " + std::to_string(out.size()) + " bytes, not " + std::to_string(out_size_));
      held_.clear(), tail_done_ = true;
      out_.begin(out_size_, true);
      if (!out.empty()) out_.write(out);
    }
    if (!have_size_ || first_ < n_ || !tail_done_) corrupt("stream ends early");
    if (!held_.empty()) corrupt("bytes after the stream");
    out_.end();
  }

 private:
  // Decodes the header, every block and the tail that `buf` holds whole, from its start; returns
  // the bytes they took. need_ is then the length `buf` must have for the next of them.
  size_t parse(std::span<const uint8_t> buf) {
    size_t pos = 0;
    need_ = SIZE_MAX;  // when the stream is whole: any byte more is refused at the end
    if (!have_size_) {
      uint64_t size = 0;
      const size_t k = peek_varint(buf, pos, size);
      if (k == 0) return 0;
      if (size > max_out_)
        fail(ErrorCode::Corrupt, std::string(kName) + ": stream claims " + std::to_string(size) +
                                     " bytes, more than the tensor allows (" + std::to_string(max_out_) + ")");
      if (buf.size() < k + 1) {
        need_ = k + 1;  // the mode byte is still to come: read the size again then
        return 0;
      }
      const uint8_t mode = buf[k];
      if (mode != kSplit && mode != kChained) corrupt("unknown mode " + std::to_string(mode));
      // Every block takes at least 3 bytes (its count and two frame lengths): bound before output.
      if (mode == kSplit && size / w_ / kBlock > size_ / 3)
        corrupt("stream too short for " + std::to_string(size / w_) + " elements");
      pos = k + 1;
      chained_ = mode == kChained, out_size_ = size, n_ = chained_ ? 0 : size / w_, have_size_ = true;
      if (chained_) return pos;  // decoded whole at the end
      out_.begin(size, true);
    }
    if (chained_) return pos;
    while (first_ < n_) {
      const size_t k = block(buf, pos);
      if (k == 0) return pos;
      pos += k;
      first_ += std::min(kBlock, n_ - first_);
    }
    if (!tail_done_) {
      const size_t t = static_cast<size_t>(out_size_ % w_);
      if (buf.size() - pos < t) {
        need_ = pos + t;
        return pos;
      }
      if (t) out_.write(buf.subspan(pos, t));
      pos += t;
      tail_done_ = true;
    }
    return pos;
  }
  // The varint at buf[at...]: its length in bytes; 0 while it is not all in (need_ is then set).
  size_t peek_varint(std::span<const uint8_t> buf, size_t at, uint64_t& v) {
    v = 0;
    for (size_t i = 0; i < 10; ++i) {
      if (at + i >= buf.size()) {
        need_ = at + i + 1;
        return 0;
      }
      const uint8_t b = buf[at + i];
      if (i == 9 && b > 1) corrupt("varint overflows 64 bits");
      v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
      if (!(b & 0x80)) return i + 1;
    }
    corrupt("varint longer than 10 bytes");
  }
  // The block at first_, from buf[pos]: the bytes it took once they are all in `buf` (and it is
  // decoded), else 0 with need_ set.
  size_t block(std::span<const uint8_t> buf, size_t pos) {
    const uint64_t bn = std::min(kBlock, n_ - first_);
    const size_t avail = buf.size() - pos;
    const auto short_by = [&](size_t at, uint64_t more) {  // the block's bytes [0, at + more) are not all in
      if (avail - at >= more) return false;
      need_ = pos + at + static_cast<size_t>(more);
      return true;
    };
    uint64_t k = 0;
    size_t at = peek_varint(buf, pos, k);
    if (at == 0) return 0;
    if (k > bn) corrupt("block counts " + std::to_string(k) + " non-zero elements of " + std::to_string(bn));
    if (short_by(at, (w_ - 1) * k)) return 0;
    const size_t low_at = at;
    at += static_cast<size_t>((w_ - 1) * k);
    // A varint length and the zstd frame after it, at `at`: the frame's bytes (at advanced past
    // them) once they are all in `buf`, else false.
    const uint8_t* base = buf.data() + pos;
    const auto frame_at = [&](const char* what, std::span<const uint8_t>& frame) {
      uint64_t len = 0;
      const size_t v = peek_varint(buf, pos + at, len);
      if (v == 0) return false;
      at += v;
      if (len > size_) corrupt(std::string(what) + " frame longer than the stream");
      if (short_by(at, len)) return false;
      frame = {base + at, static_cast<size_t>(len)};
      at += static_cast<size_t>(len);
      return true;
    };
    std::span<const uint8_t> bits_frame, high_frame;
    if (!frame_at("bitmap", bits_frame) || !frame_at("high-byte", high_frame)) return 0;

    const std::vector<uint8_t> bits = unframe(bits_frame, (bn + 7) / 8, "bitmap");
    const std::vector<uint8_t> high = unframe(high_frame, k, "high bytes");
    const uint64_t ones = zsplit::count_ones(bits.data(), bits.size());
    if (ones != k) corrupt("bitmap marks " + std::to_string(ones) + " non-zero elements, the block " + std::to_string(k));
    if (bn % 8 != 0 && (bits.back() >> (bn % 8)) != 0) corrupt("bitmap has bits past the last word");
    const uint8_t* lo = base + low_at;
    const uint8_t* const lo_end = lo + (w_ - 1) * k;
    const uint8_t* hi = high.data();
    if (!spare_) spare_ = std::make_unique_for_overwrite<uint8_t[]>(w_ * kRun);
    for (uint64_t i = 0; i < bn; i += kRun) {
      const uint64_t m = std::min(kRun, bn - i);
      const std::span<uint8_t> dst = out_.room(w_ * m);
      const bool own = dst.size() < w_ * m;
      if (own && !dst.empty()) out_.commit(0);
      zsplit::join_run(bits.data() + i / 8, m, lo, lo_end, hi, own ? spare_.get() : dst.data());
      if (own) out_.write({spare_.get(), w_ * m});
      else out_.commit(w_ * m);
    }
    return at;
  }
  // A zstd frame that must hold exactly `expect` bytes.
  std::vector<uint8_t> unframe(std::span<const uint8_t> z, uint64_t expect, const char* what) const {
    std::vector<uint8_t> out = zstd_coder(1, false)->decode(z, expect);
    if (out.size() != expect)
      corrupt(std::string(what) + " hold " + std::to_string(out.size()) + " bytes, not " + std::to_string(expect));
    return out;
  }
  [[noreturn]] static void corrupt(const std::string& why) { fail(ErrorCode::Corrupt, std::string(kName) + ": " + why); }

  ByteOut& out_;
  uint64_t size_, max_out_, got_ = 0;
  std::vector<uint8_t> held_;  // the start of a block (or of the header, or the tail) a chunk cut
  size_t need_ = SIZE_MAX;     // the bytes held_ must have for parse() to go on
  bool have_size_ = false, tail_done_ = false;
  uint64_t out_size_ = 0, n_ = 0, first_ = 0;  // first_: the next block's first element
  static constexpr unsigned w_ = W;
  bool chained_ = false;
  std::unique_ptr<uint8_t[]> spare_;
};

class Zsplit final : public Lossless {
 public:
  explicit Zsplit(int level) : level_(level) {}
  std::unique_ptr<ByteOut> encoder(ByteOut& out, uint64_t size, uint8_t width) const override {
    return std::make_unique<Encode>(out, size, width, level_);
  }
  std::unique_ptr<ByteOut> decoder(ByteOut& out, uint64_t size, uint64_t max_out) const override {
    return std::make_unique<Decode>(out, size, max_out);
  }

 private:
  int level_;
};

}  // namespace

std::unique_ptr<Stage> make_zsplit(const Params& p, uint32_t) {
  auto s = std::make_unique<Zsplit>(static_cast<int>(p.integer("level")));
  s->only_stream = p.text("stream") == "all" ? "" : p.text("stream");
  return s;
}

}  // namespace gradcodec::stages
