// SPDX-License-Identifier: BSD-3-Clause
#include "lossless/zstd.hpp"

#include <gradcodec/detail/pages.hpp>

#include <algorithm>
#include <array>
#include <memory>
#include <utility>

#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_c_stableInBuffer, ZSTD_c_literalCompressionMode (parameter values; the shared library takes them)
#include <zstd.h>

namespace gradcodec::stages {

namespace {

size_t checked(size_t r) {
  if (ZSTD_isError(r)) fail(ErrorCode::Internal, std::string("zstd: ") + ZSTD_getErrorName(r));
  return r;
}

// Contexts are kept between tensors, one of each kind per thread. A fresh context allocates
// its window and tables anew for every stream, and on the machines measured here the first
// touch of those pages cost more than the compression (docs/performance.md); a reused one has
// them in place. A context is reset before each use, so the bytes are those of a fresh one.
// Contexts larger than kKeepBytes (high levels, long windows) are freed, not kept.
constexpr size_t kKeepBytes = size_t{32} << 20;

// Set when the thread's kept contexts are destroyed (thread exit): a context given back after
// that, by an object destroyed later in the same exit, is freed. A trivial thread_local outlives them.
thread_local bool kept_gone = false;

template <class Ctx, size_t (*Free)(Ctx*)>
struct Kept {
  Ctx* ctx = nullptr;
  Kept() = default;
  Kept(const Kept&) = delete;
  Kept& operator=(const Kept&) = delete;
  ~Kept() {
    kept_gone = true;
    Free(std::exchange(ctx, nullptr));
  }
};
thread_local Kept<ZSTD_CCtx, ZSTD_freeCCtx> kept_cctx;
thread_local Kept<ZSTD_DCtx, ZSTD_freeDCtx> kept_dctx;

void give_back_cctx(ZSTD_CCtx* c) noexcept {
  if (c && !kept_gone && !kept_cctx.ctx && ZSTD_sizeof_CCtx(c) <= kKeepBytes)
    kept_cctx.ctx = c;
  else
    ZSTD_freeCCtx(c);
}
void give_back_dctx(ZSTD_DCtx* d) noexcept {
  if (d && !kept_gone && !kept_dctx.ctx && ZSTD_sizeof_DCtx(d) <= kKeepBytes)
    kept_dctx.ctx = d;
  else
    ZSTD_freeDCtx(d);
}

using CContext = std::unique_ptr<ZSTD_CCtx, void (*)(ZSTD_CCtx*) noexcept>;
using DContext = std::unique_ptr<ZSTD_DCtx, void (*)(ZSTD_DCtx*) noexcept>;

CContext take_cctx() {
  CContext c(kept_gone ? nullptr : std::exchange(kept_cctx.ctx, nullptr), give_back_cctx);
  if (c) {
    checked(ZSTD_CCtx_reset(c.get(), ZSTD_reset_session_and_parameters));
    return c;
  }
  c.reset(ZSTD_createCCtx());
  if (!c) fail(ErrorCode::Internal, "zstd: cannot create a compression context");
  return c;
}
DContext take_dctx() {
  DContext d(kept_gone ? nullptr : std::exchange(kept_dctx.ctx, nullptr), give_back_dctx);
  if (d) {
    if (ZSTD_isError(ZSTD_DCtx_reset(d.get(), ZSTD_reset_session_and_parameters)))
      fail(ErrorCode::Internal, "zstd: cannot reset a decompression context");
    return d;
  }
  d.reset(ZSTD_createDCtx());
  if (!d) fail(ErrorCode::Internal, "zstd: cannot create a decompression context");
  return d;
}

// The frame's content size, checked against the bound.
uint64_t content_size(std::span<const uint8_t> head, uint64_t max_out) {
  const unsigned long long size = ZSTD_getFrameContentSize(head.data(), head.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN)
    fail(ErrorCode::Corrupt, "zstd: not a zstd frame with a content size");
  if (size > max_out)
    fail(ErrorCode::Corrupt, "zstd: frame claims " + std::to_string(size) +
                                 " bytes, more than the tensor allows (" + std::to_string(max_out) + ")");
  return size;
}

struct Tuning {
  int level, minmatch, hashlog;  // minmatch, hashlog 0: the level's own
  ZSTD_paramSwitch_e literals;   // ZSTD_ps_auto: the level's own
};

// The encoder. Input written whole in one write() is read in place (ZSTD_c_stableInBuffer: no
// copy through a window buffer of zstd's own, ~2 MB per job at level 3). Input handed over in
// pieces (room()/commit() or smaller writes) is gathered into a buffer of zstd's preferred input
// size and compressed each time it fills, the last piece ending the frame; with zstd 1.5.4 that
// is the frame of the whole input at levels ≥ 1 (negative levels differ slightly;
// test_lossless.cpp checks both). Output goes into the next ByteOut's room when it offers one
// (the stream's vector: only the compressed bytes are touched), else through a buffer.
class Encode final : public ByteOut {
 public:
  Encode(const Tuning& t, ByteOut& out, uint64_t size) : out_(out), size_(size), cctx_(take_cctx()) {
    checked(ZSTD_CCtx_setParameter(cctx_.get(), ZSTD_c_compressionLevel, t.level));
    // Encoder-only tuning (the frame does not record it; any zstd decoder reads the result).
    if (t.minmatch) checked(ZSTD_CCtx_setParameter(cctx_.get(), ZSTD_c_minMatch, t.minmatch));
    if (t.hashlog) checked(ZSTD_CCtx_setParameter(cctx_.get(), ZSTD_c_hashLog, t.hashlog));
    if (t.literals != ZSTD_ps_auto)
      checked(ZSTD_CCtx_setParameter(cctx_.get(), ZSTD_c_literalCompressionMode, t.literals));
    checked(ZSTD_CCtx_setPledgedSrcSize(cctx_.get(), size));  // the frame records the size
    out_.begin(ZSTD_compressBound(static_cast<size_t>(size)), false);
  }
  void begin(uint64_t, bool) override {}
  void write(std::span<const uint8_t> bytes) override {
    if (got_ == 0 && !buffer_ && bytes.size() == size_ && size_ > 0) {  // all of it, held in place
      checked(ZSTD_CCtx_setParameter(cctx_.get(), ZSTD_c_stableInBuffer, 1));
      got_ = size_;
      ZSTD_inBuffer src{bytes.data(), bytes.size(), 0};
      compress(src, ZSTD_e_end);
      return;
    }
    write_into_room(*this, bytes, "zstd");
  }
  std::span<uint8_t> room(size_t want) override {
    if (!buffer_) {
      // At most zstd's preferred input size, and no larger than the content: a tensor of a few
      // bytes does not allocate 128 KiB.
      cap_ = static_cast<size_t>(std::max<uint64_t>(1, std::min<uint64_t>(size_, ZSTD_CStreamInSize())));
      buffer_ = std::make_unique_for_overwrite<uint8_t[]>(cap_);
    }
    return {buffer_.get() + fill_, std::min(want, cap_ - fill_)};
  }
  void commit(size_t k) override {
    fill_ += k;
    got_ += k;
    if (got_ > size_) fail(ErrorCode::Internal, "zstd: more input than announced");
    if (fill_ == cap_ || got_ == size_) {
      ZSTD_inBuffer src{buffer_.get(), fill_, 0};
      compress(src, got_ == size_ ? ZSTD_e_end : ZSTD_e_continue);
      fill_ = 0;
    }
  }
  void end() override {
    if (got_ != size_) fail(ErrorCode::Internal, "zstd: input ended early");
    if (!ended_) {  // an empty input: the frame is still to be written
      ZSTD_inBuffer src{nullptr, 0, 0};
      compress(src, ZSTD_e_end);
    }
    out_.end();
  }

 private:
  // Compresses all of src (ZSTD_e_continue) or ends the frame (ZSTD_e_end).
  void compress(ZSTD_inBuffer& src, ZSTD_EndDirective mode) {
    for (;;) {
      std::span<uint8_t> dst = out_.room(ZSTD_CStreamOutSize());
      const bool own = dst.empty();
      if (own) {
        if (!spare_) spare_ = std::make_unique_for_overwrite<uint8_t[]>(ZSTD_CStreamOutSize());
        dst = {spare_.get(), ZSTD_CStreamOutSize()};
      }
      ZSTD_outBuffer o{dst.data(), dst.size(), 0};
      const size_t left = checked(ZSTD_compressStream2(cctx_.get(), &o, &src, mode));
      if (own) out_.write({dst.data(), o.pos});
      else out_.commit(o.pos);
      if (mode == ZSTD_e_end ? left == 0 : src.pos == src.size) break;
    }
    ended_ = mode == ZSTD_e_end;
  }

  ByteOut& out_;
  uint64_t size_, got_ = 0;
  CContext cctx_;
  std::unique_ptr<uint8_t[]> buffer_, spare_;
  size_t cap_ = 0, fill_ = 0;
  bool ended_ = false;
};

// The decoder. A frame handed over whole to a next ByteOut that offers room for all of its
// content (a stage before that holds its input whole) is decoded in one call straight into it;
// otherwise the content is streamed through zstd's decoder (its window buffer in cache) into the
// next ByteOut's room or a cache-sized buffer, reading the input as it comes. The frame's end
// (and its checksum, if any) is read, and bytes after the frame are refused.
class Decode final : public ByteOut {
 public:
  Decode(ByteOut& out, uint64_t size, uint64_t max_out) : out_(out), size_(size), max_out_(max_out) {}
  void begin(uint64_t, bool) override {}
  void write(std::span<const uint8_t> bytes) override {
    got_ += bytes.size();
    if (got_ > size_) fail(ErrorCode::Internal, "zstd: more input than announced");
    if (!started_) {
      if (bytes.size() == size_ && whole(bytes)) return;
      // The frame header, gathered until it is whole (or the stream ends).
      const size_t need = static_cast<size_t>(std::min<uint64_t>(size_, ZSTD_FRAMEHEADERSIZE_MAX));
      const size_t k = std::min(need - head_fill_, bytes.size());
      std::copy_n(bytes.begin(), k, head_.begin() + static_cast<std::ptrdiff_t>(head_fill_));
      head_fill_ += k;
      bytes = bytes.subspan(k);
      if (head_fill_ < need) return;
      start();
      feed({head_.data(), head_fill_});
    }
    feed(bytes);
  }
  void end() override {
    if (got_ != size_) fail(ErrorCode::Internal, "zstd: input ended early");
    if (!started_) {  // fewer bytes than a frame header
      start();
      feed({head_.data(), head_fill_});
    }
    if (done_ < content_ || hint_ != 0) fail(ErrorCode::Corrupt, "zstd: corrupt frame");
    out_.end();
  }

 private:
  // One call for a whole frame, when the next ByteOut holds all of its content in place.
  bool whole(std::span<const uint8_t> bytes) {
    content_ = content_size(bytes, max_out_);
    started_ = true;
    out_.begin(content_, true);
    const std::span<uint8_t> dst = content_ ? out_.room(static_cast<size_t>(content_)) : std::span<uint8_t>();
    if (content_ == 0 || dst.size() < content_) {
      if (!dst.empty()) out_.commit(0);
      dctx_ = take_dctx();
      feed(bytes);
      return true;
    }
    const size_t framed = ZSTD_findFrameCompressedSize(bytes.data(), bytes.size());
    if (ZSTD_isError(framed)) fail(ErrorCode::Corrupt, "zstd: corrupt frame");
    if (framed != bytes.size()) fail(ErrorCode::Corrupt, "zstd: corrupt frame (bytes after the frame)");
    const DContext dctx = take_dctx();
    const size_t n = ZSTD_decompressDCtx(dctx.get(), dst.data(), dst.size(), bytes.data(), bytes.size());
    if (ZSTD_isError(n) || n != content_) fail(ErrorCode::Corrupt, "zstd: corrupt frame");
    out_.commit(n);
    done_ = content_;
    hint_ = 0;
    return true;
  }
  void start() {
    content_ = content_size({head_.data(), head_fill_}, max_out_);
    started_ = true;
    out_.begin(content_, true);
    dctx_ = take_dctx();
  }
  // Decodes what `bytes` hold, as far as they go.
  void feed(std::span<const uint8_t> bytes) {
    ZSTD_inBuffer src{bytes.data(), bytes.size(), 0};
    for (;;) {
      const size_t before_in = src.pos;
      size_t made = 0;
      if (done_ < content_) {  // content still to come
        const size_t want = static_cast<size_t>(content_ - done_);
        std::span<uint8_t> dst = out_.room(want);
        const bool own = dst.empty();
        if (own) dst = {chunk_.data(), std::min(want, kChunk)};
        ZSTD_outBuffer o{dst.data(), dst.size(), 0};
        hint_ = ZSTD_decompressStream(dctx_.get(), &o, &src);
        if (ZSTD_isError(hint_)) fail(ErrorCode::Corrupt, "zstd: corrupt frame");
        made = o.pos;
        if (own) out_.write({dst.data(), made});
        else out_.commit(made);
        done_ += made;
        if (hint_ == 0 && done_ < content_) fail(ErrorCode::Corrupt, "zstd: corrupt frame");
      } else {  // every byte is out; the frame's end is still to come
        if (hint_ == 0) {
          if (src.pos != src.size) fail(ErrorCode::Corrupt, "zstd: corrupt frame (bytes after the frame)");
          return;
        }
        std::array<uint8_t, 1> extra{};
        ZSTD_outBuffer e{extra.data(), extra.size(), 0};
        hint_ = ZSTD_decompressStream(dctx_.get(), &e, &src);
        if (ZSTD_isError(hint_) || e.pos != 0) fail(ErrorCode::Corrupt, "zstd: corrupt frame");
      }
      if (made == 0 && src.pos == before_in) {  // nothing more from these bytes
        if (src.pos == src.size) return;
        fail(ErrorCode::Corrupt, "zstd: corrupt frame");
      }
    }
  }

  static constexpr size_t kChunk = 16384;
  ByteOut& out_;
  uint64_t size_, max_out_, got_ = 0, content_ = 0, done_ = 0;
  bool started_ = false;
  size_t hint_ = 1;  // ZSTD_decompressStream's: 0 once the frame is complete
  std::array<uint8_t, ZSTD_FRAMEHEADERSIZE_MAX> head_{};
  size_t head_fill_ = 0;
  DContext dctx_{nullptr, give_back_dctx};
  std::array<uint8_t, kChunk> chunk_;
};

class Zstd final : public Lossless {
 public:
  explicit Zstd(const Tuning& t) : tuning_(t) {}
  std::unique_ptr<ByteOut> encoder(ByteOut& out, uint64_t size, uint8_t) const override {
    return std::make_unique<Encode>(tuning_, out, size);
  }
  std::unique_ptr<ByteOut> decoder(ByteOut& out, uint64_t size, uint64_t max_out) const override {
    return std::make_unique<Decode>(out, size, max_out);
  }

 private:
  Tuning tuning_;
};

}  // namespace

std::unique_ptr<Lossless> zstd_coder(int level, bool huffman_literals) {
  return std::make_unique<Zstd>(Tuning{level, 0, 0, huffman_literals ? ZSTD_ps_enable : ZSTD_ps_auto});
}

std::unique_ptr<Stage> make_zstd(const Params& p, uint32_t) {
  const auto minmatch = p.integer("minmatch"), hashlog = p.integer("hashlog");
  if (minmatch != 0 && minmatch < 3)
    fail(ErrorCode::Usage, "zstd: minmatch must be 0 (the level's) or 3..7, got " + std::to_string(minmatch));
  if (hashlog != 0 && hashlog < 6)
    fail(ErrorCode::Usage, "zstd: hashlog must be 0 (the level's) or 6..25, got " + std::to_string(hashlog));
  const std::string& lit = p.text("literals");
  const ZSTD_paramSwitch_e literals = lit == "huffman" ? ZSTD_ps_enable : lit == "raw" ? ZSTD_ps_disable : ZSTD_ps_auto;
  auto s = std::make_unique<Zstd>(
      Tuning{static_cast<int>(p.integer("level")), static_cast<int>(minmatch), static_cast<int>(hashlog), literals});
  s->only_stream = p.text("stream") == "all" ? "" : p.text("stream");
  return s;
}

}  // namespace gradcodec::stages
