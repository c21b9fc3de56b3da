// SPDX-License-Identifier: BSD-3-Clause
#include "index/plain.hpp"

#include "index/gaps.hpp"

#include <cstring>

namespace gradcodec::stages {

unsigned plain_width(uint64_t d) noexcept { return d >= (uint64_t{1} << 32) ? 8u : 4u; }

uint64_t plain_bits(uint64_t d, uint64_t k) noexcept { return 8 * (k * plain_width(d) + 1); }

namespace {

constexpr const char* kName = "plain";

class Plain final : public IndexCoder {
 public:
  bool keeps_order() const noexcept override { return true; }

  void encode(const Payload& p, Streams& out, const StageContext&) override {
    idx::check_positions(p, kName, true);
    const unsigned w = plain_width(p.universe);
    Stream& s = out.add(kIndexStream, static_cast<uint8_t>(w));
    s.bytes.resize(p.index.size() * w + 1);
    uint8_t* dst = s.bytes.data();
    if (w == 8) {
      if (!p.index.empty()) std::memcpy(dst, p.index.data(), p.index.size() * 8);  // little-endian host
    } else {
      for (uint64_t x : p.index) {
        const uint32_t v = static_cast<uint32_t>(x);
        std::memcpy(dst, &v, 4);
        dst += 4;
      }
    }
    s.bytes.back() = p.value_order ? 1 : 0;
  }

  void decode(Payload& p, const Streams& in, const StageContext&) override {
    auto s = in.get(kIndexStream);
    if (s.empty()) idx::corrupt(kName, "empty stream (the flags byte is missing)");
    const uint8_t flags = s.back();
    if (flags & ~1u) idx::corrupt(kName, "unknown flags " + std::to_string(flags));
    const unsigned w = plain_width(p.universe);
    const uint64_t body = s.size() - 1;
    if (body % w)
      idx::corrupt(kName, std::to_string(body) + " bytes of positions is not a multiple of the width " +
                              std::to_string(w));
    const uint64_t k = body / w;
    idx::check_count(k, p.universe, body * 8, 8 * w, kName);
    p.value_order = flags & 1;
    p.index.resize(k);
    if (w == 8) {
      if (k) std::memcpy(p.index.data(), s.data(), k * 8);
    } else {
      for (uint64_t i = 0; i < k; ++i) {
        uint32_t v;
        std::memcpy(&v, s.data() + 4 * i, 4);
        p.index[i] = v;
      }
    }
    uint64_t next = 0;
    for (uint64_t x : p.index) {
      if (x >= p.universe)
        idx::corrupt(kName, "position " + std::to_string(x) + " is outside [0, " + std::to_string(p.universe) + ")");
      if (!p.value_order && x < next) idx::corrupt(kName, "positions are not strictly ascending");
      next = x + 1;
    }
    if (p.value_order) idx::check_distinct(p.index, kName);
  }
};

}  // namespace

std::unique_ptr<Stage> make_plain(const Params&, uint32_t) { return std::make_unique<Plain>(); }

}  // namespace gradcodec::stages
