#include "lossless/shuffle.hpp"

#include "core/pages.hpp"

#include <algorithm>
#include <type_traits>

namespace gradcodec::stages {

namespace {

// Byte j of each w-byte element goes to plane j: out[j·n + i] = in[i·w + j]. The widths the
// codecs use (2, 4, 8) get loops with a constant stride, which the compiler vectorises.
template <unsigned W>
void split_planes(const uint8_t* in, size_t n, uint8_t* out) {
  for (size_t i = 0; i < n; ++i)
    for (unsigned j = 0; j < W; ++j) out[j * n + i] = in[i * W + j];
}
// Elements [first, first + count) of the joined output: out[i·w + j] = in[j·n + first + i].
template <unsigned W>
void join_planes(const uint8_t* in, size_t n, size_t first, size_t count, uint8_t* out) {
  in += first;
  for (size_t i = 0; i < count; ++i)
    for (unsigned j = 0; j < W; ++j) out[i * W + j] = in[j * n + i];
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

void split(const uint8_t* in, size_t n, unsigned w, uint8_t* out) {
  switch (w) {
    case 2: return split_planes<2>(in, n, out);
    case 4: return split_planes<4>(in, n, out);
    case 8: return split_planes<8>(in, n, out);
    default:
      for (unsigned j = 0; j < w; ++j)
        for (size_t i = 0; i < n; ++i) *out++ = in[i * w + j];
  }
}
// The output of `decode`: n whole elements of width w, then the bytes of a partial element.
// Widths 2, 4 and 8 are joined in cache-sized chunks appended to fresh memory (written once);
// other widths into a zeroed buffer.
std::vector<uint8_t> join(const uint8_t* in, size_t size, unsigned w) {
  const size_t n = size / w, whole = n * w;
  auto join_chunk = [&](auto width) {
    constexpr unsigned W = decltype(width)::value;
    std::vector<uint8_t> out;
    append_chunked<16384>(out, size, [&](uint8_t* dst, size_t first, size_t count) {
      // first is a multiple of 16384, so of W: the chunk starts on an element
      const size_t elements = first < whole ? std::min(count, whole - first) / W : 0;
      join_planes<W>(in, n, first / W, elements, dst);
      for (size_t k = elements * W; k < count; ++k) dst[k] = in[first + k];  // the partial element
    });
    return out;
  };
  switch (w) {
    case 2: return join_chunk(std::integral_constant<unsigned, 2>{});
    case 4: return join_chunk(std::integral_constant<unsigned, 4>{});
    case 8: return join_chunk(std::integral_constant<unsigned, 8>{});
    default: {
      auto out = zeroed_fresh<uint8_t>(size);
      const uint8_t* p = in;
      for (unsigned j = 0; j < w; ++j)
        for (size_t i = 0; i < n; ++i) out[i * w + j] = *p++;
      for (size_t i = whole; i < size; ++i) out[i] = in[i];
      return out;
    }
  }
}

class Shuffle final : public Lossless {
 public:
  explicit Shuffle(unsigned width) : width_(width) {}
  unsigned width_for(uint8_t hint) const { return width_ ? width_ : hint ? hint : 1; }
  std::vector<uint8_t> encode(std::span<const uint8_t> in, uint8_t hint) const override {
    const unsigned w = width_for(hint);
    auto out = zeroed_fresh<uint8_t>(in.size() + 1);
    out[0] = static_cast<uint8_t>(w);
    const size_t n = in.size() / w;
    split(in.data(), n, w, out.data() + 1);
    for (size_t i = n * w; i < in.size(); ++i) out[1 + i] = in[i];  // a partial last element
    return out;
  }
  // The same bytes made on demand, plane by plane: each piece gathers byte j of a run of
  // elements (the input is read once per plane; nothing as large as the tensor is allocated).
  Pieces encode_pieces(std::span<const uint8_t> in, uint8_t hint) const override {
    const unsigned w = width_for(hint);
    const size_t n = in.size() / w, body = n * w;
    Pieces p;
    p.size = in.size() + 1;
    p.next = [in, w, n, body, at = uint64_t{0}](uint8_t* dst, size_t cap) mutable -> size_t {
      size_t done = 0;
      if (at == 0 && cap > 0) {
        dst[done++] = static_cast<uint8_t>(w);
        at = 1;
      }
      while (done < cap && at <= in.size()) {
        const size_t q = at - 1;  // position in the shuffled bytes
        size_t count;
        if (q < body) {
          const auto j = static_cast<unsigned>(q / n);
          const size_t i = q % n;
          count = std::min(cap - done, n - i);
          gather(in.data(), w, j, i, count, dst + done);
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
    unsigned w = in[0];
    if (w == 0) fail(ErrorCode::Corrupt, "shuffle: element width 0");
    const size_t size = in.size() - 1;
    if (size > max_out) fail(ErrorCode::Corrupt, "shuffle: stream larger than the tensor allows");
    return join(in.data() + 1, size, w);
  }

 private:
  unsigned width_;
};

}  // namespace

std::unique_ptr<Stage> make_shuffle(const Params& p, uint32_t) {
  auto s = std::make_unique<Shuffle>(static_cast<unsigned>(p.integer("width")));
  s->only_stream = p.text("stream") == "all" ? "" : p.text("stream");
  return s;
}

}  // namespace gradcodec::stages
