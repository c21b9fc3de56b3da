// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — making a message safe to print as one line.
#pragma once

#include <string>
#include <string_view>

namespace gradcodec {

// `text` made safe to print as one line of a terminal, whoever wrote it (gradcodec, or a library
// whose message an Error carries: libhdf5, libzip, nlohmann::json, which quote bytes of the file):
// newline, tab and carriage return as \n, \t, \r; other C0 controls, DEL and every byte that is
// not part of well-formed UTF-8 as \xNN; the C1 controls U+0080-U+009F and the line and paragraph
// separators U+2028, U+2029 (where Unicode-aware readers break lines) as \uNNNN. Everything else,
// printable ASCII and other UTF-8, is kept. The CLI prints every error and warning through it.
std::string one_line(std::string_view text);

}  // namespace gradcodec
