// SPDX-License-Identifier: BSD-3-Clause
#include "lossless/shuffle.hpp"

#include <gradcodec/detail/pages.hpp>
#include "base/thread_buffer.hpp"

#include <algorithm>
#include <memory>
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

// Byte j of each of the n elements goes to plane j: out[j·n + i] = in[i·w + j]. The widths the
// codecs use (2, 4, 8) get loops with a constant stride, which the compiler vectorises.
template <unsigned W>
void split_planes(const uint8_t* in, size_t n, uint8_t* out) {
  for (size_t i = 0; i < n; ++i)
    for (unsigned j = 0; j < W; ++j) out[j * n + i] = in[i * W + j];
}
void split_run(const uint8_t* in, size_t n, unsigned w, uint8_t* out) {
  switch (w) {
    case 2: return split_planes<2>(in, n, out);
    case 4: return split_planes<4>(in, n, out);
    case 8: return split_planes<8>(in, n, out);
    default:
      for (unsigned j = 0; j < w; ++j)
        for (size_t i = 0; i < n; ++i) *out++ = in[i * w + j];
  }
}

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

// Bytes [first, first + count) of the joined output (whole elements and the partial one), from
// the shuffled bytes `in` laid out as `L` says.
void join_range(const uint8_t* in, const Layout& L, size_t first, size_t count, uint8_t* out) {
  while (count > 0 && first < L.body) {
    const size_t e = first / L.w, r = e / L.run, i = e - r * L.run, m = L.run_elements(r);
    const size_t offset = first - e * L.w;  // within element e: only when a chunk splits one
    if (offset || count < L.w) {  // a piece of one element, byte by byte
      const uint8_t* planes = in + r * L.run * L.w;
      const size_t k = std::min<size_t>(L.w - offset, count);
      for (size_t b = 0; b < k; ++b) out[b] = planes[(offset + b) * m + i];
      first += k, out += k, count -= k;
      continue;
    }
    const size_t k = std::min(m - i, count / L.w);
    join_run(in + r * L.run * L.w, m, L.w, i, k, out);
    first += k * L.w, out += k * L.w, count -= k * L.w;
  }
  std::copy_n(in + first, count, out);  // the partial last element, as is
}

class Shuffle final : public Lossless {
 public:
  Shuffle(unsigned width, uint64_t block) : width_(width), block_(block) {}
  unsigned width_for(uint8_t hint) const { return width_ ? width_ : hint ? hint : 1; }
  std::vector<uint8_t> encode(std::span<const uint8_t> in, uint8_t hint) const override {
    const Layout L(in.size(), width_for(hint), block_);
    std::vector<uint8_t> out;
    reserve_fresh(out, in.size() + 1);
    out.resize(in.size() + 1);
    out[0] = static_cast<uint8_t>(L.w);
    for (size_t r = 0; r < L.runs(); ++r)
      split_run(in.data() + r * L.run * L.w, L.run_elements(r), L.w, out.data() + 1 + r * L.run * L.w);
    std::copy(in.begin() + static_cast<std::ptrdiff_t>(L.body), in.end(), out.begin() + 1 + static_cast<std::ptrdiff_t>(L.body));
    return out;
  }
  // The same bytes made on demand, plane by plane of each run: each piece gathers byte j of
  // elements of one run (nothing as large as the tensor is allocated; with blocks, each run is
  // read from memory once and its other planes from cache).
  Pieces encode_pieces(std::span<const uint8_t> in, uint8_t hint) const override {
    const Layout L(in.size(), width_for(hint), block_);
    Pieces p;
    p.size = in.size() + 1;
    p.next = [in, L, at = uint64_t{0}](uint8_t* dst, size_t cap) mutable -> size_t {
      size_t done = 0;
      if (at == 0 && cap > 0) {
        dst[done++] = static_cast<uint8_t>(L.w);
        at = 1;
      }
      while (done < cap && at <= in.size()) {
        const size_t q = at - 1;  // position in the shuffled bytes
        size_t count;
        if (q < L.body) {
          const size_t r = q / (L.run * L.w), m = L.run_elements(r), in_run = q - r * L.run * L.w;
          const auto j = static_cast<unsigned>(in_run / m);
          const size_t i = in_run % m;
          count = std::min(cap - done, m - i);
          gather(in.data(), L.w, j, r * L.run + i, count, dst + done);
        } else {  // the partial last element, as is
          count = std::min(cap - done, in.size() - q);
          std::copy_n(in.data() + q, count, dst + done);
        }
        done += count;
        at += count;
      }
      return done;
    };
    return p;
  }
  std::vector<uint8_t> decode(std::span<const uint8_t> in, uint64_t max_out) const override {
    if (in.empty()) fail(ErrorCode::Corrupt, "shuffle: empty stream");
    const Layout L(checked_size(in.size() - 1, max_out), width_of(in[0]), block_);
    // Joined in cache-sized chunks appended to fresh memory (written once).
    std::vector<uint8_t> out;
    append_chunked<16384>(out, in.size() - 1, [&](uint8_t* dst, size_t first, size_t count) {
      join_range(in.data() + 1, L, first, count, dst);
    });
    return out;
  }
  // With blocks, a run's planes are together in the stream: each run is read from the stage
  // before (zstd) into a buffer in cache and joined from there, so the decoded stream is never
  // held whole. Without blocks, decode() needs all of it.
  bool takes_pieces() const noexcept override { return block_ != 0; }
  std::vector<uint8_t> decode_from(const Pieces& in, uint64_t max_out) const override {
    if (block_ == 0 || in.size == 0) return Lossless::decode_from(in, max_out);
    uint8_t width = 0;
    read(in, &width, 1);
    const Layout L(checked_size(in.size - 1, max_out), width_of(width), block_);
    const size_t run_bytes = L.run * L.w;
    const ThreadBuffer buffer(run_bytes);  // kept by the thread between tensors
    std::vector<uint8_t> out;
    reserve_fresh(out, static_cast<size_t>(in.size - 1));
    uint8_t chunk[16384];
    const size_t per_chunk = sizeof chunk / L.w;  // whole elements per chunk
    for (size_t r = 0; r < L.runs(); ++r) {
      const size_t m = L.run_elements(r);
      read(in, buffer.data(), m * L.w);
      for (size_t i = 0; i < m; i += per_chunk) {
        const size_t k = std::min(per_chunk, m - i);
        join_run(buffer.data(), m, L.w, i, k, chunk);
        out.insert(out.end(), chunk, chunk + k * L.w);
      }
    }
    const size_t tail = static_cast<size_t>(in.size - 1) - L.body;
    read(in, chunk, tail);
    out.insert(out.end(), chunk, chunk + tail);
    return out;
  }

 private:
  static unsigned width_of(uint8_t w) {
    if (w == 0) fail(ErrorCode::Corrupt, "shuffle: element width 0");
    return w;
  }
  static size_t checked_size(uint64_t size, uint64_t max_out) {
    if (size > max_out) fail(ErrorCode::Corrupt, "shuffle: stream larger than the tensor allows");
    return static_cast<size_t>(size);
  }
  // The next `count` bytes of the pieces.
  static void read(const Pieces& in, uint8_t* dst, size_t count) {
    for (size_t done = 0; done < count;) {
      const size_t got = in.next(dst + done, count - done);
      if (got == 0) fail(ErrorCode::Corrupt, "shuffle: stream ended early");
      done += got;
    }
  }

  unsigned width_;
  uint64_t block_;  // elements per run; 0 = the whole stream is one run
};

}  // namespace

std::unique_ptr<Stage> make_shuffle(const Params& p, uint32_t) {
  auto s = std::make_unique<Shuffle>(static_cast<unsigned>(p.integer("width")),
                                     static_cast<uint64_t>(p.integer("block")));
  s->only_stream = p.text("stream") == "all" ? "" : p.text("stream");
  return s;
}

}  // namespace gradcodec::stages
