// SPDX-License-Identifier: BSD-3-Clause
// BitWriter / BitReader (the index coders' bit I/O): bytes equal a bit-by-bit reference for any
// mix of widths 0..64, every read returns what was written, unary codes, and bounds.
#include <catch2/catch.hpp>

#include <gradcodec/bytes.hpp>
#include <gradcodec/rng.hpp>

#include <vector>

using namespace gradcodec;

namespace {
// Reference MSB-first packing, one bit at a time.
struct RefBits {
  std::vector<bool> bits;
  void put(uint64_t v, unsigned n) {
    for (unsigned i = n; i-- > 0;) bits.push_back((v >> i) & 1);
  }
  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> out((bits.size() + 7) / 8, 0);
    for (size_t i = 0; i < bits.size(); ++i)
      if (bits[i]) out[i / 8] |= static_cast<uint8_t>(0x80u >> (i % 8));
    return out;
  }
};
}  // namespace

TEST_CASE("BitWriter matches a bit-by-bit reference and BitReader reads it back", "[index][bits]") {
  Rng r(77);
  for (int round = 0; round < 50; ++round) {
    std::vector<uint8_t> out = {0xAB};  // a prefix already in the vector stays untouched
    BitWriter w(out);
    RefBits ref;
    struct Op {
      int kind;  // 0 put, 1 zeros, 2 unary (z zeros then 1)
      uint64_t v;
      unsigned n;
    };
    std::vector<Op> ops;
    const int count = 1 + static_cast<int>(r.below(300));
    for (int i = 0; i < count; ++i) {
      const int kind = static_cast<int>(r.below(3));
      if (kind == 0) {
        const unsigned n = static_cast<unsigned>(r.below(65));
        const uint64_t v = r.next_u64();  // high bits beyond n must be ignored
        w.put(v, n);
        const uint64_t masked = n == 64 ? v : (n == 0 ? 0 : v & ((uint64_t{1} << n) - 1));
        ref.put(masked, n);
        ops.push_back({0, masked, n});
      } else if (kind == 1) {
        const uint64_t z = r.below(150);
        w.zeros(z);
        for (uint64_t j = 0; j < z; ++j) ref.put(0, 1);
        ops.push_back({1, 0, static_cast<unsigned>(z)});
      } else {
        const uint64_t z = r.below(200);
        w.zeros(z);
        w.bit(true);
        for (uint64_t j = 0; j < z; ++j) ref.put(0, 1);
        ref.put(1, 1);
        ops.push_back({2, z, 0});
      }
    }
    CHECK(w.bits_written() == ref.bits.size());
    w.flush();
    auto want = ref.bytes();
    REQUIRE(out.size() == want.size() + 1);
    CHECK(out[0] == 0xAB);
    CHECK(std::vector<uint8_t>(out.begin() + 1, out.end()) == want);

    BitReader rd(std::span<const uint8_t>(out).subspan(1), "test stream");
    for (const auto& op : ops) {
      if (op.kind == 0) {
        REQUIRE(rd.get(op.n) == op.v);
      } else if (op.kind == 1) {
        for (unsigned left = op.n; left > 0;) {
          const unsigned t = left < 64 ? left : 64;
          REQUIRE(rd.get(t) == 0);
          left -= t;
        }
      } else {
        REQUIRE(rd.unary(1000) == op.v);
      }
    }
    CHECK(rd.position() == ref.bits.size());
    CHECK(rd.bits_left() < 8);
  }
}

TEST_CASE("BitReader throws Corrupt at the end and on over-long unary codes", "[index][bits]") {
  const std::vector<uint8_t> data = {0x00, 0x00, 0x01};  // 23 zeros then a 1
  auto code_of = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find("test stream") != std::string::npos);
      return e.code();
    }
    return ErrorCode::Mismatch;  // stands for "no error"
  };
  BitReader a(data, "test stream");
  CHECK(a.unary(23) == 23);
  CHECK(a.bits_left() == 0);
  CHECK(code_of([&] { a.get(1); }) == ErrorCode::Corrupt);
  BitReader b(data, "test stream");
  CHECK(code_of([&] { b.unary(22); }) == ErrorCode::Corrupt);
  BitReader c(std::span<const uint8_t>(data).first(2), "test stream");
  CHECK(code_of([&] { c.unary(1000); }) == ErrorCode::Corrupt);  // only zeros, then the end
  BitReader d(data, "test stream");
  CHECK(d.get(20) == 0);
  CHECK(code_of([&] { d.get(5); }) == ErrorCode::Corrupt);
  CHECK(d.get(4) == 1);
  BitReader z(data, "test stream");
  CHECK(z.skip_zeros(5) == 5);
  CHECK(z.skip_zeros(100) == 18);  // stops before the 1
  CHECK(z.get(1) == 1);
  CHECK(code_of([&] { z.skip_zeros(1); }) == ErrorCode::Corrupt);
  CHECK(z.skip_zeros(0) == 0);
  // 64-bit reads across the fast and slow paths.
  std::vector<uint8_t> ones(17, 0xff);
  BitReader e(ones, "test stream");
  CHECK(e.get(3) == 7);
  CHECK(e.get(64) == UINT64_MAX);
  CHECK(e.get(64) == UINT64_MAX);
  CHECK(e.bits_left() == 5);
}
