// SPDX-License-Identifier: BSD-3-Clause
// Reports of `gradcodec bench`: the terminal table (or Markdown) with the formula of every column,
// and the same fields as JSON and CSV with stable names (docs/bench.md, schema version below).
#pragma once

#include "bench_run.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace gradcodec::cli {

inline constexpr const char* kBenchSchema = "gradcodec-bench/2";

struct BenchContext {
  std::vector<std::string> inputs;
  size_t frames = 0;
  unsigned threads = 1;
  unsigned repeat = 0;
  double min_time = 0;
};

// The table goes to `out`: stdout, or stderr when a report is written to stdout (`--json -`).
void print_table(std::FILE* out, const std::vector<BenchRow>& rows, const BenchContext& ctx, bool markdown);
std::string rows_json(const std::vector<BenchRow>& rows, const BenchContext& ctx);
std::string rows_csv(const std::vector<BenchRow>& rows);

}  // namespace gradcodec::cli
