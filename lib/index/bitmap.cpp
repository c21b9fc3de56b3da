// SPDX-License-Identifier: BSD-3-Clause
#include "index/bitmap.hpp"

#include "index/gaps.hpp"

#include <bit>
#include <cstring>

namespace gradcodec::stages {

uint64_t bitmap_bits(uint64_t d, uint64_t k) noexcept {
  const uint64_t header = 8 * idx::leb128_size(k);
  return d > UINT64_MAX - header ? UINT64_MAX : header + d;
}

namespace {

constexpr const char* kName = "bitmap";

class Bitmap final : public IndexCoder {
 public:
  void encode(const Payload& p, Streams& out, const StageContext&) override {
    idx::check_positions(p, kName, false);
    Stream& s = out.add(kIndexStream);
    idx::put_leb128(s.bytes, p.index.size());
    const size_t header = s.bytes.size();
    s.bytes.resize(header + (p.universe + 7) / 8, 0);
    uint8_t* map = s.bytes.data() + header;
    for (uint64_t x : p.index) map[x >> 3] |= static_cast<uint8_t>(0x80u >> (x & 7));
  }

  void decode(Payload& p, const Streams& in, const StageContext&) override {
    auto s = in.get(kIndexStream);
    size_t pos = 0;
    const uint64_t k = idx::get_leb128(s, pos, kName);
    const uint64_t d = p.universe;
    const uint64_t nbytes = d / 8 + (d % 8 != 0);
    if (s.size() - pos != nbytes)
      idx::corrupt(kName, "stream holds " + std::to_string(s.size() - pos) + " bytes of bitmap, expected " +
                              std::to_string(nbytes) + " for " + std::to_string(d) + " positions");
    idx::check_count(k, d, d, 1, kName);
    const uint8_t* map = s.data() + pos;
    if (d % 8 && (map[nbytes - 1] & (0xffu >> (d % 8)))) idx::corrupt(kName, "nonzero padding bits");
    p.value_order = false;
    p.index.clear();
    p.index.reserve(k);
    // Whole 8-byte words first (big-endian so that bit order matches), then the tail bytes.
    uint64_t i = 0;
    for (; i + 8 <= nbytes; i += 8) {
      uint64_t w;
      std::memcpy(&w, map + i, 8);
      if (w == 0) continue;
      w = __builtin_bswap64(w);
      while (w) {
        const unsigned z = static_cast<unsigned>(std::countl_zero(w));
        push(p, k, i * 8 + z);
        w &= ~(uint64_t{1} << (63 - z));
      }
    }
    for (; i < nbytes; ++i)
      for (unsigned b = 0; b < 8; ++b)
        if (map[i] & (0x80u >> b)) push(p, k, i * 8 + b);
    if (p.index.size() != k)
      idx::corrupt(kName, "count says " + std::to_string(k) + " positions, the bitmap holds " +
                              std::to_string(p.index.size()));
  }

 private:
  static void push(Payload& p, uint64_t k, uint64_t x) {
    if (p.index.size() == k)
      idx::corrupt(kName, "bitmap holds more than the " + std::to_string(k) + " counted positions");
    p.index.push_back(x);
  }
};

}  // namespace

std::unique_ptr<Stage> make_bitmap(const Params&, uint32_t) { return std::make_unique<Bitmap>(); }

}  // namespace gradcodec::stages
