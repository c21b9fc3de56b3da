// SPDX-License-Identifier: BSD-3-Clause
#include "index/rle.hpp"

#include "index/gaps.hpp"

#include <bit>

namespace gradcodec::stages {

namespace {
uint64_t escape_code(unsigned w) { return w >= 64 ? UINT64_MAX : (uint64_t{1} << w) - 1; }
}  // namespace

uint64_t rle_payload_bits(std::span<const uint64_t> positions, unsigned w) noexcept {
  const uint64_t m = escape_code(w);
  unsigned __int128 codes = 0;
  idx::for_each_gap(positions, [&](uint64_t g) { codes += (g >= m ? g / m : 0) + 1; });
  const unsigned __int128 bits = codes * w;
  return bits > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(bits);
}

unsigned rle_best_width(std::span<const uint64_t> positions) {
  // size(w) = w·(k + Σ⌊g/M⌋), M = 2^w − 1. Since ⌊g/M⌋ ≥ (g − M + 1)/M, size(w) is at least
  // w·max(k, (S + k)/M) with S = Σ g: widths whose bound cannot beat the best so far are skipped
  // without a pass over the gaps. The first width tried is the one the mean gap suggests, so a
  // typical tensor needs two or three exact passes instead of 64.
  using u128 = unsigned __int128;
  const uint64_t k = positions.size();
  if (k == 0) return 1;
  u128 sum = 0;
  idx::for_each_gap(positions, [&](uint64_t g) { sum += g; });
  auto exact = [&](unsigned w) { return static_cast<u128>(rle_payload_bits(positions, w)); };
  auto lower = [&](unsigned w) {
    const u128 by_gaps = (sum + k) / escape_code(w);
    return (by_gaps > k ? by_gaps : u128{k}) * w;
  };
  const u128 mean = sum / k;
  unsigned best_w = static_cast<unsigned>(std::bit_width(static_cast<uint64_t>(mean))) + 1;
  if (best_w > 64) best_w = 64;
  u128 best = exact(best_w);
  for (unsigned w = 1; w <= 64; ++w) {
    if (w == best_w) continue;
    const u128 lb = lower(w);
    if (lb > best || (lb == best && w > best_w)) continue;
    const u128 c = exact(w);
    if (c < best || (c == best && w < best_w)) best = c, best_w = w;
  }
  return best_w;
}

uint64_t rle_bits(std::span<const uint64_t> positions) {
  const uint64_t header = 8 * (idx::leb128_size(positions.size()) + 1);
  const uint64_t payload = rle_payload_bits(positions, rle_best_width(positions));
  return payload > UINT64_MAX - header ? UINT64_MAX : header + payload;
}

namespace {

constexpr const char* kName = "rle";

class Rle final : public IndexCoder {
 public:
  void encode(const Payload& p, Streams& out, const StageContext&) override {
    idx::check_positions(p, kName, false);
    const unsigned w = rle_best_width(p.index);
    const uint64_t m = escape_code(w);
    Stream& s = out.add(kIndexStream);
    s.bytes.reserve(rle_payload_bits(p.index, w) / 8 + 16);
    idx::put_leb128(s.bytes, p.index.size());
    s.bytes.push_back(static_cast<uint8_t>(w));
    BitWriter bw(s.bytes);
    idx::for_each_gap(p.index, [&](uint64_t g) {
      if (g >= m) {
        for (uint64_t e = g / m; e > 0; --e) bw.put(m, w);
        g %= m;
      }
      bw.put(g, w);
    });
    bw.flush();
  }

  void decode(Payload& p, const Streams& in, const StageContext&) override {
    auto s = in.get(kIndexStream);
    size_t pos = 0;
    const uint64_t k = idx::get_leb128(s, pos, kName);
    if (pos >= s.size()) idx::corrupt(kName, "stream ends before the code width");
    const unsigned w = s[pos++];
    if (w < 1 || w > 64) idx::corrupt(kName, "code width " + std::to_string(w) + " is outside [1, 64]");
    const uint64_t m = escape_code(w);
    auto bits = s.subspan(pos);
    idx::check_count(k, p.universe, bits.size() * 8, w, kName);
    p.value_order = false;
    p.index.clear();
    p.index.reserve(k);
    BitReader r(bits, "rle index stream");
    idx::GapDecoder gaps(p.universe, kName);
    for (uint64_t i = 0; i < k; ++i) {
      // Every code consumes w bits, so the loop ends with the stream; the run never exceeds the
      // largest gap the universe still allows (invariant run ≤ limit), so it cannot overflow.
      const uint64_t limit = gaps.max_gap();
      uint64_t run = 0;
      for (;;) {
        const uint64_t c = r.get(w);
        if (c != m) {
          if (c > limit - run) idx::corrupt(kName, "zero run leaves the universe");
          run += c;
          break;
        }
        if (m > limit - run) idx::corrupt(kName, "zero run leaves the universe");
        run += m;
      }
      p.index.push_back(gaps.next(run));
    }
    idx::expect_padding(r, kName);
  }
};

}  // namespace

std::unique_ptr<Stage> make_rle(const Params&, uint32_t) { return std::make_unique<Rle>(); }

}  // namespace gradcodec::stages
