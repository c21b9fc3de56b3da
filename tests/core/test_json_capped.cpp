// SPDX-License-Identifier: BSD-3-Clause
// parse_json_capped / DepthCappedSax: JSON read from a file nests at most kMaxJsonDepth levels;
// deeper text is refused before a value is built, whatever mixes of arrays and objects it nests.
#include <catch2/catch.hpp>

#include <gradcodec/detail/json_capped.hpp>

#include <gradcodec/error.hpp>
#include <gradcodec/pipeline.hpp>

#include <string>

using namespace gradcodec;

namespace {

std::string arrays(size_t levels) { return std::string(levels, '[') + std::string(levels, ']'); }

std::string objects(size_t levels) {
  std::string s;
  for (size_t i = 0; i < levels; ++i) s += "{\"k\":";
  s += "0";
  return s + std::string(levels, '}');
}

// Arrays and objects alternating: [{"k":[{"k":...}]}].
std::string mixed(size_t levels) {
  std::string open, close;
  for (size_t i = 0; i < levels; ++i) {
    open += i % 2 ? "{\"k\":" : "[";
    close = (i % 2 ? "}" : "]") + close;
  }
  return open + "1" + close;
}

size_t depth_of(const nlohmann::ordered_json& j) {
  size_t d = 0;
  const nlohmann::ordered_json* p = &j;
  while (p->is_structured() && !p->empty()) {
    ++d;
    p = p->is_array() ? &(*p)[0] : &p->begin().value();
  }
  return d + (p->is_structured() ? 1 : 0);
}

}  // namespace

TEST_CASE("parse_json_capped accepts nesting up to the cap and refuses one level more", "[json]") {
  for (const auto& make : {arrays, objects, mixed}) {
    auto at = parse_json_capped(make(kMaxJsonDepth));
    REQUIRE(at.error.empty());
    CHECK(depth_of(at.value) == kMaxJsonDepth);
    CHECK(at.value.dump() == make(kMaxJsonDepth));  // what is accepted can be written again

    auto over = parse_json_capped(make(kMaxJsonDepth + 1));
    CHECK(over.value.is_null());
    CHECK(over.error == "arrays and objects nested more than " + std::to_string(kMaxJsonDepth) + " levels deep");
  }
}

TEST_CASE("parse_json_capped refuses 1,000,000 levels without building them", "[json]") {
  const std::string deep = arrays(1000000);
  auto r = parse_json_capped(deep);
  CHECK(r.value.is_null());
  CHECK(r.error.find("nested more than") != std::string::npos);
  auto unclosed = parse_json_capped(std::string(1000000, '['));  // never closed: the cap comes first
  CHECK(unclosed.error.find("nested more than") != std::string::npos);
}

TEST_CASE("parse_json_capped reports invalid JSON and never throws", "[json]") {
  for (const char* bad : {"", "{", "[1,]", "{\"a\":1} x", "nul", "\"\\ud800\"", "{\"a\" 1}"}) {
    INFO(bad);
    auto r = parse_json_capped(bad);
    CHECK(r.value.is_null());
    CHECK(r.error.rfind("not valid JSON", 0) == 0);
  }
  auto ok = parse_json_capped<nlohmann::json>(" {\"b\":[1,2.5,\"x\",null,true]} ");
  REQUIRE(ok.error.empty());
  CHECK(ok.value["b"][1] == 2.5);
}

TEST_CASE("DepthCappedSax leaves shallow documents to the inner handler", "[json]") {
  nlohmann::json j;
  nlohmann::detail::json_sax_dom_parser<nlohmann::json> dom(j, false);
  DepthCappedSax<nlohmann::json, decltype(dom)> capped(dom);
  const std::string text = "[[1],{\"a\":[2]},[]]";
  CHECK(nlohmann::json::sax_parse(text.begin(), text.end(), &capped));
  CHECK(capped.error().empty());
  CHECK(j.dump() == text);
}

TEST_CASE("Pipeline::from_json refuses deep JSON as a corrupt pipeline", "[json]") {
  try {
    (void)Pipeline::from_json("[{\"stage\":\"fp16\",\"version\":1,\"params\":" + objects(100000) + "}]");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Corrupt);
    CHECK(std::string(e.what()).find("nested more than") != std::string::npos);
  }
}
