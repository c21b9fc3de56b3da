// SPDX-License-Identifier: BSD-3-Clause
#include "index/golomb.hpp"

#include "index/gaps.hpp"

#include <cmath>

namespace gradcodec::stages {

unsigned golomb_parameter(uint64_t d, uint64_t k) noexcept {
  if (k == 0 || k >= d) return 0;
  const double p = static_cast<double>(k) / static_cast<double>(d);
  const double golden = (1.0 + std::sqrt(5.0)) / 2.0;
  // ln(φ − 1) < 0 and ln(1 − p) < 0: the ratio is positive (log1p keeps tiny p accurate).
  const double b = 1.0 + std::floor(std::log2(std::log(golden - 1.0) / std::log1p(-p)));
  if (!(b > 0)) return 0;
  return b > 63 ? 63u : static_cast<unsigned>(b);
}

uint64_t golomb_payload_bits(std::span<const uint64_t> positions, unsigned b) noexcept {
  unsigned __int128 bits = 0;
  idx::for_each_gap(positions, [&](uint64_t g) { bits += (g >> b) + 1 + b; });
  return bits > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(bits);
}

uint64_t golomb_bits(uint64_t d, std::span<const uint64_t> positions) noexcept {
  const uint64_t header = 8 * (idx::leb128_size(positions.size()) + 1);
  const uint64_t payload = golomb_payload_bits(positions, golomb_parameter(d, positions.size()));
  return payload > UINT64_MAX - header ? UINT64_MAX : header + payload;
}

namespace {

constexpr const char* kName = "golomb";

class Golomb final : public IndexCoder {
 public:
  void encode(const Payload& p, Streams& out, const StageContext&) override {
    idx::check_positions(p, kName, false);
    const unsigned b = golomb_parameter(p.universe, p.index.size());
    Stream& s = out.add(kIndexStream);
    s.bytes.reserve(golomb_payload_bits(p.index, b) / 8 + 16);
    idx::put_leb128(s.bytes, p.index.size());
    s.bytes.push_back(static_cast<uint8_t>(b));
    BitWriter bw(s.bytes);
    const uint64_t low = b == 0 ? 0 : (UINT64_MAX >> (64 - b));
    idx::for_each_gap(p.index, [&](uint64_t g) {
      const uint64_t q = g >> b;
      if (q + b < 64) {  // one write: q zeros, the terminating 1, the low b bits
        bw.put((uint64_t{1} << b) | (g & low), static_cast<unsigned>(q + 1 + b));
      } else {
        bw.zeros(q);
        bw.bit(true);
        bw.put(g & low, b);
      }
    });
    bw.flush();
  }

  void decode(Payload& p, const Streams& in, const StageContext&) override {
    auto s = in.get(kIndexStream);
    size_t pos = 0;
    const uint64_t k = idx::get_leb128(s, pos, kName);
    if (pos >= s.size()) idx::corrupt(kName, "stream ends before the Rice parameter");
    const unsigned b = s[pos++];
    if (b > 63) idx::corrupt(kName, "Rice parameter " + std::to_string(b) + " is outside [0, 63]");
    auto bits = s.subspan(pos);
    idx::check_count(k, p.universe, bits.size() * 8, b + 1, kName);
    p.value_order = false;
    p.index.clear();
    p.index.reserve(k);
    BitReader r(bits, "golomb index stream");
    idx::GapDecoder gaps(p.universe, kName);
    for (uint64_t i = 0; i < k; ++i) {
      // The quotient cannot exceed what the universe still allows: the unary scan is bounded.
      const uint64_t q = r.unary(gaps.max_gap() >> b);
      const uint64_t g = (q << b) | r.get(b);
      p.index.push_back(gaps.next(g));
    }
    idx::expect_padding(r, kName);
  }
};

}  // namespace

std::unique_ptr<Stage> make_golomb(const Params&, uint32_t) { return std::make_unique<Golomb>(); }

}  // namespace gradcodec::stages
