// SPDX-License-Identifier: BSD-3-Clause
#include "lossless/zsplit.hpp"

#include "lossless/whole.hpp"
#include "lossless/shuffle.hpp"
#include "lossless/zstd.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>

namespace gradcodec::stages {

namespace {

constexpr const char* kName = "zsplit";
constexpr uint64_t kRun = 8192;  // elements split or joined at a time (a multiple of 8: whole bitmap bytes)
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

bool is_zero(const uint8_t* w) {
  uint32_t v;
  std::memcpy(&v, w, 4);
  return v == 0;
}

// Elements [0, m) of `x` (W bytes each): their bitmap bytes into `bits`, the high byte of each
// non-zero element at *high (advanced), its W − 1 low bytes at `low` (W bytes are written per
// element: `low` has one byte of slack); returns the low bytes' count. Zero elements come in
// runs, so the branch on them is predicted (a branch-free loop was measured slower on the real
// corpus).
size_t split_run(const uint8_t* x, uint64_t m, uint8_t* bits, uint8_t*& high_io, uint8_t* low) {
  // Locals, not the references: a byte store could alias them and force a reload per element.
  uint8_t* high = high_io;
  uint8_t* const low0 = low;
  for (uint64_t j = 0; j < m; j += 8) {
    unsigned b = 0;
    const uint64_t e = std::min<uint64_t>(8, m - j);
    for (uint64_t t = 0; t < e; ++t) {
      const uint8_t* w = x + W * (j + t);
      if (is_zero(w)) continue;
      b |= 1u << t;
      std::memcpy(low, w, W);
      low += W - 1;
      *high++ = w[W - 1];
    }
    bits[j / 8] = static_cast<uint8_t>(b);
  }
  high_io = high;
  return static_cast<size_t>(low - low0);
}

// The inverse over elements [0, m): `bits` from a byte boundary, *low and *high advanced, never
// read past low_end. Eight elements of one bitmap byte at a time: all zero, all non-zero (f32,
// while 25 low bytes are left: each word one 4-byte load of its low bytes), or one by one.
void join_run(const uint8_t* bits, uint64_t m, const uint8_t*& low_io, const uint8_t* low_end, const uint8_t*& high_io,
              uint8_t* out) {
  const uint8_t* low = low_io;  // locals, as in split_run
  const uint8_t* high = high_io;
  for (uint64_t j = 0; j < m; j += 8) {
    const unsigned b = bits[j / 8];
    const uint64_t e = std::min<uint64_t>(8, m - j);
    uint8_t* o = out + W * j;
    if (b == 0) {
      std::memset(o, 0, W * e);
      continue;
    }
    if constexpr (std::endian::native == std::endian::little) {
      if (b == 0xff && low_end - low >= 25) {  // then e = 8
        for (unsigned t = 0; t < 8; ++t) {
          uint32_t v;
          std::memcpy(&v, low + 3 * t, 4);
          v = (v & 0xffffffu) | static_cast<uint32_t>(high[t]) << 24;
          std::memcpy(o + 4 * t, &v, 4);
        }
        low += 24, high += 8;
        continue;
      }
    }
    for (uint64_t t = 0; t < e; ++t, o += W) {
      if ((b >> t) & 1) {
        std::memcpy(o, low, W - 1);
        o[W - 1] = *high++;
        low += W - 1;
      } else {
        std::memset(o, 0, W);
      }
    }
  }
  low_io = low, high_io = high;
}

uint64_t count_nonzero(const uint8_t* x, uint64_t m) {
  uint64_t k = 0;
  for (uint64_t i = 0; i < m; ++i) k += is_zero(x + W * i) ? 0 : 1;
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
        const size_t got = split_run(x + w_ * i, m, bits.data() + i / 8, hi, own ? spare.get() : dst.data());
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

// The decoder reads its input as it comes (the container hands a stream over in chunks): bytes
// are held until a whole block is in (its count, low bytes and two frames, about 1 MiB at most),
// which is then joined into the next ByteOut's room; the held bytes are reused block after block.
class Decode final : public ByteOut {
 public:
  Decode(ByteOut& out, uint64_t size, uint64_t max_out) : out_(out), size_(size), max_out_(max_out) {}
  void begin(uint64_t, bool) override {}
  void write(std::span<const uint8_t> bytes) override {
    got_ += bytes.size();
    if (got_ > size_) fail(ErrorCode::Internal, std::string(kName) + ": more input than announced");
    if (pos_ == held_.size()) held_.clear(), pos_ = 0;
    else if (pos_ > held_.size() / 2) held_.erase(held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(pos_)), pos_ = 0;
    held_.insert(held_.end(), bytes.begin(), bytes.end());
    parse();
  }
  void end() override {
    if (got_ != size_) fail(ErrorCode::Internal, std::string(kName) + ": input ended early");
    parse();
    if (chained_) {  // the chain's output of the rest of the stream, whole
      const std::span<const uint8_t> rest(held_.data() + pos_, held_.size() - pos_);
      std::vector<uint8_t> out;
      Lossless::decode_chain(other_widths(), rest.size(), [&](ByteOut& o) { if (!rest.empty()) o.write(rest); },
                             out_size_ + 16, out);  // + shuffle's width byte; checked below
      if (out.size() != out_size_)
        corrupt("the chained stream holds " + std::to_string(out.size()) + " bytes, not " + std::to_string(out_size_));
      pos_ = held_.size(), tail_done_ = true;
      out_.begin(out_size_, true);
      if (!out.empty()) out_.write(out);
    }
    if (!have_size_ || first_ < n_ || !tail_done_) corrupt("stream ends early");
    if (pos_ != held_.size()) corrupt("bytes after the stream");
    out_.end();
  }

 private:
  // Decodes every block (and the tail) whose bytes are all held.
  void parse() {
    if (!have_size_) {
      uint64_t size = 0;
      const size_t k = peek_varint(size);
      if (k == 0) return;
      pos_ += k;
      if (size > max_out_)
        fail(ErrorCode::Corrupt, std::string(kName) + ": stream claims " + std::to_string(size) +
                                     " bytes, more than the tensor allows (" + std::to_string(max_out_) + ")");
      if (held_.size() - pos_ < 1) {
        pos_ -= k;  // the width byte is still to come: read the size again then
        return;
      }
      const uint8_t mode = held_[pos_++];
      if (mode != kSplit && mode != kChained) corrupt("unknown mode " + std::to_string(mode));
      // Every block takes at least 3 bytes (its count and two frame lengths): bound before output.
      if (mode == kSplit && size / w_ / kBlock > size_ / 3)
        corrupt("stream too short for " + std::to_string(size / w_) + " elements");
      chained_ = mode == kChained, out_size_ = size, n_ = chained_ ? 0 : size / w_, have_size_ = true;
      if (chained_) return;  // decoded whole at the end
      out_.begin(size, true);
    }
    if (chained_) return;
    while (first_ < n_) {
      const size_t k = block();
      if (k == 0) return;
      pos_ += k;
      first_ += std::min(kBlock, n_ - first_);
    }
    if (!tail_done_ && held_.size() - pos_ >= out_size_ % w_) {
      const size_t t = static_cast<size_t>(out_size_ % w_);
      if (t) out_.write({held_.data() + pos_, t});
      pos_ += t;
      tail_done_ = true;
    }
  }
  // The varint at held_[pos_ + at...]: its length in bytes, 0 while it is not all in.
  size_t peek_varint(uint64_t& v, size_t at = 0) const {
    v = 0;
    for (size_t i = 0; i < 10; ++i) {
      if (pos_ + at + i >= held_.size()) return 0;
      const uint8_t b = held_[pos_ + at + i];
      if (i == 9 && b > 1) corrupt("varint overflows 64 bits");
      v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
      if (!(b & 0x80)) return i + 1;
    }
    corrupt("varint longer than 10 bytes");
  }
  // The block at first_: the bytes it took once they are all held (and it is decoded), else 0.
  size_t block() {
    const uint64_t bn = std::min(kBlock, n_ - first_);
    const size_t avail = held_.size() - pos_;
    uint64_t k = 0, bits_len = 0, high_len = 0;
    size_t at = peek_varint(k);
    if (at == 0) return 0;
    if (k > bn) corrupt("block counts " + std::to_string(k) + " non-zero elements of " + std::to_string(bn));
    if (avail - at < (w_ - 1) * k) return 0;
    const size_t low_at = at;
    at += static_cast<size_t>((w_ - 1) * k);
    size_t v = peek_varint(bits_len, at);
    if (v == 0) return 0;
    at += v;
    if (bits_len > size_) corrupt("bitmap frame longer than the stream");
    if (avail - at < bits_len) return 0;
    const size_t bits_at = at;
    at += static_cast<size_t>(bits_len);
    v = peek_varint(high_len, at);
    if (v == 0) return 0;
    at += v;
    if (high_len > size_) corrupt("high-byte frame longer than the stream");
    if (avail - at < high_len) return 0;
    const size_t high_at = at;
    at += static_cast<size_t>(high_len);

    const uint8_t* base = held_.data() + pos_;
    const std::vector<uint8_t> bits = unframe({base + bits_at, static_cast<size_t>(bits_len)}, (bn + 7) / 8, "bitmap");
    const std::vector<uint8_t> high = unframe({base + high_at, static_cast<size_t>(high_len)}, k, "high bytes");
    uint64_t ones = 0;  // eight bitmap bytes at a time
    size_t i8 = 0;
    for (; i8 + 8 <= bits.size(); i8 += 8) {
      uint64_t w;
      std::memcpy(&w, bits.data() + i8, 8);
      ones += static_cast<uint64_t>(std::popcount(w));
    }
    for (; i8 < bits.size(); ++i8) ones += static_cast<uint64_t>(std::popcount(bits[i8]));
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
      join_run(bits.data() + i / 8, m, lo, lo_end, hi, own ? spare_.get() : dst.data());
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
  std::vector<uint8_t> held_;
  size_t pos_ = 0;  // held_[pos_...] is not yet parsed
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
