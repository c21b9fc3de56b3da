// SPDX-License-Identifier: BSD-3-Clause
// Index coders, generated over every coder: exact round trips of every position set we could
// think of (edge sets, dense runs, alternating, random densities 1e-5…0.5, d = 1, universes beyond
// 2^32 up to 2^64 − 1), each stream exactly the size its formula predicts; value-order handling.
#include <catch2/catch.hpp>

#include "stages/index_support.hpp"

using namespace gradcodec;
using namespace gradcodec::test::ix;

namespace {

struct Case {
  std::string name;
  uint64_t d;
  std::vector<uint64_t> pos;
};

std::vector<uint64_t> range(uint64_t a, uint64_t b, uint64_t step = 1) {
  std::vector<uint64_t> v;
  for (uint64_t i = a; i < b; i += step) v.push_back(i);
  return v;
}

std::vector<Case> small_cases() {
  std::vector<Case> cs;
  for (uint64_t d : {1, 2, 7, 8, 9, 64, 65, 1000, 4099}) {
    const std::string D = " d=" + std::to_string(d);
    cs.push_back({"empty" + D, d, {}});
    cs.push_back({"full" + D, d, range(0, d)});
    cs.push_back({"single first" + D, d, {0}});
    cs.push_back({"single last" + D, d, {d - 1}});
    cs.push_back({"alternating even" + D, d, range(0, d, 2)});
    if (d > 1) cs.push_back({"alternating odd" + D, d, range(1, d, 2)});
    std::vector<uint64_t> runs = range(0, d / 4);  // dense runs: head, middle, tail
    for (uint64_t x : range(d / 2, d / 2 + d / 8 + 1)) runs.push_back(x);
    for (uint64_t x : range(d - d / 8, d))
      if (x > runs.back()) runs.push_back(x);
    cs.push_back({"dense runs" + D, d, runs});
    cs.push_back({"first and last" + D, d, d > 1 ? std::vector<uint64_t>{0, d - 1} : std::vector<uint64_t>{0}});
  }
  cs.push_back({"empty universe", 0, {}});
  return cs;
}

// Encodes, checks the size formula, decodes, checks the set.
void check_roundtrip(const CoderSpec& c, uint64_t d, const std::vector<uint64_t>& pos) {
  auto coder = make_coder(c);
  auto bytes = encode(*coder, d, pos);
  CHECK(bytes.size() == (predicted_bits(c, d, pos) + 7) / 8);
  Payload q = decode(*coder, d, bytes);
  CHECK(!q.value_order);
  REQUIRE(q.index.size() == pos.size());
  CHECK(q.index == pos);
}

}  // namespace

TEST_CASE("index coders round-trip edge sets, runs and alternations at every small d", "[index]") {
  for (const auto& c : all_coders())
    for (const auto& k : small_cases()) {
      INFO(c.label() << " " << k.name << " k=" << k.pos.size());
      check_roundtrip(c, k.d, k.pos);
    }
}

TEST_CASE("index coders round-trip random sets at densities 1e-5 to 0.5", "[index]") {
  const uint64_t d = 2'000'003;  // 1e-5 keeps about 20; not a multiple of 8
  uint64_t seed = 11;
  for (double rho : {1e-5, 1e-4, 1e-3, 1e-2, 0.1, 0.5}) {
    auto pos = bernoulli(d, rho, seed++);
    REQUIRE(!pos.empty());
    for (const auto& c : all_coders()) {
      INFO(c.label() << " density " << rho << " k=" << pos.size());
      check_roundtrip(c, d, pos);
    }
  }
  auto exact = uniform_k(1'000'000, 10'000, 5);
  REQUIRE(exact.size() == 10'000);
  for (const auto& c : all_coders()) {
    INFO(c.label() << " uniform 1%");
    check_roundtrip(c, 1'000'000, exact);
  }
}

TEST_CASE("index coders round-trip universes beyond 2^32 without allocating d", "[index]") {
  using namespace gradcodec::stages;
  const uint64_t two32 = uint64_t{1} << 32;
  CHECK(plain_width(two32 - 1) == 4);
  CHECK(plain_width(two32) == 8);
  const std::vector<uint64_t> near = {3, two32 / 2, two32 - 1, two32 + 4, two32 + 5, two32 + 9};
  const uint64_t top = UINT64_MAX;  // the largest universe: positions up to 2^64 − 2
  const std::vector<uint64_t> extreme = {0, uint64_t{1} << 63, top - 1};
  const uint64_t d33 = (uint64_t{1} << 33) + 3;
  const auto draws = sparse_draws(d33, 86'000, 3);  // density 1e-5 of 2^33
  for (const auto& c : all_coders()) {
    if (c.name == "bitmap") continue;  // costs d bits: by its formula only (below)
    INFO(c.label());
    check_roundtrip(c, two32 + 10, near);
    check_roundtrip(c, two32 + 10, {two32 + 5});
    check_roundtrip(c, top, extreme);
    check_roundtrip(c, d33, draws);
  }
  // plain switched to u64 words: 6 positions + the flags byte.
  auto plain = make_coder({"plain", ""});
  auto bytes = encode(*plain, two32 + 10, near);
  REQUIRE(bytes.size() == 6 * 8 + 1);
  uint64_t fifth;
  std::memcpy(&fifth, bytes.data() + 4 * 8, 8);
  CHECK(fifth == two32 + 5);
  // bitmap by arithmetic: d bits plus the count.
  CHECK(bitmap_bits(d33, draws.size()) == d33 + 8 * 3);
  CHECK(bitmap_bits(uint64_t{1} << 40, 5) == (uint64_t{1} << 40) + 8);
  CHECK(bitmap_bits(top, 1) == top);  // saturates instead of wrapping
}

TEST_CASE("plain and varint keep a value-order index; the other coders refuse it", "[index]") {
  const std::vector<uint64_t> unsorted = {500, 3, 77, 999, 0, 640};
  const uint64_t big = (uint64_t{1} << 33) + 1;
  for (const auto& c : all_coders()) {
    INFO(c.label());
    auto coder = make_coder(c);
    if (c.name == "plain" || c.name == "varint") {
      CHECK(coder->keeps_order());
      for (uint64_t d : {uint64_t{1000}, big}) {
        auto bytes = encode(*coder, d, unsorted, true);
        CHECK(bytes.size() == (predicted_bits(c, d, unsorted, true) + 7) / 8);
        Payload q = decode(*coder, d, bytes);
        CHECK(q.value_order);
        CHECK(q.index == unsorted);
      }
      // Without value order the flag stays clear.
      Payload q = decode(*coder, 1000, encode(*coder, 1000, {1, 2, 3}));
      CHECK(!q.value_order);
    } else {
      CHECK(!coder->keeps_order());
      try {
        encode(*coder, 1000, unsorted, true);
        FAIL("value order accepted");
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::Usage);
        CHECK(std::string(e.what()).find(c.name) != std::string::npos);
        CHECK(std::string(e.what()).find("value-order") != std::string::npos);
      }
    }
  }
}

TEST_CASE("encoders refuse an index that breaks the sparsifier's contract", "[index]") {
  for (const auto& c : all_coders()) {
    INFO(c.label());
    auto coder = make_coder(c);
    auto code_of = [&](uint64_t d, std::vector<uint64_t> pos) {
      try {
        encode(*coder, d, pos);
      } catch (const Error& e) {
        CHECK(std::string(e.what()).find(c.name) != std::string::npos);
        return e.code();
      }
      return ErrorCode::Mismatch;  // stands for "accepted"
    };
    CHECK(code_of(100, {5, 3}) == ErrorCode::Internal);    // descending without value order
    CHECK(code_of(100, {5, 5}) == ErrorCode::Internal);    // repeated
    CHECK(code_of(100, {5, 100}) == ErrorCode::Internal);  // outside the universe
  }
}

TEST_CASE("every index coder has its registry row; varint exists for the pipeline's implied coder", "[index]") {
  int coders = 0;
  for (const auto& e : stage_table()) {
    if (e.kind != StageKind::IndexCoder) continue;
    ++coders;
    INFO(e.name);
    CHECK(e.version == 1);
    CHECK(std::string(e.example).rfind("topk(", 0) == 0);
    CHECK(std::string(e.example).find(e.name) != std::string::npos);
    CHECK(std::string(e.source).size() > 3);
  }
  CHECK(coders >= 7);
  REQUIRE(find_stage("varint"));
  CHECK(find_stage("varint")->kind == StageKind::IndexCoder);
  CHECK(find_stage("varint")->params.empty());  // the parser inserts it with no parameters
}
