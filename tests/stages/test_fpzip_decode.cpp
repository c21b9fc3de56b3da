// SPDX-License-Identifier: BSD-3-Clause
// Our bounds-checked fpzip decoder (lib/quantize/fpzip_decode.hpp) against libfpzip 1.3: the same
// bits and the same byte count on libfpzip's own streams, at every precision the stage takes; and
// Corrupt, never a crash, on cut, altered and crafted streams (docs/robustness.md).
#include <catch2/catch.hpp>

#include "quantize/fpzip_decode.hpp"
#include "stages/quantize_support.hpp"

#include "base/checksum.hpp"

#include <fpzip.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace gradcodec;
using namespace gradcodec::test;

namespace {

std::vector<uint8_t> lib_encode(const std::vector<float>& v, int prec) {
  std::vector<uint8_t> buf(v.size() * 8 + 1024);
  FPZ* fpz = fpzip_write_to_buffer(buf.data(), buf.size());
  REQUIRE(fpz != nullptr);
  fpz->type = FPZIP_TYPE_FLOAT, fpz->prec = prec;
  fpz->nx = static_cast<int>(v.size()), fpz->ny = 1, fpz->nz = 1, fpz->nf = 1;
  const size_t bytes = fpzip_write(fpz, v.data());
  fpzip_write_close(fpz);
  REQUIRE(bytes > 0);
  buf.resize(bytes);
  return buf;
}

// libfpzip's decoder on its own stream (valid, so it reads no further than the stream; padded all
// the same, as its buffer reader has no end).
std::vector<uint32_t> lib_decode(const std::vector<uint8_t>& s, size_t n, int prec, size_t& read) {
  std::vector<uint8_t> copy(s);
  copy.resize(s.size() + 16 * n + 64, 0);
  std::vector<float> out(n);
  FPZ* fpz = fpzip_read_from_buffer(copy.data());
  REQUIRE(fpz != nullptr);
  fpz->type = FPZIP_TYPE_FLOAT, fpz->prec = prec;
  fpz->nx = static_cast<int>(n), fpz->ny = 1, fpz->nz = 1, fpz->nf = 1;
  read = fpzip_read(fpz, out.data());
  fpzip_read_close(fpz);
  std::vector<uint32_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = std::bit_cast<uint32_t>(out[i]);
  return b;
}

std::vector<uint32_t> our_decode(std::span<const uint8_t> s, size_t n, int prec, size_t& read) {
  std::vector<float> out(n);
  read = fpzip::decode_floats(s, prec, out);
  std::vector<uint32_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = std::bit_cast<uint32_t>(out[i]);
  return b;
}

// Corrupt, or a full decode: any other outcome (another error code) fails the test; a crash or an
// out-of-bounds access fails it under the sanitizers.
bool refused(std::span<const uint8_t> s, size_t n, int prec) {
  std::vector<float> out(n);
  try {
    fpzip::decode_floats(s, prec, out);
  } catch (const Error& e) {
    REQUIRE(e.code() == ErrorCode::Corrupt);
    return true;
  }
  return false;
}

float from_bits(uint32_t b) { return std::bit_cast<float>(b); }

// The tensors: Gaussian gradients at several scales, zeros of both signs, subnormals, extremes,
// infinities and NaNs (quiet, signalling, with payloads), and uniformly random bit patterns.
std::vector<std::pair<std::string, std::vector<float>>> tensors(size_t n, uint64_t seed) {
  std::vector<std::pair<std::string, std::vector<float>>> t;
  t.emplace_back("gaussian 1e-3", gaussian(n, seed, 1e-3f));
  t.emplace_back("gaussian 1", gaussian(n, seed + 1, 1.0f));
  t.emplace_back("zeros", std::vector<float>(n, 0.0f));
  t.emplace_back("negative zeros", std::vector<float>(n, -0.0f));
  std::mt19937_64 rng(seed);
  std::vector<float> sub(n), special(n), bits(n), sparse(n, 0.0f);
  const float specials[] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), from_bits(0x7f800001u), from_bits(0xffc01234u),
                            from_bits(0xff812345u), -0.0f, 0.0f, std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::denorm_min(), 1.0f, -1e-30f};
  for (size_t i = 0; i < n; ++i) {
    sub[i] = from_bits(static_cast<uint32_t>(rng() & 0x807fffffu));  // subnormals of both signs
    special[i] = specials[rng() % std::size(specials)];
    bits[i] = from_bits(static_cast<uint32_t>(rng()));
    if (rng() % 8 == 0) sparse[i] = static_cast<float>(std::ldexp(double(rng() % 2001) - 1000.0, -20));
  }
  t.emplace_back("subnormals", sub);
  t.emplace_back("inf, nan, -0, extremes", special);
  t.emplace_back("random bits", bits);
  t.emplace_back("mostly zero", sparse);
  return t;
}

constexpr int kPrecisions[] = {0, 2, 3, 4, 7, 8, 9, 10, 12, 16, 17, 20, 24, 25, 31, 32};

}  // namespace

TEST_CASE("fpzip decoder: bit-identical to libfpzip's, same bytes read", "[quantize][fpzip]") {
  for (size_t n : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{64}, size_t{999}, size_t{4097}}) {
    for (int prec : kPrecisions) {
      for (const auto& [name, v] : tensors(n, 1000 + n)) {
        INFO("n=" << n << " precision=" << prec << " " << name);
        const auto s = lib_encode(v, prec);
        size_t lib_read = 0, our_read = 0;
        const auto want = lib_decode(s, n, prec, lib_read);
        const auto got = our_decode(s, n, prec, our_read);
        REQUIRE(lib_read == s.size());
        CHECK(our_read == s.size());
        REQUIRE(got == want);
      }
    }
  }
}

TEST_CASE("fpzip decoder: a full 65536-value chunk of gradients, both preset precisions", "[quantize][fpzip]") {
  const auto v = gaussian(65536, 77, 3e-4f);
  for (int prec : {0, 16}) {
    INFO("precision=" << prec);
    const auto s = lib_encode(v, prec);
    size_t lib_read = 0, our_read = 0;
    const auto want = lib_decode(s, v.size(), prec, lib_read);
    CHECK(our_decode(s, v.size(), prec, our_read) == want);
    CHECK(our_read == lib_read);
  }
}

TEST_CASE("fpzip decoder: every cut stream is Corrupt", "[quantize][fpzip]") {
  for (int prec : {0, 3, 16}) {
    const auto v = gaussian(300, 5, 1e-3f);
    const auto s = lib_encode(v, prec);
    for (size_t len = 0; len < s.size(); ++len) {
      INFO("precision=" << prec << " cut to " << len << " of " << s.size());
      // The decoder reads the whole stream (previous test), so every prefix runs out of input.
      CHECK(refused(std::span<const uint8_t>(s.data(), len), v.size(), prec));
    }
  }
}

TEST_CASE("fpzip decoder: altered and crafted streams are Corrupt or decode in bounds", "[quantize][fpzip]") {
  // The model's total is 2^16: a stream of 0xff bytes asks for a cumulative count of 65537 on
  // its first symbol, past every table (libfpzip's decoder reads outside its search table there).
  for (int prec : {0, 2, 3, 8, 9, 16, 32}) {
    INFO("precision=" << prec);
    const std::vector<uint8_t> ff(64, 0xff);
    CHECK(refused(ff, 10, prec));
    CHECK(refused(std::vector<uint8_t>{}, 1, prec));
    CHECK(refused(std::vector<uint8_t>{0, 0, 0}, 1, prec));
  }
  std::mt19937_64 rng(99);
  int corrupt = 0, decoded = 0;
  for (int prec : {0, 3, 16}) {
    const auto v = gaussian(500, 8, 1e-3f);
    const auto s = lib_encode(v, prec);
    for (int trial = 0; trial < 3000; ++trial) {
      std::vector<uint8_t> bad = s;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
      if (trial % 3 == 0) bad.resize(rng() % (bad.size() + 1));  // and cut
      if (trial % 5 == 0) bad.insert(bad.end(), rng() % 32, static_cast<uint8_t>(rng()));  // or extended
      (refused(bad, v.size(), prec) ? corrupt : decoded)++;
    }
    for (int trial = 0; trial < 1000; ++trial) {  // random streams
      std::vector<uint8_t> junk(rng() % 2048);
      for (auto& x : junk) x = static_cast<uint8_t>(rng());
      (refused(junk, 1 + rng() % 600, prec) ? corrupt : decoded)++;
    }
  }
  // Most damage is caught inside the decoder itself (the stage then checks the byte count).
  CHECK(corrupt > decoded);
}

TEST_CASE("fpzip stage: altered chunks with a re-sealed hash are Corrupt or decode, never crash", "[quantize][fpzip]") {
  Tensor t = make_tensor("w", {70001}, gaussian(70001, 21, 1e-3f));  // two chunks
  std::mt19937_64 rng(7);
  for (const char* text : {"fpzip", "fpzip(precision=16)", "fpzip(precision=3)"}) {
    INFO(text);
    auto q = make_quantizer(text);
    const Streams s = code_dense(text, t).streams;
    const std::vector<uint8_t> good = s.find("value")->bytes;
    int corrupt = 0;
    for (int trial = 0; trial < 60; ++trial) {
      std::vector<uint8_t> bad = good;
      bad[12 + rng() % (bad.size() - 12)] ^= static_cast<uint8_t>(1 + rng() % 255);  // past hash and first length
      const uint64_t h = xxh3(bad.data() + 8, bad.size() - 8);
      for (int i = 0; i < 8; ++i) bad[i] = static_cast<uint8_t>(h >> (8 * i));
      Streams b = s;
      b.find("value")->bytes = bad;
      try {
        const auto out = decode_with(*q, b, t.info, false, {}, 1, false, 1);
        CHECK(out.size() == 70001);
      } catch (const Error& e) {
        REQUIRE(e.code() == ErrorCode::Corrupt);
        ++corrupt;
      }
    }
    CHECK(corrupt > 0);
  }
}
