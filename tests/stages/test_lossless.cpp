// shuffle, zstd, lzma: exact round trips of every stream, sizes, refusals of corrupt input,
// and the decompression-bomb bound.
#include <catch2/catch.hpp>

#include "support.hpp"

#include <gradcodec/registry.hpp>

using namespace gradcodec;
using namespace gradcodec::test;

namespace {
const Lossless& lossless(const std::string& text, std::unique_ptr<Stage>& keep) {
  Pipeline p = Pipeline::parse(text);
  const StageSpec& s = p.stages().back();
  keep = find_stage(s.name)->make(s.params, s.version);
  return *static_cast<Lossless*>(keep.get());
}
std::vector<uint8_t> bytes_of(size_t n, uint64_t seed, bool compressible) {
  Rng r(seed);
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = compressible ? static_cast<uint8_t>((i / 7) % 5) : static_cast<uint8_t>(r.next_u64());
  return b;
}
}  // namespace

TEST_CASE("lossless stages round-trip any bytes exactly", "[lossless]") {
  for (const char* text : {"shuffle", "shuffle(width=4)", "shuffle(width=3)", "zstd(level=1)", "zstd(level=19)",
                           "zstd(level=-5)", "lzma(preset=0)", "lzma(preset=6)"}) {
    std::unique_ptr<Stage> keep;
    const Lossless& l = lossless(text, keep);
    for (size_t n : {0, 1, 3, 4, 5, 1000, 65537}) {
      for (bool comp : {false, true}) {
        INFO(text << " n=" << n << " compressible=" << comp);
        auto in = bytes_of(n, n, comp);
        auto enc = l.encode(in, 4);
        auto dec = l.decode(enc, n);
        CHECK(dec == in);
        if (comp && n >= 1000 && std::string(text).rfind("shuffle", 0) != 0) CHECK(enc.size() < n / 4);
      }
    }
  }
}

TEST_CASE("shuffle groups byte j of every element", "[lossless]") {
  std::unique_ptr<Stage> keep;
  const Lossless& l = lossless("shuffle(width=2)", keep);
  std::vector<uint8_t> in = {1, 2, 3, 4, 5, 6, 7};
  CHECK(l.encode(in, 1) == std::vector<uint8_t>{2, 1, 3, 5, 2, 4, 6, 7});
}

TEST_CASE("lossless decoders refuse corrupt data and outputs beyond the bound", "[lossless]") {
  auto in = bytes_of(5000, 1, true);
  for (const char* text : {"zstd", "lzma"}) {
    std::unique_ptr<Stage> keep;
    const Lossless& l = lossless(text, keep);
    auto enc = l.encode(in, 1);
    INFO(text);
    // decompression bomb guard: a bound smaller than the content is refused before inflating
    try {
      l.decode(enc, 4999);
      FAIL("bound not enforced");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Corrupt);
    }
    // truncations are refused, never crash
    for (size_t cut = 0; cut < enc.size(); cut += 1 + enc.size() / 50) {
      std::vector<uint8_t> t(enc.begin(), enc.begin() + cut);
      CHECK_THROWS_AS(l.decode(t, 5000), Error);
    }
  }
}

TEST_CASE("lossless stream= applies to one stream only", "[lossless]") {
  Tensor t = make_tensor("w", {1000}, std::vector<float>(1000, 0.5f));
  RoundTrip all = roundtrip("zstd", t);
  RoundTrip other = roundtrip("zstd(stream=index)", t);
  CHECK(all.streams.get("value").size() < 100);
  CHECK(other.streams.get("value").size() == 4000);
}
