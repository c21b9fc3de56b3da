// SPDX-License-Identifier: BSD-3-Clause
#include "index/tcspos.hpp"

#include "index/gaps.hpp"

namespace gradcodec::stages {

unsigned tcspos_log2_block(uint64_t d, uint64_t k) noexcept {
  if (k == 0) return 0;
  const uint64_t ratio = d / k + (d % k != 0);  // ⌈d/k⌉; 2^L ≥ d/k ⇔ 2^L ≥ ⌈d/k⌉
  const unsigned l = bits_for(ratio);
  return l > 63 ? 63u : l;
}

uint64_t tcspos_blocks(uint64_t d, unsigned log2_block) noexcept {
  return d == 0 ? 0 : ((d - 1) >> log2_block) + 1;
}

uint64_t tcspos_bits(uint64_t d, uint64_t k) noexcept {
  const uint64_t header = 8 * (idx::leb128_size(k) + 1);
  if (k == 0) return header;
  const unsigned l = tcspos_log2_block(d, k);
  const unsigned __int128 bits =
      static_cast<unsigned __int128>(k) * (l + 1) + tcspos_blocks(d, l) + header;
  return bits > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(bits);
}

namespace {

constexpr const char* kName = "tcspos";

class TcsPos final : public IndexCoder {
 public:
  void encode(const Payload& p, Streams& out, const StageContext&) override {
    idx::check_positions(p, kName, false);
    const uint64_t k = p.index.size();
    const unsigned l = tcspos_log2_block(p.universe, k);
    Stream& s = out.add(kIndexStream);
    s.bytes.reserve(tcspos_bits(p.universe, k) / 8 + 1);
    idx::put_leb128(s.bytes, k);
    s.bytes.push_back(static_cast<uint8_t>(l));
    if (k == 0) return;
    BitWriter bw(s.bytes);
    const uint64_t offset_mask = (uint64_t{1} << l) - 1;
    uint64_t block = 0;  // the block being written
    for (uint64_t x : p.index) {
      const uint64_t b = x >> l;
      bw.zeros(b - block);  // end the current block and every empty one before b
      block = b;
      bw.put((uint64_t{1} << l) | (x & offset_mask), l + 1);  // '1' + offset
    }
    bw.zeros(tcspos_blocks(p.universe, l) - block);  // end the last block and the empty ones after it
    bw.flush();
  }

  void decode(Payload& p, const Streams& in, const StageContext&) override {
    auto s = in.get(kIndexStream);
    size_t pos = 0;
    const uint64_t k = idx::get_leb128(s, pos, kName);
    if (pos >= s.size()) idx::corrupt(kName, "stream ends before the block size");
    const unsigned l = s[pos++];
    if (l > 63) idx::corrupt(kName, "log2 block size " + std::to_string(l) + " is outside [0, 63]");
    auto bits = s.subspan(pos);
    p.value_order = false;
    p.index.clear();
    if (k == 0) {
      if (!bits.empty()) idx::corrupt(kName, std::to_string(bits.size()) + " unexpected trailing bytes");
      return;
    }
    const uint64_t blocks = tcspos_blocks(p.universe, l);
    const uint64_t avail = bits.size() * 8;
    if (blocks > avail)
      idx::corrupt(kName, std::to_string(blocks) + " block ends do not fit in " + std::to_string(avail) + " bits");
    idx::check_count(k, p.universe, avail - blocks, l + 1, kName);
    p.index.reserve(k);
    BitReader r(bits, "tcspos index stream");
    uint64_t next = 0;  // smallest position the next one may take (strictly ascending)
    const uint64_t offset_mask = (uint64_t{1} << l) - 1;
    uint64_t block = 0;
    for (;;) {  // every step consumes at least one bit: bounded by the stream
      block += r.skip_zeros(blocks - block);  // '0': the block ends
      if (block == blocks) break;
      if (p.index.size() == k) idx::corrupt(kName, "more positions than the count of " + std::to_string(k));
      const uint64_t x = (block << l) | (r.get(l + 1) & offset_mask);  // '1' + offset
      if (x >= p.universe || x < next)
        idx::corrupt(kName, "position " + std::to_string(x) + " is out of order or outside [0, " +
                                std::to_string(p.universe) + ")");
      p.index.push_back(x);
      next = x + 1;
    }
    if (p.index.size() != k)
      idx::corrupt(kName, "count says " + std::to_string(k) + " positions, the blocks hold " +
                              std::to_string(p.index.size()));
    idx::expect_padding(r, kName);
  }
};

}  // namespace

std::unique_ptr<Stage> make_tcspos(const Params&, uint32_t) { return std::make_unique<TcsPos>(); }

}  // namespace gradcodec::stages
