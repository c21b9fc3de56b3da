// SPDX-License-Identifier: BSD-3-Clause
#include "index/elias.hpp"

#include "index/gaps.hpp"

#include <bit>

namespace gradcodec::stages {

unsigned elias_code_bits(EliasKind kind, uint64_t v) noexcept {
  const unsigned n = static_cast<unsigned>(std::bit_width(v));  // ⌊log2 v⌋ + 1
  if (kind == EliasKind::Gamma) return 2 * n - 1;
  return n - 1 + 2 * static_cast<unsigned>(std::bit_width(n)) - 1;
}

uint64_t elias_bits(EliasKind kind, std::span<const uint64_t> positions) noexcept {
  uint64_t bits = 8 * idx::leb128_size(positions.size());
  idx::for_each_gap(positions, [&](uint64_t g) { bits += elias_code_bits(kind, g + 1); });
  return bits;
}

namespace {

constexpr const char* kName = "elias";

// gamma(v): (N−1) zeros then v in N bits; v's top bit is the terminating 1.
void put_gamma(BitWriter& bw, uint64_t v) {
  const unsigned n = static_cast<unsigned>(std::bit_width(v));
  if (n <= 32) {
    bw.put(v, 2 * n - 1);  // v < 2^n: its n − 1 leading zero bits are the prefix
  } else {
    bw.zeros(n - 1);
    bw.put(v, n);
  }
}

class Elias final : public IndexCoder {
 public:
  explicit Elias(EliasKind kind) : kind_(kind) {}

  void encode(const Payload& p, Streams& out, const StageContext&) override {
    idx::check_positions(p, kName, false);
    Stream& s = out.add(kIndexStream);
    s.bytes.reserve(elias_bits(kind_, p.index) / 8 + 16);
    idx::put_leb128(s.bytes, p.index.size());
    BitWriter bw(s.bytes);
    // gap ≤ universe − 1 ≤ 2^64 − 2, so v = gap + 1 never wraps.
    idx::for_each_gap(p.index, [&](uint64_t g) {
      const uint64_t v = g + 1;
      if (kind_ == EliasKind::Gamma) {
        put_gamma(bw, v);
      } else {
        const unsigned n = static_cast<unsigned>(std::bit_width(v));
        put_gamma(bw, n);
        bw.put(v, n - 1);  // the bits below the leading 1
      }
    });
    bw.flush();
  }

  void decode(Payload& p, const Streams& in, const StageContext&) override {
    auto s = in.get(kIndexStream);
    size_t pos = 0;
    const uint64_t k = idx::get_leb128(s, pos, kName);
    auto bits = s.subspan(pos);
    idx::check_count(k, p.universe, bits.size() * 8, 1, kName);  // v = 1 is the 1-bit code "1"
    p.value_order = false;
    p.index.clear();
    p.index.reserve(k);
    BitReader r(bits, kind_ == EliasKind::Gamma ? "elias(gamma) index stream" : "elias(delta) index stream");
    idx::GapDecoder gaps(p.universe, kName);
    for (uint64_t i = 0; i < k; ++i) {
      uint64_t v;
      if (kind_ == EliasKind::Gamma) {
        const uint64_t z = r.unary(63);  // v < 2^64 has at most 63 zeros before its top bit
        v = (uint64_t{1} << z) | r.get(static_cast<unsigned>(z));
      } else {
        const uint64_t z = r.unary(6);  // N ≤ 64 has at most 6 zeros before its top bit
        const uint64_t n = (uint64_t{1} << z) | r.get(static_cast<unsigned>(z));
        if (n > 64) idx::corrupt(kName, "delta code announces a " + std::to_string(n) + "-bit value");
        v = (uint64_t{1} << (n - 1)) | r.get(static_cast<unsigned>(n - 1));
      }
      p.index.push_back(gaps.next(v - 1));
    }
    idx::expect_padding(r, kName);
  }

 private:
  EliasKind kind_;
};

}  // namespace

std::unique_ptr<Stage> make_elias(const Params& p, uint32_t) {
  const bool delta = p.has("kind") && p.text("kind") == "delta";
  return std::make_unique<Elias>(delta ? EliasKind::Delta : EliasKind::Gamma);
}

}  // namespace gradcodec::stages
