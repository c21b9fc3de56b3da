// SPDX-License-Identifier: BSD-3-Clause
// xxh3(): the container's checksum is XXH3-64 whatever code computes it.
#include <catch2/catch.hpp>

#include "base/checksum.hpp"
#include "support.hpp"

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <vector>

using namespace gradcodec;

TEST_CASE("xxh3 is libxxhash's XXH3-64 for every length and alignment", "[checksum]") {
  // Every length to 4 KiB (xxhash's short-input paths, its 1 KiB stripes and their tails), then
  // longer inputs across its 1 KiB blocks, at offsets 0..7 of the buffer.
  Rng r(17);
  std::vector<uint8_t> bytes((1 << 20) + 64);
  for (auto& b : bytes) b = static_cast<uint8_t>(r.next_u64());
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t n = 0; n <= 4096; ++n) {
      INFO("offset " << offset << " length " << n);
      REQUIRE(xxh3(bytes.data() + offset, n) == XXH3_64bits(bytes.data() + offset, n));
    }
    for (size_t n : {65535, 65536, 65537, 1 << 20}) CHECK(xxh3(bytes.data() + offset, n) == XXH3_64bits(bytes.data() + offset, n));
  }
  CHECK(xxh3(nullptr, 0) == XXH3_64bits(nullptr, 0));
  // A known value (xxhash's own test vector for the empty input).
  CHECK(xxh3("", 0) == 0x2D06800538D394C2ULL);
  // Not the same code when the CPU has AVX2 (the equality above then compares two implementations).
  CHECK(xxh3_vectorised() == static_cast<bool>(__builtin_cpu_supports("avx2")));
}

TEST_CASE("Xxh3Stream over pieces equals xxh3 of the whole", "[checksum]") {
  Rng r(23);
  std::vector<uint8_t> bytes(3 << 20);
  for (auto& b : bytes) b = static_cast<uint8_t>(r.next_u64());
  // Pieces of one size, and pieces of random sizes, across xxhash's 256-byte internal buffer
  // and its 1 KiB stripes; lengths short and long.
  for (size_t n : {size_t{0}, size_t{1}, size_t{240}, size_t{241}, size_t{4097}, size_t{1} << 20, bytes.size()}) {
    for (size_t piece : {size_t{1}, size_t{63}, size_t{256}, size_t{1000}, size_t{1} << 20}) {
      if (piece == 1 && n > 5000) continue;
      INFO("length " << n << " pieces of " << piece);
      Xxh3Stream h;
      for (size_t at = 0; at < n; at += piece) h.update(bytes.data() + at, std::min(piece, n - at));
      REQUIRE(h.digest() == xxh3(bytes.data(), n));
      REQUIRE(h.digest() == XXH3_64bits(bytes.data(), n));
    }
    Xxh3Stream h;
    for (size_t at = 0; at < n;) {
      const size_t k = std::min<size_t>(r.next_u64() % 5000, n - at);
      h.update(bytes.data() + at, k);
      at += k;
    }
    CHECK(h.digest() == XXH3_64bits(bytes.data(), n));
  }
  CHECK(Xxh3Stream().digest() == 0x2D06800538D394C2ULL);
}
