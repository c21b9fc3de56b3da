// SPDX-License-Identifier: BSD-3-Clause
// Typed-chain refusals that involve index coders (docs/grammar.md "Refusals": an ill-typed chain is
// refused at parse time with a message that names the stage and lists what would fit), and the
// implied `varint` after a sparsifier with no index coder. Cases with a sparsifier need `topk`
// (and `randk`) to be registered.
#include <catch2/catch.hpp>

#include <gradcodec/pipeline.hpp>

using namespace gradcodec;

namespace {
std::string refusal(const std::string& text) {
  try {
    Pipeline::parse(text);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Usage);
    return e.what();
  }
  FAIL("pipeline '" << text << "' was accepted");
  return "";
}
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("an index coder with no sparsifier before it is refused, listing the sparsifiers", "[pipeline][index]") {
  for (const char* text : {"golomb", "golomb | zstd", "fp16 | golomb", "raw | golomb | lzma"}) {
    INFO(text);
    std::string m = refusal(text);
    CHECK(has(m, "golomb (index coder) needs a sparsifier before it"));
    CHECK(has(m, "sparsifiers: "));
    CHECK(has(m, "topk"));  // the list names the registered sparsifiers
  }
  // Every index coder is refused the same way.
  for (const char* coder : {"plain", "varint", "bitmap", "rle", "elias(kind=delta)", "tcspos"}) {
    INFO(coder);
    CHECK(has(refusal(std::string("fp16 | ") + coder), "(index coder) needs a sparsifier before it"));
  }
  // An index coder placed before the sparsifier is caught at the coder.
  CHECK(has(refusal("golomb | topk(ratio=0.1)"), "golomb (index coder) needs a sparsifier before it"));
}

TEST_CASE("two index coders are refused", "[pipeline][index]") {
  CHECK(has(refusal("topk(ratio=0.1) | golomb | elias"), "two index coders: golomb and elias"));
  CHECK(has(refusal("topk(ratio=0.1) | fp16 | tcspos | varint | zstd"), "two index coders: tcspos and varint"));
}

TEST_CASE("an index coder before a quantizer is out of order", "[pipeline][index]") {
  std::string m = refusal("topk(ratio=0.1) | golomb | fp16");
  CHECK(has(m, "fp16 (quantizer) is out of order"));
  CHECK(has(m, "[quantizer] [index coder]"));
  CHECK(has(refusal("topk(ratio=0.1) | tcspos | raw | zstd"), "raw (quantizer) is out of order"));
  // A lossless stage before the index coder is out of order too.
  CHECK(has(refusal("topk(ratio=0.1) | zstd | golomb"), "golomb (index coder) is out of order"));
}

TEST_CASE("an index coder after a shared-seed randk is refused: its positions cost nothing", "[pipeline][index]") {
  CHECK(has(refusal("randk(ratio=0.1) | golomb"), "drop golomb"));
}

TEST_CASE("well-typed chains with index coders parse; varint is implied after a sparsifier", "[pipeline][index]") {
  CHECK(Pipeline::parse("topk(ratio=0.1)").text() == "topk(ratio=0.1) | raw | varint");
  CHECK(Pipeline::parse("topk(ratio=0.1) | zstd").text() == "topk(ratio=0.1) | raw | varint | zstd");
  CHECK(Pipeline::parse("topk(ratio=0.1) | golomb").text() == "topk(ratio=0.1) | raw | golomb");
  CHECK(Pipeline::parse("topk(ratio=0.1) | fp16 | elias(kind=delta) | zstd(stream=index)").text() ==
        "topk(ratio=0.1) | fp16 | elias(kind=delta) | zstd(stream=index)");
  CHECK(Pipeline::parse("topk(ratio=0.1) | elias").text() == "topk(ratio=0.1) | raw | elias");  // gamma: default
  CHECK(has(refusal("topk(ratio=0.1) | elias(kind=zeta)"), "is not one of gamma|delta"));
}
