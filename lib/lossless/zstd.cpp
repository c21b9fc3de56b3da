// SPDX-License-Identifier: BSD-3-Clause
#include "lossless/zstd.hpp"

#include <gradcodec/detail/pages.hpp>

#include <algorithm>
#include <array>
#include <memory>
#include <utility>

#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_c_stableInBuffer (a parameter value; the shared library takes it)
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

class Zstd final : public Lossless {
 public:
  Zstd(int level, int minmatch, int hashlog) : level_(level), minmatch_(minmatch), hashlog_(hashlog) {}
  // Streamed into a vector that grows by what zstd writes (its capacity reserved up front, so it
  // never moves): only the compressed bytes are touched. A compressBound-sized output buffer
  // would keep about the input's size resident per running job until the record is written
  // (or cost a shrinking copy): the memory bound of a multi-threaded lossless encode.
  std::vector<uint8_t> encode(std::span<const uint8_t> in, uint8_t) const override {
    auto cctx = context(in.size());
    // The input stays put until the frame ends: zstd reads it in place instead of copying it
    // through a window-sized buffer of its own (~2 MB per job at level 3).
    checked(ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_stableInBuffer, 1));
    std::vector<uint8_t> out = output_for(in.size());
    ZSTD_inBuffer src{in.data(), in.size(), 0};
    compress(cctx.get(), src, ZSTD_e_end, out);
    return out;
  }
  // The pieces are read into a buffer of zstd's preferred input size and fed as they come (zstd
  // keeps its window in its own buffer). With zstd 1.5.4 this is the frame encode() writes at
  // levels ≥ 1 (negative levels differ slightly; test_lossless.cpp checks both).
  bool reads_pieces() const noexcept override { return true; }
  std::vector<uint8_t> encode_from(const Pieces& pieces, uint8_t) const override {
    auto cctx = context(pieces.size);
    std::vector<uint8_t> out = output_for(pieces.size);
    // At most zstd's preferred input size, and no larger than the content: a tensor of a few
    // bytes does not allocate (and zero) 128 KiB.
    const size_t cap = static_cast<size_t>(std::max<uint64_t>(1, std::min<uint64_t>(pieces.size, ZSTD_CStreamInSize())));
    const std::unique_ptr<uint8_t[]> buffer(new uint8_t[cap]);  // written by pieces.next before it is read
    const std::span<uint8_t> piece(buffer.get(), cap);
    uint64_t left = pieces.size;
    do {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(left, piece.size()));
      if (pieces.next(piece.data(), want) != want) fail(ErrorCode::Internal, "zstd: pieces ended early");
      left -= want;
      ZSTD_inBuffer src{piece.data(), want, 0};
      compress(cctx.get(), src, left ? ZSTD_e_continue : ZSTD_e_end, out);
    } while (left);
    return out;
  }
  std::vector<uint8_t> decode(std::span<const uint8_t> in, uint64_t max_out) const override {
    // Streamed out in cache-sized chunks appended to fresh memory: the output is written once
    // (a zero-filled buffer handed to ZSTD_decompress is written twice).
    return collect(decode_pieces(Chunks::of(in), max_out));
  }
  // The content front to back through zstd's streaming decoder (its window buffer in cache),
  // reading the input chunk by chunk as it needs it. Once the last byte is out, the frame's end
  // (and its checksum, if any) is read and bytes after the frame are refused.
  bool takes_chunks() const noexcept override { return true; }
  Pieces decode_pieces(const Chunks& in, uint64_t max_out) const override {
    const std::span<const uint8_t> first = in.next();
    Pieces p;
    p.size = content_size(first, max_out);
    std::shared_ptr<ZSTD_DCtx> dctx = take_dctx();
    p.next = [dctx, in, src = ZSTD_inBuffer{first.data(), first.size(), 0}, left = p.size, hint = size_t{1},
              ended = false](uint8_t* dst, size_t cap) mutable -> size_t {
      // One call of the decoder, with the next chunk in place when the current one is used up.
      auto step = [&](ZSTD_outBuffer& o) {
        if (src.pos == src.size) {
          const std::span<const uint8_t> c = in.next();
          src = ZSTD_inBuffer{c.data(), c.size(), 0};
        }
        const size_t before_in = src.pos, before_out = o.pos;
        hint = ZSTD_decompressStream(dctx.get(), &o, &src);  // 0 once the frame is complete
        if (ZSTD_isError(hint) || (src.pos == before_in && o.pos == before_out))
          fail(ErrorCode::Corrupt, "zstd: corrupt frame");
      };
      const size_t want = static_cast<size_t>(std::min<uint64_t>(cap, left));
      ZSTD_outBuffer o{dst, want, 0};
      while (o.pos < want) {
        step(o);
        if (hint == 0 && o.pos < want) fail(ErrorCode::Corrupt, "zstd: corrupt frame");
      }
      left -= want;
      if (left == 0 && !ended) {
        ended = true;
        std::array<uint8_t, 1> extra{};
        ZSTD_outBuffer e{extra.data(), extra.size(), 0};
        while (hint != 0) {  // every byte is out; the frame's end is still to come
          step(e);
          if (e.pos != 0) fail(ErrorCode::Corrupt, "zstd: corrupt frame");
        }
        if (src.pos != src.size || !in.next().empty())
          fail(ErrorCode::Corrupt, "zstd: corrupt frame (bytes after the frame)");
      }
      return want;
    };
    return p;
  }
  // For a next stage to undo: the frame decoded in one call straight into memory that is not
  // zero-filled first (no window buffer of zstd's own, no pieces to append).
  Scratch decode_scratch(std::span<const uint8_t> in, uint64_t max_out) const override {
    const uint64_t size = content_size(in, max_out);
    const size_t framed = ZSTD_findFrameCompressedSize(in.data(), in.size());
    if (ZSTD_isError(framed)) fail(ErrorCode::Corrupt, "zstd: corrupt frame");
    if (framed != in.size()) fail(ErrorCode::Corrupt, "zstd: corrupt frame (bytes after the frame)");
    DContext dctx = take_dctx();
    Scratch out;
    out.size = static_cast<size_t>(size);
    out.data = std::make_unique_for_overwrite<uint8_t[]>(std::max<size_t>(out.size, 1));
    prepare_written(out.data.get(), out.size);
    const size_t got = ZSTD_decompressDCtx(dctx.get(), out.data.get(), out.size, in.data(), in.size());
    if (ZSTD_isError(got) || got != out.size) fail(ErrorCode::Corrupt, "zstd: corrupt frame");
    return out;
  }

 private:
  // The frame's content size, checked against the bound.
  static uint64_t content_size(std::span<const uint8_t> in, uint64_t max_out) {
    const unsigned long long size = ZSTD_getFrameContentSize(in.data(), in.size());
    if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN)
      fail(ErrorCode::Corrupt, "zstd: not a zstd frame with a content size");
    if (size > max_out)
      fail(ErrorCode::Corrupt, "zstd: frame claims " + std::to_string(size) +
                                   " bytes, more than the tensor allows (" + std::to_string(max_out) + ")");
    return size;
  }
  CContext context(uint64_t size) const {
    CContext cctx = take_cctx();
    checked(ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, level_));
    // Encoder-only tuning (the frame does not record it; any zstd decoder reads the result).
    if (minmatch_) checked(ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_minMatch, minmatch_));
    if (hashlog_) checked(ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_hashLog, hashlog_));
    checked(ZSTD_CCtx_setPledgedSrcSize(cctx.get(), size));  // the frame records the size
    return cctx;
  }
  static std::vector<uint8_t> output_for(uint64_t size) {
    std::vector<uint8_t> out;
    // Address space: the bound is rarely written whole; compress() maps pages as it goes. (Not
    // a step more: a tiny tensor then holds a few bytes, not zstd's 128 KiB output step.)
    out.reserve(ZSTD_compressBound(size));
    advise_huge_pages(out.data(), out.capacity());
    return out;
  }
  // Compresses all of src (ZSTD_e_continue) or ends the frame (ZSTD_e_end), appending to out.
  static void compress(ZSTD_CCtx* cctx, ZSTD_inBuffer& src, ZSTD_EndDirective mode, std::vector<uint8_t>& out) {
    for (;;) {
      const size_t pos = out.size();
      // zstd's output step, within the reserved bound (resize zero-fills what it adds; the frame
      // does not depend on the room zstd is given). Past the bound, which a frame never
      // reaches, a whole step.
      const size_t room = out.capacity() - pos;
      const size_t step = room > 0 ? std::min(room, ZSTD_CStreamOutSize()) : ZSTD_CStreamOutSize();
      // The reserved storage is fresh: its pages are mapped 1 MiB at a time, ahead of the
      // writes, when the next step crosses into a new MiB (at most 1 MiB mapped unwritten).
      constexpr size_t kAhead = size_t{1} << 20;
      const size_t mapped = (pos + kAhead - 1) / kAhead * kAhead;
      if (pos + step > mapped && mapped < out.capacity())
        populate_write(out.data() + mapped, std::min(kAhead, out.capacity() - mapped));
      out.resize(pos + step);
      ZSTD_outBuffer dst{out.data(), out.size(), pos};
      const size_t left = checked(ZSTD_compressStream2(cctx, &dst, &src, mode));
      out.resize(dst.pos);
      if (mode == ZSTD_e_end ? left == 0 : src.pos == src.size) return;
    }
  }

  int level_, minmatch_, hashlog_;  // 0: the level's own
};

}  // namespace

std::unique_ptr<Stage> make_zstd(const Params& p, uint32_t) {
  const auto minmatch = p.integer("minmatch"), hashlog = p.integer("hashlog");
  if (minmatch != 0 && minmatch < 3)
    fail(ErrorCode::Usage, "zstd: minmatch must be 0 (the level's) or 3..7, got " + std::to_string(minmatch));
  if (hashlog != 0 && hashlog < 6)
    fail(ErrorCode::Usage, "zstd: hashlog must be 0 (the level's) or 6..25, got " + std::to_string(hashlog));
  auto s = std::make_unique<Zstd>(static_cast<int>(p.integer("level")), static_cast<int>(minmatch),
                                  static_cast<int>(hashlog));
  s->only_stream = p.text("stream") == "all" ? "" : p.text("stream");
  return s;
}

}  // namespace gradcodec::stages
