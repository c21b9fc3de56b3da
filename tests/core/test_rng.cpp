// SPDX-License-Identifier: BSD-3-Clause
// The generator's random-access outputs agree with its sequential ones (samplers keyed by
// position rely on it: bird's stage decisions, vectorised or not).
#include <catch2/catch.hpp>

#include <gradcodec/rng.hpp>

#include <bit>
#include <cstdint>

using namespace gradcodec;

TEST_CASE("Rng: at(n) and uniform_at(n) are outputs n of next_u64() and uniform()", "[rng]") {
  for (uint64_t key : {uint64_t{0}, uint64_t{1}, uint64_t{0xdeadbeefcafef00dULL}}) {
    Rng seq(key), ints(key);
    const Rng fixed(key);
    for (uint64_t n = 0; n < 5000; ++n) {
      const double u = seq.uniform();
      REQUIRE(ints.next_u64() == fixed.at(n));
      REQUIRE(std::bit_cast<uint64_t>(fixed.uniform_at(n)) == std::bit_cast<uint64_t>(u));
      REQUIRE(u >= 0.0);
      REQUIRE(u < 1.0);
    }
  }
  const Rng r(Rng(7, 1, 2, RngPurpose::Stage1).key());  // the purpose-keyed stream, by its key
  CHECK(r.at(3) == Rng(7, 1, 2, RngPurpose::Stage1).at(3));
}
