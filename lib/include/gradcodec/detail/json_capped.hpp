// SPDX-License-Identifier: BSD-3-Clause
// Not part of the API (docs/api.md): shared by the library, the formats and the CLI; changes with them.
// JSON read from a file (a container's header and pipeline variants, a safetensors header) is
// parsed here and only here, with its nesting capped before any value is built.
//
// Why: nlohmann::json parses without recursion (an explicit stack) and destroys a value without
// recursion, but copying, comparing and dump() recurse once per level, as does any code walking a
// value. A hostile file nesting 100,000 arrays would overflow the stack there. Every value that
// comes out of parse_json_capped() nests at most kMaxJsonDepth levels, so everything done with it
// afterwards (dump() included) recurses at most that deep.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace gradcodec {

// The deepest nesting of arrays and objects accepted in JSON read from a file: the outermost
// array or object is level 1. The same figure as serde_json's default recursion limit (which the
// safetensors reference implementation parses with), and over eighteen times what a gradcodec
// header holds (7 levels with a pipeline nested in a parameter of a stage, as accordion's).
inline constexpr size_t kMaxJsonDepth = 128;

// A SAX handler that forwards every event to `inner` and stops the parse (returns false, with
// error() saying why) at an array or object nested deeper than kMaxJsonDepth. A parse error of the
// text itself is forwarded to inner.parse_error() as it is.
template <class Json, class Inner>
class DepthCappedSax {
 public:
  using number_integer_t = typename Json::number_integer_t;
  using number_unsigned_t = typename Json::number_unsigned_t;
  using number_float_t = typename Json::number_float_t;
  using string_t = typename Json::string_t;
  using binary_t = typename Json::binary_t;

  explicit DepthCappedSax(Inner& inner) : inner_(inner) {}

  // Empty unless the nesting cap stopped the parse.
  const std::string& error() const noexcept { return error_; }

  bool null() { return inner_.null(); }
  bool boolean(bool v) { return inner_.boolean(v); }
  bool number_integer(number_integer_t v) { return inner_.number_integer(v); }
  bool number_unsigned(number_unsigned_t v) { return inner_.number_unsigned(v); }
  bool number_float(number_float_t v, const string_t& s) { return inner_.number_float(v, s); }
  bool string(string_t& s) { return inner_.string(s); }
  bool binary(binary_t& b) { return inner_.binary(b); }
  bool start_object(std::size_t n) { return deeper() && inner_.start_object(n); }
  bool key(string_t& k) { return inner_.key(k); }
  bool end_object() {
    --depth_;
    return inner_.end_object();
  }
  bool start_array(std::size_t n) { return deeper() && inner_.start_array(n); }
  bool end_array() {
    --depth_;
    return inner_.end_array();
  }
  bool parse_error(std::size_t pos, const std::string& token, const nlohmann::detail::exception& ex) {
    return inner_.parse_error(pos, token, ex);
  }

 private:
  bool deeper() {
    if (++depth_ <= kMaxJsonDepth) return true;
    error_ = "arrays and objects nested more than " + std::to_string(kMaxJsonDepth) + " levels deep";
    return false;
  }

  Inner& inner_;
  size_t depth_ = 0;
  std::string error_;
};

// What parse_json_capped() read: the value, or (error non-empty) why there is none.
template <class Json>
struct CappedJson {
  Json value;
  std::string error;
};

// Parses `text` as one strict JSON value (nothing but white space after it) nesting at most
// kMaxJsonDepth levels. Never throws for any input (but std::bad_alloc): a failure is returned in
// `error` ("not valid JSON: ..." or the nesting cap's message) with a null value.
template <class Json = nlohmann::ordered_json>
CappedJson<Json> parse_json_capped(std::string_view text) {
  CappedJson<Json> out;
  std::string syntax;
  struct Dom : nlohmann::detail::json_sax_dom_parser<Json> {
    std::string* syntax;
    Dom(Json& j, std::string* s) : nlohmann::detail::json_sax_dom_parser<Json>(j, false), syntax(s) {}
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) {
      if (syntax->empty()) *syntax = ex.what();
      return false;
    }
  } dom(out.value, &syntax);
  DepthCappedSax<Json, Dom> capped(dom);
  bool ok = false;
  try {
    ok = Json::sax_parse(text.begin(), text.end(), &capped, nlohmann::json::input_format_t::json, true);
  } catch (const nlohmann::json::exception& e) {
    if (syntax.empty()) syntax = e.what();
  }
  if (ok && capped.error().empty() && syntax.empty()) return out;
  out.value = Json();  // the partial value goes (nlohmann destroys without recursion)
  out.error = !capped.error().empty() ? capped.error()
                                      : "not valid JSON" + (syntax.empty() ? std::string() : ": " + syntax);
  return out;
}

}  // namespace gradcodec
