// SPDX-License-Identifier: BSD-3-Clause
// one_line: every message the CLI prints is one line of valid UTF-8 without control characters,
// whatever bytes a library's message (or a file it quotes) holds.
#include <catch2/catch.hpp>

#include <gradcodec/one_line.hpp>

#include <string>

using namespace gradcodec;

TEST_CASE("one_line escapes C0 controls, DEL, C1 controls and line separators", "[one_line]") {
  CHECK(one_line("plain text, UTF-8 kept: \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") ==
        "plain text, UTF-8 kept: \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  CHECK(one_line("a\nb\tc\rd") == "a\\nb\\tc\\rd");
  CHECK(one_line(std::string("x\0y", 3)) == "x\\x00y");
  CHECK(one_line("\x1b[2J\x7f") == "\\x1b[2J\\x7f");
  CHECK(one_line("nel\xc2\x85 csi\xc2\x9b pad\xc2\x80 nbsp\xc2\xa0") == "nel\\u0085 csi\\u009b pad\\u0080 nbsp\xc2\xa0");
  CHECK(one_line("ls\xe2\x80\xa8ps\xe2\x80\xa9") == "ls\\u2028ps\\u2029");
}

TEST_CASE("one_line escapes every byte that is not well-formed UTF-8", "[one_line]") {
  CHECK(one_line("\xff\xfe") == "\\xff\\xfe");
  CHECK(one_line("\xc0\xaf") == "\\xc0\\xaf");              // overlong '/'
  CHECK(one_line("\xe0\x80\xaf") == "\\xe0\\x80\\xaf");      // overlong, 3 bytes
  CHECK(one_line("\xed\xa0\x80") == "\\xed\\xa0\\x80");      // a surrogate (U+D800)
  CHECK(one_line("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // beyond U+10FFFF
  CHECK(one_line("end\xe2\x82") == "end\\xe2\\x82");          // cut short
  CHECK(one_line("\xc3(") == "\\xc3(");                        // continuation byte missing
}

TEST_CASE("one_line's output is one printable line for every byte string", "[one_line]") {
  // Every 1- and 2-byte string, and 3-byte strings led by the bytes that start 3- and 4-byte
  // sequences: the result has no byte below 0x20, no DEL, and is well-formed UTF-8 (escaping it
  // again changes nothing).
  auto check = [](const std::string& s) {
    const std::string out = one_line(s);
    for (unsigned char c : out) REQUIRE((c >= 0x20 && c != 0x7f));
    REQUIRE(one_line(out) == out);
  };
  for (int a = 0; a < 256; ++a) {
    check(std::string(1, static_cast<char>(a)));
    for (int b = 0; b < 256; ++b) {
      check(std::string{static_cast<char>(a), static_cast<char>(b)});
      if (a >= 0xe0 && a <= 0xf4)
        for (int c : {0x00, 0x80, 0x85, 0xa8, 0xbf, 0xc0})
          check(std::string{static_cast<char>(a), static_cast<char>(b), static_cast<char>(c)});
    }
  }
}
