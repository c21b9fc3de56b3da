// SPDX-License-Identifier: BSD-3-Clause
// bench --collective's table (bench_collective.hpp): one line per row of the JSON report, its
// bytes, phase times in ms, speed-ups and rel L2; Markdown with `markdown`.
#pragma once

#include <nlohmann/json.hpp>

namespace gradcodec::cli {

void print_collective_table(const nlohmann::ordered_json& report, bool markdown);

}  // namespace gradcodec::cli
