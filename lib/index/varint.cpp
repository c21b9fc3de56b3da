// SPDX-License-Identifier: BSD-3-Clause
#include "index/varint.hpp"

#include "index/gaps.hpp"

namespace gradcodec::stages {

uint64_t varint_bits(std::span<const uint64_t> positions, bool value_order) noexcept {
  uint64_t bytes = idx::leb128_size(positions.size()) + 1;
  if (value_order) {
    for (uint64_t x : positions) bytes += idx::leb128_size(x);
  } else {
    idx::for_each_gap(positions, [&](uint64_t g) { bytes += idx::leb128_size(g); });
  }
  return 8 * bytes;
}

namespace {

constexpr const char* kName = "varint";

class Varint final : public IndexCoder {
 public:
  bool keeps_order() const noexcept override { return true; }

  void encode(const Payload& p, Streams& out, const StageContext&) override {
    idx::check_positions(p, kName, true);
    Stream& s = out.add(kIndexStream);
    s.bytes.reserve(varint_bits(p.index, p.value_order) / 8);
    idx::put_leb128(s.bytes, p.index.size());
    s.bytes.push_back(p.value_order ? 1 : 0);
    if (p.value_order) {
      for (uint64_t x : p.index) idx::put_leb128(s.bytes, x);
    } else {
      idx::for_each_gap(p.index, [&](uint64_t g) { idx::put_leb128(s.bytes, g); });
    }
  }

  void decode(Payload& p, const Streams& in, const StageContext&) override {
    auto s = in.get(kIndexStream);
    size_t pos = 0;
    const uint64_t k = idx::get_leb128(s, pos, kName);
    if (pos >= s.size()) idx::corrupt(kName, "stream ends before the flags byte");
    const uint8_t flags = s[pos++];
    if (flags & ~1u) idx::corrupt(kName, "unknown flags " + std::to_string(flags));
    idx::check_count(k, p.universe, (s.size() - pos) * 8, 8, kName);  // ≥ 1 byte per position
    p.value_order = flags & 1;
    p.index.clear();
    p.index.reserve(k);
    if (p.value_order) {
      for (uint64_t i = 0; i < k; ++i) {
        const uint64_t x = idx::get_leb128(s, pos, kName);
        if (x >= p.universe)
          idx::corrupt(kName, "position " + std::to_string(x) + " is outside [0, " + std::to_string(p.universe) + ")");
        p.index.push_back(x);
      }
      idx::check_distinct(p.index, kName);
    } else {
      idx::GapDecoder gaps(p.universe, kName);
      for (uint64_t i = 0; i < k; ++i) {
        // Fast path for the common one-byte gap; get_leb128 handles the rest with its checks.
        uint64_t g;
        if (pos < s.size() && s[pos] < 0x80) g = s[pos++];
        else g = idx::get_leb128(s, pos, kName);
        p.index.push_back(gaps.next(g));
      }
    }
    if (pos != s.size()) idx::corrupt(kName, std::to_string(s.size() - pos) + " unexpected trailing bytes");
  }
};

}  // namespace

std::unique_ptr<Stage> make_varint(const Params&, uint32_t) { return std::make_unique<Varint>(); }

}  // namespace gradcodec::stages
