// SPDX-License-Identifier: BSD-3-Clause
// Internal to gradcodec::formats: what the text of an NPY header means, for npy.cpp's header
// parser and writer. Parser is a strict parser for the Python literals numpy writes in a header
// (nothing is evaluated); classify() says what a numpy descr (a str such as "<f4" or a structured
// list) is for gradcodec: its dtype, item size, byte order and whether it holds Python objects.
#pragma once

#include <gradcodec/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gradcodec::formats::npy {

// a × b, or false when it does not fit in 63 bits.
bool mul_checked(uint64_t a, uint64_t b, uint64_t& out);

// ---------------------------------------------------------------------------------------------
// A strict parser for the Python literals numpy writes in a header: a dict of str keys whose
// values are str, int, True/False/None, tuples and lists. Nothing is evaluated.

struct ParseError {
  std::string what;
  size_t offset;
};

struct Value {
  enum class Kind { Str, Int, Bool, None, Tuple, List } kind = Kind::None;
  std::string str;            // Str: the decoded text
  bool negative = false;      // Int
  bool too_big = false;       // Int: beyond 2^64 - 1
  uint64_t magnitude = 0;     // Int
  bool boolean = false;       // Bool
  std::vector<Value> items;   // Tuple, List
  size_t begin = 0, end = 0;  // the literal's span in the parsed text
};

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  // The whole text must be one dict literal, surrounded by whitespace only.
  std::vector<std::pair<std::string, Value>> dict();

  // The whole text must be one literal (used to check a descr before writing it).
  Value single();

 private:
  std::string_view s_;
  size_t i_ = 0;

  [[noreturn]] void error(const std::string& what, size_t at) { throw ParseError{what, at}; }

  void skip_ws();
  bool eat(char c);
  void expect(char c);

  Value value(int depth);
  Value string();
  Value integer();
};

// ---------------------------------------------------------------------------------------------
// dtype descriptions.

struct Descr {
  DType dtype = DType::Other;
  uint64_t itemsize = 0;
  bool object = false;      // contains Python objects: the data is a pickle
  bool big_endian = false;  // floats stored big-endian
};

// The Descr of a descr literal: a str is a simple descr, a list a structured one. False when
// the descr is not one numpy writes.
bool classify(const Value& v, Descr& d);

}  // namespace gradcodec::formats::npy
