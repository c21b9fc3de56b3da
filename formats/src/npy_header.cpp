// SPDX-License-Identifier: BSD-3-Clause
// What an NPY header's text means (see npy_header.hpp): the Python-literal parser behind Parser
// and the classification of numpy descrs behind classify().
#include "npy_header.hpp"

#include <bit>
#include <cctype>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gradcodec::formats::npy {

namespace {

constexpr int kMaxDepth = 32;  // nesting of tuples/lists in a header

}  // namespace

bool mul_checked(uint64_t a, uint64_t b, uint64_t& out) {
  if (a != 0 && b > (uint64_t{1} << 63) / a) return false;
  out = a * b;
  return out <= (uint64_t{1} << 63);
}

// ---------------------------------------------------------------------------------------------
// The literal parser (the class is declared in npy_header.hpp).

std::vector<std::pair<std::string, Value>> Parser::dict() {
  std::vector<std::pair<std::string, Value>> out;
  expect('{');
  if (!eat('}')) {
    for (;;) {
      skip_ws();
      size_t at = i_;
      Value key = value(1);
      if (key.kind != Value::Kind::Str) error("dict key is not a string", at);
      expect(':');
      out.emplace_back(std::move(key.str), value(1));
      if (eat('}')) break;
      expect(',');
      if (eat('}')) break;  // trailing comma
    }
  }
  skip_ws();
  if (i_ != s_.size()) error("unexpected text after the dict", i_);
  return out;
}

Value Parser::single() {
  Value v = value(0);
  skip_ws();
  if (i_ != s_.size()) error("unexpected text after the value", i_);
  return v;
}

void Parser::skip_ws() {
  while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r' ||
                            s_[i_] == '\f' || s_[i_] == '\v'))
    ++i_;
}

bool Parser::eat(char c) {
  skip_ws();
  if (i_ < s_.size() && s_[i_] == c) {
    ++i_;
    return true;
  }
  return false;
}

void Parser::expect(char c) {
  if (!eat(c)) error(std::string("expected '") + c + "'", i_);
}

Value Parser::value(int depth) {
  if (depth > kMaxDepth) error("nesting too deep", i_);
  skip_ws();
  if (i_ >= s_.size()) error("unexpected end of header", i_);
  size_t begin = i_;
  Value v;
  char c = s_[i_];
  if (c == '\'' || c == '"') {
    v = string();
  } else if (c == '-' || c == '+' || (c >= '0' && c <= '9')) {
    v = integer();
  } else if (c == '(' || c == '[') {
    ++i_;
    char close = c == '(' ? ')' : ']';
    v.kind = c == '(' ? Value::Kind::Tuple : Value::Kind::List;
    bool comma = false;
    while (!eat(close)) {
      v.items.push_back(value(depth + 1));
      if (eat(close)) break;
      expect(',');
      comma = true;
    }
    // "(x)" is x in parentheses, not a tuple; "()" and "(x,)" are tuples.
    if (c == '(' && v.items.size() == 1 && !comma) {
      Value inner = std::move(v.items[0]);
      inner.begin = begin;
      inner.end = i_;
      return inner;
    }
  } else if (s_.substr(i_, 4) == "True" || s_.substr(i_, 5) == "False" ||
             s_.substr(i_, 4) == "None") {
    v.kind = c == 'N' ? Value::Kind::None : Value::Kind::Bool;
    v.boolean = c == 'T';
    i_ += c == 'F' ? 5 : 4;
    if (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_'))
      error("unknown name", begin);
  } else {
    error("unexpected character", i_);
  }
  v.begin = begin;
  v.end = i_;
  return v;
}

Value Parser::string() {
  Value v;
  v.kind = Value::Kind::Str;
  char quote = s_[i_++];
  for (;;) {
    if (i_ >= s_.size()) error("unterminated string", i_);
    char c = s_[i_++];
    if (c == quote) break;
    if (c == '\n' || c == '\r') error("newline in string", i_ - 1);
    if (c != '\\') {
      v.str += c;
      continue;
    }
    if (i_ >= s_.size()) error("unterminated string", i_);
    char e = s_[i_++];
    switch (e) {
      case '\\': case '\'': case '"': v.str += e; break;
      case 'n': v.str += '\n'; break;
      case 't': v.str += '\t'; break;
      case 'r': v.str += '\r'; break;
      case 'x': {
        if (i_ + 2 > s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_])) ||
            !std::isxdigit(static_cast<unsigned char>(s_[i_ + 1])))
          error("bad \\x escape", i_ - 2);
        unsigned code = static_cast<unsigned>(std::stoul(std::string(s_.substr(i_, 2)), nullptr, 16));
        i_ += 2;
        if (code < 0x80) {
          v.str += static_cast<char>(code);
        } else {  // a latin-1 code point, kept as UTF-8 like the rest of the text
          v.str += static_cast<char>(0xC0 | (code >> 6));
          v.str += static_cast<char>(0x80 | (code & 0x3F));
        }
        break;
      }
      default: error(std::string("unsupported escape \\") + e, i_ - 2);
    }
  }
  return v;
}

Value Parser::integer() {
  Value v;
  v.kind = Value::Kind::Int;
  if (s_[i_] == '-' || s_[i_] == '+') {
    v.negative = s_[i_] == '-';
    ++i_;
    skip_ws();
  }
  if (i_ >= s_.size() || !(s_[i_] >= '0' && s_[i_] <= '9')) error("expected a digit", i_);
  while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
    uint64_t d = static_cast<uint64_t>(s_[i_] - '0');
    if (v.magnitude > (UINT64_MAX - d) / 10) v.too_big = true;
    if (!v.too_big) v.magnitude = v.magnitude * 10 + d;
    ++i_;
  }
  if (i_ < s_.size() && (s_[i_] == 'L' || s_[i_] == 'l')) ++i_;  // Python 2 long, as numpy accepts
  if (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '.' ||
                         s_[i_] == '_'))
    error("not an integer", i_);
  return v;
}

// ---------------------------------------------------------------------------------------------
// dtype descriptions.

namespace {

bool parse_count(std::string_view s, uint64_t& n) {
  if (s.empty() || s.size() > 19) return false;
  n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return true;
}

// A simple descr string such as "<f4", "|b1", "<U5", "|V8", "|O", "<M8[ns]".
bool simple_descr(std::string_view s, Descr& d) {
  char order = '=';
  if (!s.empty() && (s[0] == '<' || s[0] == '>' || s[0] == '=' || s[0] == '|')) {
    order = s[0];
    s.remove_prefix(1);
  }
  if (s.empty()) return false;
  char kind = s[0];
  std::string_view rest = s.substr(1);
  uint64_t n = 0;
  d = Descr{};
  switch (kind) {
    case 'O':  // object: numpy writes "|O"; "|O8" on older versions
      if (!(rest.empty() || rest == "8" || rest == "4")) return false;
      d.object = true;
      return true;
    case 'b':
      if (rest != "1") return false;
      d.itemsize = 1;
      return true;
    case 'i':
    case 'u':
      if (!parse_count(rest, n) || !(n == 1 || n == 2 || n == 4 || n == 8)) return false;
      d.itemsize = n;
      return true;
    case 'f':
      if (!parse_count(rest, n)) return false;
      if (n == 2 || n == 4 || n == 8) {
        d.dtype = n == 2 ? DType::F16 : n == 4 ? DType::F32 : DType::F64;
        bool native_big = std::endian::native == std::endian::big;
        d.big_endian = order == '>' || ((order == '=' || order == '|') && native_big);
      } else if (!(n == 10 || n == 12 || n == 16)) {  // long double stays Other
        return false;
      }
      d.itemsize = n;
      return true;
    case 'c':
      if (!parse_count(rest, n) || !(n == 8 || n == 16 || n == 20 || n == 24 || n == 32)) return false;
      d.itemsize = n;
      return true;
    case 'S':
    case 'a':
    case 'V':
      if (!parse_count(rest, n)) return false;
      d.itemsize = n;
      return true;
    case 'U':
      if (!parse_count(rest, n) || !mul_checked(n, 4, d.itemsize)) return false;
      return true;
    case 'M':
    case 'm': {
      if (rest.substr(0, 1) != "8") return false;
      rest.remove_prefix(1);
      if (!rest.empty()) {  // "[ns]", "[10ms]", "[D]"
        if (rest.size() < 3 || rest.front() != '[' || rest.back() != ']') return false;
        for (char c : rest.substr(1, rest.size() - 2))
          if (!std::isalnum(static_cast<unsigned char>(c))) return false;
      }
      d.itemsize = 8;
      return true;
    }
    default: return false;
  }
}

bool shape_product(const Value& v, uint64_t& n) {
  n = 1;
  if (v.kind == Value::Kind::Int) {
    if (v.negative || v.too_big) return false;
    return mul_checked(n, v.magnitude, n);
  }
  if (v.kind != Value::Kind::Tuple) return false;
  for (const Value& d : v.items)
    if (d.kind != Value::Kind::Int || d.negative || d.too_big || !mul_checked(n, d.magnitude, n))
      return false;
  return true;
}

// A structured descr: [(name, type[, shape]), ...] with name a str or a (title, name) tuple and
// type a simple descr or a nested list. Padding fields ('', '|V4') count like any other.
bool list_descr(const Value& v, Descr& d, int depth) {
  if (v.kind != Value::Kind::List || depth > kMaxDepth) return false;
  d = Descr{};
  for (const Value& f : v.items) {
    if (f.kind != Value::Kind::Tuple || f.items.size() < 2 || f.items.size() > 3) return false;
    const Value& name = f.items[0];
    bool name_ok = name.kind == Value::Kind::Str ||
                   (name.kind == Value::Kind::Tuple && name.items.size() == 2 &&
                    name.items[0].kind == Value::Kind::Str && name.items[1].kind == Value::Kind::Str);
    if (!name_ok) return false;
    Descr fd;
    const Value& type = f.items[1];
    if (type.kind == Value::Kind::Str) {
      if (!simple_descr(type.str, fd)) return false;
    } else if (!list_descr(type, fd, depth + 1)) {
      return false;
    }
    uint64_t count = 1, bytes = 0;
    if (f.items.size() == 3 && !shape_product(f.items[2], count)) return false;
    if (!mul_checked(fd.itemsize, count, bytes) || d.itemsize > (uint64_t{1} << 62) - bytes)
      return false;
    d.itemsize += bytes;
    d.object = d.object || fd.object;
  }
  return true;
}

}  // namespace

bool classify(const Value& v, Descr& d) {
  if (v.kind == Value::Kind::Str) return simple_descr(v.str, d);
  return list_descr(v, d, 0);
}

}  // namespace gradcodec::formats::npy
