// SPDX-License-Identifier: BSD-3-Clause
// The terminal table (or Markdown) of `gradcodec bench`, with the formula of every column, and the
// CSV report: both made from the JSON report gradcodec::bench() returns (docs/bench.md), whose
// field names they share.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

namespace gradcodec::cli {

// The table goes to `out`: stdout, or stderr when a report is written to stdout (`--json -`).
// `baseline16`: the ratio column is against a 16-bit copy of the gradients (ratio_16bit).
void print_table(std::FILE* out, const nlohmann::ordered_json& report, bool markdown, bool baseline16);
// One line per row: the row's figures (not per_frame, stage_stats or per_tensor), a header first.
std::string rows_csv(const nlohmann::ordered_json& report);

}  // namespace gradcodec::cli
