// SPDX-License-Identifier: BSD-3-Clause
#include "quantize/skcompress.hpp"

#include "index/gaps.hpp"
#include "quantize/codes.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <queue>
#include <string>

namespace gradcodec::stages {

namespace {
constexpr const char* kName = "skcompress";
constexpr unsigned kLengthBits = 5;

uint64_t mix(uint64_t z) noexcept {  // the splitmix64 finalizer
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Key of coded value i: its element position.
uint64_t key_of(const Payload& p, uint64_t i) noexcept {
  if (!p.sparse) return i;
  return p.index[i / p.block] * p.block + i % p.block;
}

// Canonical codes of `lengths`: code[s] holds the bits, MSB-first, of length lengths[s].
std::vector<uint32_t> canonical_codes(std::span<const uint8_t> lengths) {
  std::vector<uint32_t> code(lengths.size(), 0);
  uint32_t next = 0;
  unsigned prev = 0;
  for (unsigned len = 1; len <= kSkMaxCodeLength; ++len) {
    for (size_t s = 0; s < lengths.size(); ++s) {
      if (lengths[s] != len) continue;
      next <<= (len - prev);
      prev = len;
      code[s] = next++;
    }
  }
  return code;
}

// Decoder of a canonical code; refuses lengths whose Kraft sum exceeds 1.
class CanonicalDecoder {
 public:
  explicit CanonicalDecoder(std::span<const uint8_t> lengths) {
    uint64_t kraft = 0;
    for (size_t s = 0; s < lengths.size(); ++s) {
      if (lengths[s] > kSkMaxCodeLength)
        idx::corrupt(kName, "code length " + std::to_string(lengths[s]) + " exceeds " + std::to_string(kSkMaxCodeLength));
      if (lengths[s] == 0) continue;
      ++count_[lengths[s]];
      kraft += uint64_t{1} << (kSkMaxCodeLength - lengths[s]);
    }
    if (kraft == 0) idx::corrupt(kName, "no symbol has a code");
    if (kraft > (uint64_t{1} << kSkMaxCodeLength)) idx::corrupt(kName, "code lengths violate the Kraft inequality");
    for (unsigned len = 1; len <= kSkMaxCodeLength; ++len)
      for (size_t s = 0; s < lengths.size(); ++s)
        if (lengths[s] == len) sorted_.push_back(static_cast<uint32_t>(s));
    uint64_t first = 0, offset = 0;
    for (unsigned len = 1; len <= kSkMaxCodeLength; ++len) {
      first_[len] = first;
      offset_[len] = offset;
      offset += count_[len];
      first = (first + count_[len]) << 1;
    }
  }
  uint32_t next(BitReader& r) const {
    uint64_t code = 0;
    for (unsigned len = 1; len <= kSkMaxCodeLength; ++len) {
      if (r.bits_left() == 0) idx::corrupt(kName, "stream ends inside a Huffman code");
      code = (code << 1) | r.get(1);
      if (code - first_[len] < count_[len] && code >= first_[len]) return sorted_[offset_[len] + code - first_[len]];
    }
    idx::corrupt(kName, "a bit string that is no Huffman code of the stored lengths");
  }

 private:
  uint64_t count_[kSkMaxCodeLength + 1] = {};
  uint64_t first_[kSkMaxCodeLength + 1] = {};
  uint64_t offset_[kSkMaxCodeLength + 1] = {};
  std::vector<uint32_t> sorted_;
};

}  // namespace

uint64_t sk_cell(uint64_t key, unsigned row, uint64_t width) noexcept {
  const uint64_t h = mix(key + (uint64_t{row} + 1) * 0x9E3779B97F4A7C15ull);
  return static_cast<uint64_t>((static_cast<unsigned __int128>(h) * width) >> 64);
}

uint64_t sk_width(uint64_t n, double cols) noexcept {
  const double w = std::ceil(cols * static_cast<double>(n));
  return w < 1 ? 1 : static_cast<uint64_t>(w);
}

SkBuckets sk_buckets(std::span<const float> v, uint32_t q) {
  SkBuckets b;
  const uint64_t n = v.size();
  if (n == 0) return b;
  const uint64_t nq = std::min<uint64_t>(q, n);
  std::vector<float> a(n);
  for (uint64_t i = 0; i < n; ++i) a[i] = std::fabs(v[i]);
  std::sort(a.begin(), a.end());
  for (uint64_t s = 1; s < nq; ++s) b.split.push_back(a[s * n / nq]);
  std::vector<double> sum(nq, 0.0);
  std::vector<uint64_t> count(nq, 0);
  b.bucket.resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    const auto at = std::upper_bound(b.split.begin(), b.split.end(), std::fabs(v[i])) - b.split.begin();
    b.bucket[i] = static_cast<uint32_t>(at);
    sum[at] += std::fabs(v[i]);
    ++count[at];
  }
  // An empty bucket's mean is its lower split. Bucket 0 has none; it is empty only when every
  // magnitude is at least split 1 = a[n/Q], i.e. when a[0] equals it (ties at the bottom), and its
  // mean is then a[0].
  b.mean.resize(nq);
  for (uint64_t s = 0; s < nq; ++s)
    b.mean[s] = count[s] ? static_cast<float>(sum[s] / static_cast<double>(count[s])) : s ? b.split[s - 1] : a[0];
  return b;
}

std::vector<uint32_t> sk_sketch(std::span<const uint64_t> keys, std::span<const uint32_t> bucket, unsigned rows,
                                uint64_t width) {
  constexpr uint32_t kEmpty = UINT32_MAX;
  std::vector<uint32_t> cells(rows * width, kEmpty);
  for (size_t i = 0; i < keys.size(); ++i)
    for (unsigned j = 0; j < rows; ++j) {
      uint32_t& c = cells[j * width + sk_cell(keys[i], j, width)];
      c = std::min(c, bucket[i]);
    }
  for (uint32_t& c : cells)
    if (c == kEmpty) c = 0;
  return cells;
}

uint32_t sk_query(std::span<const uint32_t> cells, uint64_t key, unsigned rows, uint64_t width) noexcept {
  uint32_t est = 0;
  for (unsigned j = 0; j < rows; ++j) est = std::max(est, cells[j * width + sk_cell(key, j, width)]);
  return est;
}

std::vector<uint8_t> sk_huffman_lengths(std::span<const uint64_t> freq_in) {
  std::vector<uint64_t> freq(freq_in.begin(), freq_in.end());
  const size_t ns = freq.size();
  std::vector<uint8_t> len(ns, 0);
  size_t used = 0;
  for (uint64_t f : freq) used += f != 0;
  if (used == 0) return len;
  if (used == 1) {
    for (size_t s = 0; s < ns; ++s)
      if (freq[s]) len[s] = 1;
    return len;
  }
  for (;;) {
    // Nodes 0..ns−1 are the symbols; ties broken by node number, so the result is deterministic.
    std::vector<size_t> parent(ns, SIZE_MAX);
    using Item = std::pair<uint64_t, size_t>;
    std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
    for (size_t s = 0; s < ns; ++s)
      if (freq[s]) heap.push({freq[s], s});
    while (heap.size() > 1) {
      const Item a = heap.top();
      heap.pop();
      const Item b = heap.top();
      heap.pop();
      const size_t node = parent.size();
      parent.push_back(SIZE_MAX);
      parent[a.second] = parent[b.second] = node;
      heap.push({a.first + b.first, node});
    }
    unsigned longest = 0;
    for (size_t s = 0; s < ns; ++s) {
      if (!freq[s]) continue;
      unsigned d = 0;
      for (size_t x = s; parent[x] != SIZE_MAX; x = parent[x]) ++d;
      len[s] = static_cast<uint8_t>(std::min<unsigned>(d, 255));
      longest = std::max(longest, d);
    }
    if (longest <= kSkMaxCodeLength) return len;
    for (uint64_t& f : freq)
      if (f) f = (f + 1) / 2;
  }
}

uint64_t sk_huffman_bits(std::span<const uint8_t> lengths, std::span<const uint32_t> symbols) noexcept {
  uint64_t bits = 0;
  for (uint32_t s : symbols) bits += lengths[s];
  return bits;
}

uint64_t skcompress_value_bits(uint64_t n, std::span<const uint8_t> lengths, std::span<const uint32_t> cells) noexcept {
  return n + kLengthBits * lengths.size() + sk_huffman_bits(lengths, cells);
}

namespace {

class SkCompress final : public Quantizer {
 public:
  SkCompress(uint32_t buckets, unsigned rows, double cols) : buckets_(buckets), rows_(rows), cols_(cols) {}

  // The sorted magnitudes, bucket numbers and keys of the coded values (12 bytes each), the
  // r·⌈c·n⌉ cells (4 bytes each), the streams (under 4 bytes a value).
  double work_per_element(const TensorInfo&, double kept) const noexcept override {
    return kept * (16 + 4 * rows_ * (cols_ + 1));
  }

  void encode(Payload& p, Streams& out, const StageContext&) override {
    const std::span<const float> v = codes::coded_values(p);
    const uint64_t n = v.size();
    for (float x : v)
      if (!std::isfinite(x)) {
        p.overflow = "skcompress: a NaN or infinite value to code";
        return;
      }
    if (n == 0) {
      out.add(kValueStream, 1);
      out.add(kScaleStream, 4);
      return;
    }
    const SkBuckets b = sk_buckets(v, buckets_);
    std::vector<uint64_t> keys(n);
    for (uint64_t i = 0; i < n; ++i) keys[i] = key_of(p, i);
    const uint64_t w = sk_width(n, cols_);
    const std::vector<uint32_t> cells = sk_sketch(keys, b.bucket, rows_, w);
    std::vector<uint64_t> freq(b.mean.size(), 0);
    for (uint32_t c : cells) ++freq[c];
    const std::vector<uint8_t> lengths = sk_huffman_lengths(freq);
    const std::vector<uint32_t> code = canonical_codes(lengths);
    std::vector<uint8_t> bytes;
    bytes.reserve(skcompress_value_bits(n, lengths, cells) / 8 + 16);
    BitWriter bw(bytes);
    for (float x : v) bw.bit(codes::sign_bit(x));
    for (uint8_t l : lengths) bw.put(l, kLengthBits);
    for (uint32_t c : cells) bw.put(code[c], lengths[c]);
    bw.flush();
    out.add(kValueStream, 1).bytes = std::move(bytes);  // (a Stream& is invalidated by the next add)
    codes::write_f32s(out.add(kScaleStream, 4), b.mean);
  }

  void decode(Payload& p, const Streams& in, const StageContext&) override {
    const uint64_t n = p.value_count();
    const auto vs = codes::stream(in, kValueStream, kName);
    const auto ss = codes::stream(in, kScaleStream, kName);
    if (p.sparse && p.index.size() * p.block != n) idx::corrupt(kName, "value count does not match the positions");
    if (n == 0) {
      codes::expect_bytes(kName, kValueStream, vs.size(), 0);
      codes::expect_bytes(kName, kScaleStream, ss.size(), 0);
      p.values.clear();
      return;
    }
    const uint64_t nq = std::min<uint64_t>(buckets_, n);
    const std::vector<float> mean = codes::read_f32s(ss, nq, kName, kScaleStream);
    for (float m : mean)
      if (!std::isfinite(m) || m < 0) idx::corrupt(kName, "a bucket mean that is negative, NaN or infinite");
    const uint64_t w = sk_width(n, cols_);
    const uint64_t ncells = rows_ * w;
    // At least a sign bit per value, the lengths and one bit per cell: checked before holding cells.
    const uint64_t least = n + kLengthBits * nq + ncells;
    if (least > vs.size() * 8)
      idx::corrupt(kName, "value stream of " + std::to_string(vs.size()) + " bytes cannot hold " + std::to_string(n) +
                              " values and " + std::to_string(ncells) + " cells");
    BitReader r(vs, "skcompress value stream");
    std::vector<uint8_t> negative(n);
    for (uint64_t i = 0; i < n; ++i) negative[i] = r.bit() ? 0 : 1;
    std::vector<uint8_t> lengths(nq);
    for (uint64_t s = 0; s < nq; ++s) lengths[s] = static_cast<uint8_t>(r.get(kLengthBits));
    const CanonicalDecoder dec(lengths);
    std::vector<uint32_t> cells(ncells);
    for (uint64_t c = 0; c < ncells; ++c) cells[c] = dec.next(r);
    idx::expect_padding(r, kName);
    p.values.resize(n);
    for (uint64_t i = 0; i < n; ++i) {
      const float m = mean[sk_query(cells, key_of(p, i), rows_, w)];
      p.values[i] = negative[i] ? -m : m;
    }
  }

 private:
  uint32_t buckets_;
  unsigned rows_;
  double cols_;
};

}  // namespace

std::unique_ptr<Stage> make_skcompress(const Params& p, uint32_t) {
  return std::make_unique<SkCompress>(static_cast<uint32_t>(p.integer("buckets")), static_cast<unsigned>(p.integer("rows")),
                                      p.num("cols"));
}
}  // namespace gradcodec::stages
