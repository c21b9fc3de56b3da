// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — the one error type of the library.
//
// The library never prints and never exits: every failure is thrown as gradcodec::Error with a
// pinned code. apps/ maps the code to an exit status (see ErrorCode) and prints what() as one line.
#pragma once

#include <stdexcept>
#include <string>

namespace gradcodec {

// Pinned values: they are the CLI's exit statuses (README.md "Commands", docs/architecture.md).
enum class ErrorCode : int {
  Usage = 1,     // bad pipeline text, bad parameter, bad option combination
  Input = 2,     // input file unreadable, unsupported or lying about itself
  Corrupt = 3,   // a .gcz container that fails a check
  Internal = 4,  // a broken invariant inside gradcodec (a bug)
  Mismatch = 5,  // a decoded result differs from what was encoded (bench verification)
};

const char* error_code_name(ErrorCode c) noexcept;

class Error : public std::runtime_error {
 public:
  // A NUL byte in the message (from a tensor name) is written as "\x00": what() is a C string,
  // and would end there.
  Error(ErrorCode code, const std::string& message) : std::runtime_error(without_nul(message)), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  static std::string without_nul(const std::string& s);  // (out of line: GCC 12 warns falsely inlined)

  ErrorCode code_;
};

[[noreturn]] inline void fail(ErrorCode c, const std::string& message) { throw Error(c, message); }

}  // namespace gradcodec
