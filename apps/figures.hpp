// SPDX-License-Identifier: BSD-3-Clause
// Figures shared by the reports of inspect and bench: a per-parameter figure is null (JSON) and
// "-" (tables) when there are no parameters, rather than a number that means nothing.
#pragma once

#include "common.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace gradcodec::cli {

// v / params, or null for params == 0 (a snapshot of empty or pass-through arrays only).
inline nlohmann::ordered_json per_param(double v, uint64_t params) {
  if (params == 0) return nullptr;
  return v / double(params);
}

// A figure of a table in printf format `f`, "-" where the JSON holds null.
inline std::string fig(const nlohmann::ordered_json& v, const char* f) {
  return v.is_null() ? std::string("-") : format(f, v.get<double>());
}

// `s` padded with spaces to `columns` terminal columns (a UTF-8 character is one column; a longer
// `s` is left whole).
inline std::string pad_right(const std::string& s, size_t columns) {
  size_t chars = 0;
  for (unsigned char c : s) chars += (c & 0xC0) != 0x80;
  return chars >= columns ? s : s + std::string(columns - chars, ' ');
}

}  // namespace gradcodec::cli
