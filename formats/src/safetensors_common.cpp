// SPDX-License-Identifier: BSD-3-Clause
#include "safetensors_common.hpp"

#include <algorithm>
#include <array>
#include <bit>

namespace gradcodec::formats::safetensors {

namespace {

constexpr std::array<StDtype, 17> kDtypes{{
    {"F16", DType::F16, "<f2", 2},
    {"BF16", DType::BF16, "", 2},
    {"F32", DType::F32, "<f4", 4},
    {"F64", DType::F64, "<f8", 8},
    {"BOOL", DType::Other, "|b1", 1},
    {"U8", DType::Other, "|u1", 1},
    {"I8", DType::Other, "|i1", 1},
    {"U16", DType::Other, "<u2", 2},
    {"I16", DType::Other, "<i2", 2},
    {"U32", DType::Other, "<u4", 4},
    {"I32", DType::Other, "<i4", 4},
    {"U64", DType::Other, "<u8", 8},
    {"I64", DType::Other, "<i8", 8},
    {"C64", DType::Other, "<c8", 8},
    {"F8_E5M2", DType::Other, "[('F8_E5M2', '|V1')]", 1},
    {"F8_E4M3", DType::Other, "[('F8_E4M3', '|V1')]", 1},
    {"F8_E8M0", DType::Other, "[('F8_E8M0', '|V1')]", 1},
}};

}  // namespace

const StDtype* find_dtype_by_name(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

const StDtype* find_float_dtype(DType t) {
  for (const auto& d : kDtypes)
    if (d.dtype == t && t != DType::Other) return &d;
  return nullptr;
}

const StDtype* find_dtype_by_descr(const std::string& descr, size_t* swap_unit) {
  *swap_unit = 0;
  for (const auto& d : kDtypes)
    if (d.dtype == DType::Other && descr == d.descr) return &d;
  if (descr.size() != 3) return nullptr;
  char order = descr[0];
  std::string kind = descr.substr(1);
  if (order != '<' && order != '|' && order != '>' && order != '=') return nullptr;
  if (order == '=' && std::endian::native != std::endian::little) order = '>';
  const StDtype* d = nullptr;
  for (const auto& c : kDtypes)
    if (c.dtype == DType::Other && c.descr[0] != '[' && kind == c.descr + 1) d = &c;
  if (!d) return nullptr;
  if (d->size > 1 && order == '|') return nullptr;  // multi-byte types need a byte order
  if (d->size > 1 && order == '>') *swap_unit = kind == "c8" ? 4 : d->size;
  return d;
}

std::string printable(const std::string& s) {
  std::string out = "'";
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "'";
}

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void byteswap_in_place(uint8_t* p, size_t n, size_t unit) {
  if (unit <= 1) return;
  for (size_t i = 0; i + unit <= n; i += unit) std::reverse(p + i, p + i + unit);
}

}  // namespace gradcodec::formats::safetensors
