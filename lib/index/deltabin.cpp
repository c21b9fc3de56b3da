// SPDX-License-Identifier: BSD-3-Clause
#include "index/deltabin.hpp"

#include "index/gaps.hpp"

#include <gradcodec/bytes.hpp>

#include <algorithm>
#include <bit>
#include <string>

namespace gradcodec::stages {

namespace {
constexpr const char* kDeltaName = "deltabin";
constexpr unsigned kPrefixBits = 6;
}  // namespace

uint64_t deltabin_bits(std::span<const uint64_t> positions, uint64_t group) noexcept {
  uint64_t bits = 8 * idx::leb128_size(positions.size());
  uint64_t next = 0, width = 0, in = 0;
  for (size_t i = 0; i < positions.size(); ++i) {
    width = std::max<uint64_t>(width, std::bit_width(positions[i] - next));
    next = positions[i] + 1;
    if (++in == group || i + 1 == positions.size()) {
      bits += kPrefixBits + in * width;
      in = width = 0;
    }
  }
  return bits;
}

namespace {

class DeltaBin final : public IndexCoder {
 public:
  explicit DeltaBin(uint64_t group) : group_(group) {}

  void encode(const Payload& p, Streams& out, const StageContext&) override {
    idx::check_positions(p, kDeltaName, false);
    Stream& s = out.add(kIndexStream);
    s.bytes.reserve(deltabin_bits(p.index, group_) / 8 + 16);
    idx::put_leb128(s.bytes, p.index.size());
    BitWriter bw(s.bytes);
    const std::span<const uint64_t> pos(p.index);
    uint64_t next = 0;
    for (size_t g = 0; g < pos.size(); g += group_) {
      const size_t end = std::min<size_t>(pos.size(), g + group_);
      unsigned width = 0;
      uint64_t at = next;
      for (size_t i = g; i < end; ++i) {
        width = std::max<unsigned>(width, static_cast<unsigned>(std::bit_width(pos[i] - at)));
        at = pos[i] + 1;
      }
      if (width >= 64) fail(ErrorCode::Usage, "deltabin: a gap of 2^63 positions or more");
      bw.put(width, kPrefixBits);
      for (size_t i = g; i < end; ++i) {
        bw.put(pos[i] - next, width);
        next = pos[i] + 1;
      }
    }
    bw.flush();
  }

  void decode(Payload& p, const Streams& in, const StageContext&) override {
    const auto s = in.get(kIndexStream);
    size_t at = 0;
    const uint64_t k = idx::get_leb128(s, at, kDeltaName);
    const auto bits = s.subspan(at);
    // Each group takes at least its prefix: k ≤ G·bits/6 (and ≤ the universe) before reserving.
    if (k > p.universe || (k + group_ - 1) / group_ > bits.size() * 8 / kPrefixBits)
      idx::corrupt(kDeltaName, "count " + std::to_string(k) + " exceeds the universe " + std::to_string(p.universe) +
                                   " or what " + std::to_string(bits.size()) + " bytes can hold");
    p.value_order = false;
    p.index.clear();
    p.index.reserve(k);
    BitReader r(bits, "deltabin index stream");
    idx::GapDecoder gaps(p.universe, kDeltaName);
    for (uint64_t g = 0; g < k; g += group_) {
      const unsigned width = static_cast<unsigned>(r.get(kPrefixBits));
      const uint64_t end = std::min(k, g + group_);
      for (uint64_t i = g; i < end; ++i) p.index.push_back(gaps.next(r.get(width)));
    }
    idx::expect_padding(r, kDeltaName);
  }

 private:
  uint64_t group_;
};

}  // namespace

std::unique_ptr<Stage> make_deltabin(const Params& p, uint32_t) {
  return std::make_unique<DeltaBin>(static_cast<uint64_t>(p.integer("group")));
}

}  // namespace gradcodec::stages
