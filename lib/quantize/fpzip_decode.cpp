// SPDX-License-Identifier: BSD-3-Clause
#include "quantize/fpzip_decode.hpp"

#include <gradcodec/error.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <string>
#include <vector>

namespace gradcodec::fpzip {

namespace {

[[noreturn]] void corrupt(const std::string& why) { fail(ErrorCode::Corrupt, "fpzip: " + why); }

// The quasi-static model (Lindstrom & Isenburg 2006: the residual symbols' adaptive
// frequencies). Frequencies total 2^16; every symbol starts near 2^16 / symbols and never drops
// below 1, so each symbol's interval [cumf[s], cumf[s+1]) is non-empty and together they tile
// [0, 2^16). A 129-entry table maps the top 7 bits of a cumulative count to the first symbol
// whose interval can hold it.
class QsModel {
 public:
  static constexpr unsigned kBits = 16;
  static constexpr uint32_t kTotal = uint32_t{1} << kBits;

  explicit QsModel(uint32_t symbols) : n_(symbols), symf_(symbols), cumf_(symbols + 1) {
    cumf_[0] = 0;
    cumf_[n_] = kTotal;
    rescale_ = (n_ >> 4) | 2;
    const uint32_t f = kTotal / n_, extra = kTotal % n_;
    for (uint32_t i = 0; i < n_; ++i) symf_[i] = f + (i < extra ? 1 : 0);
    rebuild();
  }

  // The symbol whose interval holds the cumulative count l (l < kTotal, checked by the caller),
  // its interval's start and width; counts the symbol.
  uint32_t decode(uint32_t l, uint32_t& start, uint32_t& width) {
    const uint32_t t = l >> kSearchShift;  // <= 127 as l < 2^16
    uint32_t s = search_[t], h = search_[t + 1] + 1;  // both <= n_: the table holds symbols
    while (s + 1 < h) {
      const uint32_t m = (s + h) / 2;
      if (l < cumf_[m]) h = m;
      else s = m;
    }
    start = cumf_[s];
    width = cumf_[s + 1] - start;
    if (left_ == 0) rebuild();
    --left_;
    symf_[s] += incr_;
    return s;
  }

 private:
  static constexpr unsigned kTableBits = 7;
  static constexpr unsigned kSearchShift = kBits - kTableBits;
  static constexpr uint32_t kPeriod = 0x400;  // symbols between rebuilds, once grown

  // Spreads the pending increments over the next period, or, when the period is over, turns the
  // counted frequencies into the cumulative table, halves them (each stays odd, so >= 1), and sets
  // the increment so that the counts reach kTotal again by the end of the next period.
  void rebuild() {
    if (more_ != 0) {
      left_ = more_;
      more_ = 0;
      ++incr_;
      return;
    }
    if (rescale_ != kPeriod) rescale_ = std::min(rescale_ * 2, kPeriod);
    uint32_t cf = kTotal, count = kTotal;
    for (uint32_t i = n_; i-- > 0;) {
      cf -= symf_[i];
      cumf_[i] = cf;
      symf_[i] = (symf_[i] >> 1) | 1;
      count -= symf_[i];
    }
    incr_ = count / rescale_;
    more_ = count % rescale_;
    left_ = rescale_ - more_;
    uint32_t h = uint32_t{1} << kTableBits;
    for (uint32_t i = n_; i-- > 0;) {
      for (uint32_t l = cumf_[i] >> kSearchShift; l <= h; ++l) search_[l] = i;
      h = cumf_[i] >> kSearchShift;
    }
  }

  uint32_t n_;
  std::vector<uint32_t> symf_;  // frequencies counted since the last rebuild
  std::vector<uint32_t> cumf_;  // n_ + 1 cumulative frequencies of the last rebuild
  std::array<uint32_t, (1u << kTableBits) + 1> search_{};
  uint32_t left_ = 0, more_ = 0, incr_ = 0, rescale_ = 0;
};

// The range decoder (Lindstrom & Isenburg 2006; a carry-less range coder with 32-bit
// registers). Every byte comes from `in` through get(); every division is by a range checked
// non-zero; every decoded quantity is checked against the bound the encoder respects.
class RangeDecoder {
 public:
  explicit RangeDecoder(std::span<const uint8_t> in) : begin_(in.data()), p_(in.data()), end_(in.data() + in.size()) {
    get(4);
  }
  size_t consumed() const { return static_cast<size_t>(p_ - begin_); }

  uint32_t symbol(QsModel& m) {
    range_ >>= QsModel::kBits;
    if (range_ == 0) corrupt("range coder interval collapsed at byte " + std::to_string(consumed()));
    const uint32_t l = (code_ - low_) / range_;
    if (l >= QsModel::kTotal)
      corrupt("cumulative count " + std::to_string(l) + " at byte " + std::to_string(consumed()) +
              " is not below the model's total 65536");
    uint32_t start = 0, width = 0;
    const uint32_t s = m.decode(l, start, width);
    low_ += range_ * start;
    range_ *= width;
    normalize();
    return s;
  }

  // k raw bits (k <= 31), the low 16 first.
  uint32_t raw_bits(unsigned k) {
    uint32_t lo = 0;
    unsigned at = 0;
    if (k > 16) lo = raw(16), at = 16, k -= 16;
    return (raw(k) << at) + lo;
  }

 private:
  uint32_t raw(unsigned n) {  // n <= 16
    range_ >>= n;
    if (range_ == 0) corrupt("range coder interval collapsed at byte " + std::to_string(consumed()));
    const uint32_t s = (code_ - low_) / range_;
    if ((s >> n) != 0)
      corrupt("raw part " + std::to_string(s) + " wider than " + std::to_string(n) + " bits at byte " +
              std::to_string(consumed()));
    low_ += range_ * s;
    normalize();
    return s;
  }
  void get(unsigned n) {
    for (unsigned i = 0; i < n; ++i) {
      if (p_ == end_) corrupt("stream of " + std::to_string(consumed()) + " bytes ends inside a value");
      code_ = (code_ << 8) | *p_++;
      low_ <<= 8;
    }
  }
  void normalize() {
    while (((low_ ^ (low_ + range_)) >> 24) == 0) {  // top byte settled
      get(1);
      range_ <<= 8;
    }
    if ((range_ >> 16) == 0) {  // top byte unsettled and range small: give up the carry
      get(2);
      range_ = 0u - low_;
    }
  }

  const uint8_t* begin_;
  const uint8_t* p_;
  const uint8_t* end_;
  uint32_t low_ = 0, range_ = ~0u, code_ = 0;
};

// fpzip's order-preserving map of a float's leading `bits` bits to an unsigned integer, and back
// (Lindstrom & Isenburg 2006), on bit patterns.
struct Map {
  unsigned bits, shift;
  uint32_t forward(uint32_t x) const {
    uint32_t r = ~x >> shift;
    return r ^ ((0u - (r >> (bits - 1))) >> (shift + 1));
  }
  uint32_t inverse(uint32_t r) const {
    r ^= (0u - (r >> (bits - 1))) >> (shift + 1);
    return ~r << shift;
  }
  uint32_t identity(uint32_t x) const { return x >> shift << shift; }
};

// The 1-D Lorenzo prediction as libfpzip computes it: the previous value minus and plus six zero
// neighbours in float arithmetic. Adding +0 turns -0 into +0 and quiets a signalling NaN; every
// other value passes unchanged (subnormals included). Done on bits so that no compiler flag or
// floating-point environment can change it.
uint32_t predict(uint32_t prev) {
  if (prev == 0x80000000u) return 0;
  if ((prev & 0x7f800000u) == 0x7f800000u && (prev & 0x007fffffu) != 0) return prev | 0x00400000u;
  return prev;
}

}  // namespace

size_t decode_floats(std::span<const uint8_t> in, int precision, std::span<float> out) {
  const int b = precision == 0 ? 32 : precision;
  if (b < 2 || b > 32) fail(ErrorCode::Internal, "fpzip: precision " + std::to_string(precision) + " is not 0 or 2..32");
  const Map map{static_cast<unsigned>(b), static_cast<unsigned>(32 - b)};
  RangeDecoder rd(in);
  uint32_t prev = 0;
  if (b <= 8) {
    // Small alphabet: the symbol is the residual plus bias, 2^(b+1) - 1 symbols.
    const uint32_t bias = (uint32_t{1} << b) - 1;
    QsModel model(2 * bias + 1);
    for (float& v : out) {
      const uint32_t s = rd.symbol(model);
      prev = map.inverse(map.forward(predict(prev)) + s - bias);
      v = std::bit_cast<float>(prev);
    }
  } else {
    // Wide: symbol bias ± (k + 1) for a residual of magnitude in [2^k, 2^(k+1)), bias for none.
    const uint32_t bias = static_cast<uint32_t>(b);
    QsModel model(2 * bias + 1);
    for (float& v : out) {
      const uint32_t pred = predict(prev);
      const uint32_t s = rd.symbol(model);  // < 2b + 1, so k <= b - 1 <= 31 below
      if (s > bias) {
        const unsigned k = s - bias - 1;
        prev = map.inverse(map.forward(pred) + ((uint32_t{1} << k) + rd.raw_bits(k)));
      } else if (s < bias) {
        const unsigned k = bias - 1 - s;
        prev = map.inverse(map.forward(pred) - ((uint32_t{1} << k) + rd.raw_bits(k)));
      } else {
        prev = map.identity(pred);
      }
      v = std::bit_cast<float>(prev);
    }
  }
  return rd.consumed();
}

}  // namespace gradcodec::fpzip
