// SPDX-License-Identifier: BSD-3-Clause
// one_line (see one_line.hpp): the one sanitiser of every message gradcodec prints, whatever wrote
// its text (gradcodec, libhdf5, libzip, nlohmann::json, the C library's strerror).
#include <gradcodec/one_line.hpp>

#include <cstdint>

namespace gradcodec {

namespace {

constexpr char kHex[] = "0123456789abcdef";

// The length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlong forms, no
// surrogates, at most U+10FFFF) and its code point; 0 when the bytes there are not one.
size_t utf8_sequence(std::string_view s, size_t i, uint32_t& cp) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
  const uint8_t c = b(0);
  size_t n;
  uint32_t min;
  if (c >= 0xc2 && c <= 0xdf) n = 2, min = 0x80, cp = c & 0x1f;
  else if (c >= 0xe0 && c <= 0xef) n = 3, min = 0x800, cp = c & 0x0f;
  else if (c >= 0xf0 && c <= 0xf4) n = 4, min = 0x10000, cp = c & 0x07;
  else return 0;
  if (s.size() - i < n) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(k) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

}  // namespace

std::string one_line(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<uint8_t>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x80) {  // C0 controls and DEL
      if (c == '\n') out += "\\n";
      else if (c == '\t') out += "\\t";
      else if (c == '\r') out += "\\r";
      else out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
      ++i;
    } else {
      uint32_t cp = 0;
      const size_t n = utf8_sequence(text, i, cp);
      if (n == 0) {  // not UTF-8: the byte, escaped
        out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
        ++i;
      } else if (cp <= 0x9f || cp == 0x2028 || cp == 0x2029) {  // C1 controls, line/paragraph separators
        out += {'\\', 'u', kHex[(cp >> 12) & 15], kHex[(cp >> 8) & 15], kHex[(cp >> 4) & 15], kHex[cp & 15]};
        i += n;
      } else {
        out.append(text.substr(i, n));
        i += n;
      }
    }
  }
  return out;
}

}  // namespace gradcodec
