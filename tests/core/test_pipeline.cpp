// SPDX-License-Identifier: BSD-3-Clause
// The pipeline grammar: canonical text and JSON, presets, and every class of refusal.
#include <catch2/catch.hpp>

#include <gradcodec/pipeline.hpp>
#include <gradcodec/plugin/registry.hpp>

#include <algorithm>

using namespace gradcodec;

namespace {
// The Usage error message a pipeline text produces.
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

TEST_CASE("canonical text fills implied stages and leaves defaults out", "[pipeline]") {
  CHECK(Pipeline::parse("zstd").text() == "raw | zstd");
  CHECK(Pipeline::parse("  fp16|zstd( level = 3 )").text() == "fp16 | zstd");
  CHECK(Pipeline::parse("fp16 | zstd(level=5, stream=value)").text() == "fp16 | zstd(level=5, stream=value)");
  CHECK(Pipeline::parse("shuffle(width=4) | lzma(preset=9)").text() == "raw | shuffle(width=4) | lzma(preset=9)");
}

TEST_CASE("text -> JSON -> text is the identity for every preset and stage example", "[pipeline]") {
  std::vector<std::string> texts;
  for (const auto& p : preset_table()) texts.push_back(p.pipeline);
  for (const auto& e : stage_table()) texts.push_back(e.example);
  for (const auto& t : texts) {
    INFO(t);
    Pipeline p = Pipeline::parse(t);
    std::string canon = p.text();
    Pipeline q = Pipeline::from_json(p.json());
    CHECK(q.text() == canon);
    CHECK(q == p);
    CHECK(q.json() == p.json());
    CHECK(Pipeline::parse(canon).json() == p.json());
  }
}

TEST_CASE("JSON names every parameter with its version", "[pipeline]") {
  std::string j = Pipeline::parse("zstd").json();
  CHECK(j == R"([{"stage":"raw","version":1,"params":{}},{"stage":"zstd","version":1,"params":{"level":3,"minmatch":0,"hashlog":0,"literals":"auto","stream":"all"}}])");
  // A header written before a parameter existed reads with its default (containers stay readable).
  CHECK(Pipeline::from_json(R"([{"stage":"raw","version":1,"params":{}},{"stage":"zstd","version":1,"params":{"level":1,"stream":"all"}}])")
            .text() == "raw | zstd(level=1)");
}

TEST_CASE("numbers accept exponents and percent", "[pipeline]") {
  CHECK(Pipeline::parse("zstd(level=1e1)").text() == "raw | zstd(level=10)");
  CHECK(Pipeline::parse("lzma(preset=500%)").text() == "raw | lzma(preset=5)");
}

TEST_CASE("refusals name the stage and what would fit", "[pipeline]") {
  SECTION("unknown stage lists the stages") {
    std::string m = refusal("zstdd");
    CHECK(has(m, "unknown stage 'zstdd'"));
    CHECK(has(m, "zstd"));
    CHECK(has(m, "lzma"));
  }
  SECTION("a preset name used as a stage points to --preset") {
    CHECK(has(refusal("lossless"), "--preset lossless"));
  }
  SECTION("unknown parameter lists the stage's parameters") {
    std::string m = refusal("zstd(levl=3)");
    CHECK(has(m, "zstd: unknown parameter 'levl'"));
    CHECK(has(m, "level"));
    CHECK(has(m, "stream"));
  }
  SECTION("out of range names the range") {
    CHECK(has(refusal("zstd(level=99)"), "zstd: level=99 is out of range [-1000, 22]"));
  }
  SECTION("not a number / not an integer / not a choice") {
    CHECK(has(refusal("zstd(level=abc)"), "is not a number"));
    CHECK(has(refusal("zstd(level=2.5)"), "must be an integer"));
    CHECK(has(refusal("zstd(stream=bogus)"), "is not one of all|index|value|scale|side"));
  }
  SECTION("parameter given twice, missing value, syntax") {
    CHECK(has(refusal("zstd(level=1, level=2)"), "given twice"));
    CHECK(has(refusal("zstd(level=)"), "needs a value"));
    CHECK(has(refusal("zstd(level=1"), "expected ',' or ')'"));
    CHECK(has(refusal("zstd zstd"), "separated by '|'"));
    CHECK(has(refusal(""), "empty"));
    CHECK(has(refusal("fp16 |"), "expected a stage name"));
  }
  SECTION("ill-typed chains") {
    CHECK(has(refusal("fp16 | bf16"), "two quantizers: fp16 and bf16"));
    CHECK(has(refusal("zstd | fp16"), "fp16 (quantizer) is out of order"));
  }
}

TEST_CASE("unknown preset lists the presets", "[pipeline]") {
  try {
    Pipeline::preset("nope");
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Usage);
    CHECK(has(e.what(), "lossless"));
  }
}

TEST_CASE("a container naming an unknown stage or version is refused as corrupt", "[pipeline]") {
  auto corrupt = [](const std::string& json) {
    try {
      Pipeline::from_json(json);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Corrupt);
      return std::string(e.what());
    }
    FAIL("accepted " << json);
    return std::string();
  };
  CHECK(has(corrupt(R"([{"stage":"warp","version":1,"params":{}}])"), "unknown stage 'warp'"));
  CHECK(has(corrupt(R"([{"stage":"zstd","version":7,"params":{"level":3,"stream":"all"}}])"),
            "unknown version 7 of stage 'zstd'"));
  CHECK(has(corrupt(R"([{"stage":"zstd","version":1,"params":{"level":300,"stream":"all"}}])"), "out of range"));
  CHECK(has(corrupt("{not json"), "not valid JSON"));
  CHECK(has(corrupt("[]"), "non-empty array"));
}

TEST_CASE("every registry row is complete and every preset parses", "[pipeline]") {
  for (const auto& e : stage_table()) {
    INFO(e.name);
    CHECK(std::string(e.summary).size() > 0);
    CHECK(std::string(e.source).size() > 0);
    CHECK(find_stage(e.name) == &e);
    CHECK_NOTHROW(Pipeline::parse(e.example));
  }
  for (const auto& p : preset_table()) {
    INFO(p.name);
    CHECK_NOTHROW(Pipeline::preset(p.name));
  }
}

TEST_CASE("with_param: setting one of two alternative parameters drops the other", "[pipeline]") {
  const Pipeline topk = Pipeline::preset("topk-1pct");
  CHECK(topk.with_param("topk", "k", "10").text() == "topk(k=10) | raw | varint");
  CHECK(topk.with_param("topk", "k", "10").with_param("topk", "ratio", "0.5").text() ==
        "topk(ratio=0.5) | raw | varint");
  CHECK(Pipeline::parse("randk(k=4)").with_param("randk", "ratio", "0.25").text() ==
        Pipeline::parse("randk(ratio=0.25)").text());
  CHECK(Pipeline::parse("bird+(gamma=1.4)").with_param("bird+", "keep", "0.1").text() ==
        Pipeline::parse("bird+(keep=0.1)").text());
  // Any other parameter is kept; both given in a text are still refused.
  CHECK(Pipeline::parse("topk(ratio=0.1, scope=global)").with_param("topk", "k", "3").text() ==
        Pipeline::parse("topk(k=3, scope=global)").text());
  CHECK_THROWS_WITH(Pipeline::parse("topk(ratio=0.1, k=5)"), Catch::Contains("give ratio or k, not both"));
  CHECK_THROWS_WITH(Pipeline::parse("bird+(gamma=1, keep=0.1)"), Catch::Contains("not both"));
  // Every stage with such a pair declares both parameters (a rename would break the pairing).
  for (const auto& e : stage_table())
    for (const auto& p : e.params)
      if (const char* other = alternative_param(e.name, p.name)) {
        INFO(e.name << "." << p.name);
        CHECK(std::any_of(e.params.begin(), e.params.end(), [&](const ParamSpec& q) { return q.name == other; }));
        CHECK(std::string(alternative_param(e.name, other)) == p.name);
      }
  for (const char* s : {"topk", "randk", "bird+"}) CHECK(find_stage(s) != nullptr);
  CHECK(alternative_param("topk", "ratio") == std::string("k"));
  CHECK(alternative_param("bird+", "keep") == std::string("gamma"));
  CHECK(alternative_param("dgc", "ratio") == nullptr);
}
