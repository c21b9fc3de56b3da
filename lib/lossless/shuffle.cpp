// SPDX-License-Identifier: BSD-3-Clause
#include "lossless/shuffle.hpp"

#include <gradcodec/detail/pages.hpp>
#include "base/thread_buffer.hpp"

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <type_traits>

namespace gradcodec::stages {

namespace {

// Where the bytes of a stream of `size` bytes go: n whole elements of w bytes in runs of `run`
// elements (the last one may be shorter), each run's w planes one after the other, then the
// bytes of a partial last element. Without blocks the whole stream is one run.
struct Layout {
  unsigned w = 1;
  size_t n = 0, run = 0, body = 0;
  Layout(size_t size, unsigned width, uint64_t block) : w(width), n(size / width), body(n * width) {
    run = block == 0 || block >= n ? n : static_cast<size_t>(block);
  }
  size_t run_elements(size_t r) const { return std::min(run, n - r * run); }
  size_t runs() const { return run ? (n + run - 1) / run : 0; }
};

// Elements [first, first + count) of a run of n elements whose planes start at `in`:
// out[i·w + j] = in[j·n + first + i].
template <unsigned W>
void join_planes(const uint8_t* in, size_t n, size_t first, size_t count, uint8_t* out) {
  in += first;
  for (size_t i = 0; i < count; ++i)
    for (unsigned j = 0; j < W; ++j) out[i * W + j] = in[j * n + i];
}
void join_run(const uint8_t* in, size_t n, unsigned w, size_t first, size_t count, uint8_t* out) {
  switch (w) {
    case 2: return join_planes<2>(in, n, first, count, out);
    case 4: return join_planes<4>(in, n, first, count, out);
    case 8: return join_planes<8>(in, n, first, count, out);
    default:
      for (size_t i = 0; i < count; ++i)
        for (unsigned j = 0; j < w; ++j) out[i * w + j] = in[j * n + first + i];
  }
}

// Plane j, elements [first, first + count): out[k] = in[(first + k)·w + j].
template <unsigned W>
void gather_plane(const uint8_t* in, unsigned j, size_t first, size_t count, uint8_t* out) {
  in += first * W + j;
  for (size_t k = 0; k < count; ++k) out[k] = in[k * W];
}
void gather(const uint8_t* in, unsigned w, unsigned j, size_t first, size_t count, uint8_t* out) {
  switch (w) {
    case 2: return gather_plane<2>(in, j, first, count, out);
    case 4: return gather_plane<4>(in, j, first, count, out);
    case 8: return gather_plane<8>(in, j, first, count, out);
    default:
      for (size_t k = 0; k < count; ++k) out[k] = in[(first + k) * w + j];
  }
}

unsigned width_of(uint8_t w) {
  if (w == 0) fail(ErrorCode::Corrupt, "shuffle: element width 0");
  return w;
}

constexpr size_t kChunk = 16384;  // bytes joined or gathered at a time, in cache

// The encoder: the width byte, then the planes of each run, made piece by piece into the next
// ByteOut's room (a zstd encoder's input buffer) or a chunk in cache. The input is read in place
// when it comes whole in one write(), else gathered whole first.
class Encode final : public ByteOut {
 public:
  Encode(ByteOut& out, uint64_t size, unsigned w, uint64_t block)
      : out_(out), size_(static_cast<size_t>(size)), L_(size_, w, block) {
    out_.begin(size_ + 1, true);
  }
  void begin(uint64_t, bool) override {}
  void write(std::span<const uint8_t> bytes) override {
    if (got_ == 0 && bytes.size() == size_ && !held_) {
      got_ = size_;
      emit(bytes);
      return;
    }
    write_into_room(*this, bytes, "shuffle");
  }
  std::span<uint8_t> room(size_t want) override {
    if (!held_) {
      held_ = std::make_unique_for_overwrite<uint8_t[]>(std::max<size_t>(size_, 1));
      prepare_written(held_.get(), size_);
    }
    return {held_.get() + got_, std::min(want, size_ - got_)};
  }
  void commit(size_t k) override {
    got_ += k;
    if (got_ > size_) fail(ErrorCode::Internal, "shuffle: more input than announced");
    if (got_ == size_ && k > 0) emit({held_.get(), size_});
  }
  void end() override {
    if (got_ != size_) fail(ErrorCode::Internal, "shuffle: input ended early");
    if (!emitted_) emit({});
    out_.end();
  }

 private:
  void emit(std::span<const uint8_t> in) {
    emitted_ = true;
    std::array<uint8_t, kChunk> chunk;
    for (uint64_t at = 0; at <= in.size();) {
      std::span<uint8_t> dst = out_.room(static_cast<size_t>(in.size() + 1 - at));
      const bool own = dst.empty();
      if (own) dst = {chunk.data(), static_cast<size_t>(std::min<uint64_t>(kChunk, in.size() + 1 - at))};
      const size_t k = fill(in, at, dst);
      if (own) out_.write(dst.first(k));
      else out_.commit(k);
    }
  }
  // Bytes [at, at + dst.size()) of the output: the width byte, then plane j of each run's
  // elements (gathered), then the partial last element as is.
  size_t fill(std::span<const uint8_t> in, uint64_t& at, std::span<uint8_t> dst) const {
    size_t done = 0;
    if (at == 0 && !dst.empty()) {
      dst[done++] = static_cast<uint8_t>(L_.w);
      at = 1;
    }
    while (done < dst.size() && at <= in.size()) {
      const size_t q = static_cast<size_t>(at - 1);  // position in the shuffled bytes
      size_t count;
      if (q < L_.body) {
        const size_t r = q / (L_.run * L_.w), m = L_.run_elements(r), in_run = q - r * L_.run * L_.w;
        const auto j = static_cast<unsigned>(in_run / m);
        const size_t i = in_run % m;
        count = std::min(dst.size() - done, m - i);
        gather(in.data(), L_.w, j, r * L_.run + i, count, dst.data() + done);
      } else {
        count = std::min(dst.size() - done, in.size() - q);
        std::copy_n(in.data() + q, count, dst.data() + done);
      }
      done += count;
      at += count;
    }
    return done;
  }

  ByteOut& out_;
  size_t size_, got_ = 0;
  Layout L_;
  std::unique_ptr<uint8_t[]> held_;
  bool emitted_ = false;
};

// The decoder: each run is joined as soon as its planes are in, from the input in place when a
// write() holds all of it, else from a run buffer that the previous stage may decode straight
// into (room()). Without blocks the one run is the whole stream: it is held whole (the previous
// stage may decode all of it in one call into that memory) and joined at its end. The joined
// bytes go out a cache-sized chunk at a time, then the partial last element as is.
class Decode final : public ByteOut {
 public:
  Decode(ByteOut& out, uint64_t size, uint64_t max_out, uint64_t block) : out_(out), size_(size), block_(block) {
    if (size == 0) fail(ErrorCode::Corrupt, "shuffle: empty stream");
    if (size - 1 > max_out) fail(ErrorCode::Corrupt, "shuffle: stream larger than the tensor allows");
  }
  void begin(uint64_t, bool) override {}
  void write(std::span<const uint8_t> bytes) override {
    if (block_ == 0 && !(got_ == 0 && bytes.size() == size_)) {  // held whole
      write_into_room(*this, bytes, "shuffle");
      return;
    }
    count(bytes.size());
    consume(bytes);
  }
  std::span<uint8_t> room(size_t want) override {
    if (block_ == 0) {
      if (!whole_) {
        whole_ = std::make_unique_for_overwrite<uint8_t[]>(static_cast<size_t>(size_));
        prepare_written(whole_.get(), static_cast<size_t>(size_));
      }
      return {whole_.get() + got_, static_cast<size_t>(std::min<uint64_t>(want, size_ - got_))};
    }
    if (!L_ || r_ == L_->runs()) return {};
    const size_t run_bytes = L_->run_elements(r_) * L_->w;
    return {run_buffer() + fill_, std::min(want, run_bytes - fill_)};
  }
  void commit(size_t k) override {
    count(k);
    if (block_ == 0) {
      if (got_ == size_ && k > 0) consume({whole_.get(), static_cast<size_t>(size_)});
      return;
    }
    fill_ += k;
    if (fill_ == L_->run_elements(r_) * L_->w) {
      fill_ = 0;
      join(run_buffer());
    }
  }
  void end() override {
    if (got_ != size_ || !L_ || r_ < L_->runs()) fail(ErrorCode::Corrupt, "shuffle: stream ended early");
    out_.end();
  }

 private:
  void count(size_t k) {
    got_ += k;
    if (got_ > size_) fail(ErrorCode::Internal, "shuffle: more input than announced");
  }
  // The bytes that follow what came before.
  void consume(std::span<const uint8_t> bytes) {
    if (!L_) {
      if (bytes.empty()) return;
      L_.emplace(static_cast<size_t>(size_ - 1), width_of(bytes[0]), block_);
      // The run buffer (kept by the thread for later streams) is taken before the output is
      // made, so that it lies below the output in the heap, which is then given back whole
      // when freed (docs/performance.md, "Issue 40": the figures when it was taken after).
      if (block_ != 0 && L_->runs() > 0) run_buffer();
      out_.begin(size_ - 1, true);
      bytes = bytes.subspan(1);
    }
    while (!bytes.empty()) {
      if (r_ == L_->runs()) {  // the partial last element
        out_.write(bytes);
        return;
      }
      const size_t run_bytes = L_->run_elements(r_) * L_->w;
      if (fill_ == 0 && bytes.size() >= run_bytes) {  // a whole run in place
        join(bytes.data());
        bytes = bytes.subspan(run_bytes);
        continue;
      }
      const size_t k = std::min(run_bytes - fill_, bytes.size());
      std::copy_n(bytes.begin(), k, run_buffer() + fill_);
      bytes = bytes.subspan(k);
      fill_ += k;
      if (fill_ == run_bytes) {
        fill_ = 0;
        join(run_buffer());
      }
    }
  }
  uint8_t* run_buffer() {
    if (!kept_) kept_.emplace(L_->run * L_->w);  // kept by the thread between tensors
    return kept_->data();
  }
  // Joins run r_, whose planes start at `planes`, into the next ByteOut.
  void join(const uint8_t* planes) {
    const size_t m = L_->run_elements(r_), per_chunk = kChunk / L_->w;
    std::array<uint8_t, kChunk> chunk;
    for (size_t i = 0; i < m; i += per_chunk) {
      const size_t k = std::min(per_chunk, m - i);
      join_run(planes, m, L_->w, i, k, chunk.data());
      out_.write({chunk.data(), k * L_->w});
    }
    ++r_;
  }

  ByteOut& out_;
  uint64_t size_, got_ = 0, block_;
  std::optional<Layout> L_;  // once the width byte is in
  size_t r_ = 0, fill_ = 0;  // the run being read, and its bytes in the run buffer
  std::optional<ThreadBuffer> kept_;
  std::unique_ptr<uint8_t[]> whole_;  // without blocks: the stream held whole
};

class Shuffle final : public Lossless {
 public:
  Shuffle(unsigned width, uint64_t block) : width_(width), block_(block) {}
  std::unique_ptr<ByteOut> encoder(ByteOut& out, uint64_t size, uint8_t hint) const override {
    return std::make_unique<Encode>(out, size, width_ ? width_ : hint ? hint : 1, block_);
  }
  std::unique_ptr<ByteOut> decoder(ByteOut& out, uint64_t size, uint64_t max_out) const override {
    return std::make_unique<Decode>(out, size, max_out, block_);
  }

 private:
  unsigned width_;
  uint64_t block_;  // elements per run; 0 = the whole stream is one run
};

}  // namespace

std::unique_ptr<Lossless> shuffle_coder(uint64_t block) { return std::make_unique<Shuffle>(0, block); }

std::unique_ptr<Stage> make_shuffle(const Params& p, uint32_t) {
  auto s = std::make_unique<Shuffle>(static_cast<unsigned>(p.integer("width")),
                                     static_cast<uint64_t>(p.integer("block")));
  s->only_stream = p.text("stream") == "all" ? "" : p.text("stream");
  return s;
}

}  // namespace gradcodec::stages
