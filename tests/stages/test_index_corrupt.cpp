// SPDX-License-Identifier: BSD-3-Clause
// Index decoders on hostile streams: every truncation and random bit flips give Error(Corrupt)
// naming the coder or a valid (possibly different) position set — never a crash, a hang or a
// huge allocation; a lying count or header field is refused before anything is reserved.
#include <catch2/catch.hpp>

#include "index/gaps.hpp"
#include "stages/index_support.hpp"

using namespace gradcodec;
using namespace gradcodec::test::ix;
namespace idx = gradcodec::stages::idx;

namespace {

enum class Outcome { Refused, Valid };

// Decodes; a non-Corrupt error, an error not naming the coder, or an invalid set fails the test.
Outcome attempt(const CoderSpec& c, IndexCoder& coder, uint64_t d, const std::vector<uint8_t>& bytes) {
  try {
    Payload q = decode(coder, d, bytes);
    if (!valid_index(q.index, d, q.value_order)) FAIL(c.label() << " decoded an invalid index");
    return Outcome::Valid;
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Corrupt)
      FAIL(c.label() << " threw " << error_code_name(e.code()) << ": " << e.what());
    if (std::string(e.what()).find(c.name) == std::string::npos)
      FAIL("message does not name " << c.name << ": " << e.what());
    return Outcome::Refused;
  }
}

// The stream with its leading LEB128 count replaced.
std::vector<uint8_t> with_count(const std::vector<uint8_t>& b, uint64_t old_k, uint64_t new_k) {
  std::vector<uint8_t> out;
  idx::put_leb128(out, new_k);
  out.insert(out.end(), b.begin() + idx::leb128_size(old_k), b.end());
  return out;
}

struct Sample {
  uint64_t d;
  std::vector<uint64_t> pos;
};
std::vector<Sample> samples() {
  return {{3001, bernoulli(3001, 0.03, 1)}, {200, bernoulli(200, 0.6, 2)}, {77, {0, 76}}, {5000, {}}};
}

}  // namespace

TEST_CASE("every truncation of an index stream is refused or decodes to a valid set", "[index]") {
  for (const auto& c : all_coders())
    for (const auto& s : samples()) {
      auto coder = make_coder(c);
      auto bytes = encode(*coder, s.d, s.pos);
      INFO(c.label() << " d=" << s.d << " k=" << s.pos.size() << " bytes=" << bytes.size());
      size_t refused = 0;
      for (size_t len = 0; len < bytes.size(); ++len)
        refused += attempt(c, *coder, s.d, {bytes.begin(), bytes.begin() + len}) == Outcome::Refused;
      // The count (or plain's length rule) pins the length: only plain's implicit count can let
      // a shorter stream through.
      if (c.name != "plain") CHECK(refused == bytes.size());
    }
}

TEST_CASE("random bit flips in index streams never crash or hang", "[index]") {
  for (const auto& c : all_coders())
    for (const auto& s : samples()) {
      auto coder = make_coder(c);
      auto bytes = encode(*coder, s.d, s.pos);
      if (bytes.empty()) continue;
      INFO(c.label() << " d=" << s.d << " k=" << s.pos.size());
      Rng r(1000 + s.d);
      size_t refused = 0, same = 0;
      const int trials = 1500;
      for (int t = 0; t < trials; ++t) {
        auto b = bytes;
        const int flips = 1 + static_cast<int>(r.below(3));
        for (int f = 0; f < flips; ++f) b[r.below(b.size())] ^= static_cast<uint8_t>(1u << r.below(8));
        if (attempt(c, *coder, s.d, b) == Outcome::Refused) ++refused;
        else same += decode(*coder, s.d, b).index == s.pos;
      }
      CHECK(refused + same <= static_cast<size_t>(trials));
      CHECK(refused > 0);
    }
}

TEST_CASE("a lying count is refused before anything is reserved", "[index]") {
  const auto pos = bernoulli(3001, 0.03, 7);
  const uint64_t huge_universe = uint64_t{1} << 62;
  for (const auto& c : all_coders()) {
    if (c.name == "plain") continue;  // its count is the stream length (see the next test)
    INFO(c.label());
    auto coder = make_coder(c);
    auto bytes = encode(*coder, 3001, pos);
    // More positions than the universe holds.
    CHECK(attempt(c, *coder, 3001, with_count(bytes, pos.size(), 3002)) == Outcome::Refused);
    // A count far beyond what the stream's bits can hold, in a universe that would allow it: a
    // reserve of 2^61 positions would throw bad_alloc instead of Corrupt.
    for (uint64_t lie : {uint64_t{1} << 61, uint64_t{1} << 40, uint64_t(bytes.size()) * 8 + 1}) {
      Streams s;
      s.add(kIndexStream).bytes = with_count(bytes, pos.size(), lie);
      Payload q = sparse_payload(huge_universe, {});
      try {
        coder->decode(q, s, StageContext{});
        FAIL("accepted a count of " << lie);
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::Corrupt);
        CHECK(q.index.capacity() < 4096);
      }
    }
  }
}

TEST_CASE("bad header fields, trailing bytes and padding are refused", "[index]") {
  const auto pos = bernoulli(3001, 0.03, 9);
  const unsigned h = idx::leb128_size(pos.size());  // the byte after the count
  auto refused = [&](const std::string& name, uint64_t d, const std::vector<uint8_t>& b) {
    CoderSpec c{name, name == "elias" ? "gamma" : ""};
    auto coder = make_coder(c);
    return attempt(c, *coder, d, b) == Outcome::Refused;
  };
  auto stream = [&](const std::string& name) {
    auto coder = make_coder({name, name == "elias" ? "gamma" : ""});
    return encode(*coder, 3001, pos);
  };
  auto patched = [&](const std::string& name, size_t at, uint8_t v) {
    auto b = stream(name);
    b.at(at) = v;
    return b;
  };
  CHECK(refused("rle", 3001, patched("rle", h, 0)));
  CHECK(refused("rle", 3001, patched("rle", h, 65)));
  CHECK(refused("golomb", 3001, patched("golomb", h, 64)));
  CHECK(refused("tcspos", 3001, patched("tcspos", h, 64)));
  CHECK(refused("varint", 3001, patched("varint", h, 2)));  // unknown flag
  auto pl = stream("plain");
  CHECK(refused("plain", 3001, patched("plain", pl.size() - 1, 2)));  // unknown flag
  pl.pop_back();
  pl.pop_back();
  CHECK(refused("plain", 3001, pl));  // not a whole number of u32 words
  // tcspos with a tiny block in a huge universe: the block ends cannot fit, refused at once.
  CHECK(refused("tcspos", uint64_t{1} << 50, patched("tcspos", h, 0)));
  // Unary and escape runs are bounded by the stream: all-zero golomb payload, all-one rle payload.
  std::vector<uint8_t> zeros = {1, 0};
  zeros.resize(100000, 0);
  CHECK(refused("golomb", uint64_t{1} << 62, zeros));
  std::vector<uint8_t> ones = {1, 1};
  ones.resize(100000, 0xff);
  CHECK(refused("rle", uint64_t{1} << 62, ones));
  CHECK(refused("rle", 1000, ones));
  // Duplicates in a value-order index.
  auto dup = encode(*make_coder({"plain", ""}), 100, {7, 3, 7}, true);
  CHECK(refused("plain", 100, dup));
  for (const auto& c : all_coders()) {
    INFO(c.label());
    auto coder = make_coder(c);
    auto b = encode(*coder, 3001, pos);
    auto longer = b;
    longer.push_back(0);
    CHECK(attempt(c, *coder, 3001, longer) == Outcome::Refused);
    const uint64_t bits = predicted_bits(c, 3001, pos);
    if (bits % 8 != 0) {  // a padding bit set
      b.back() |= 1;
      CHECK(attempt(c, *coder, 3001, b) == Outcome::Refused);
    }
  }
}
