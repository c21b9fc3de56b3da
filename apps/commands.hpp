// SPDX-License-Identifier: BSD-3-Clause
// One function per subcommand (each in its own cmd_*.cpp): registers the subcommand's options on
// `app` and, when it is the one chosen, sets `run` to the function that does the work.
#pragma once

#include "common.hpp"
#include "progress.hpp"

namespace gradcodec::cli {
void setup_encode(CLI::App& app, Runner& run);
void setup_decode(CLI::App& app, Runner& run);
void setup_inspect(CLI::App& app, Runner& run);
void setup_list(CLI::App& app, Runner& run);
void setup_bench(CLI::App& app, Runner& run);
void setup_merge(CLI::App& app, Runner& run);
}  // namespace gradcodec::cli
