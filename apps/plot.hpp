// SPDX-License-Identifier: BSD-3-Clause
// bench --plot FILE: the rate-distortion chart of a bench report, drawn by the Python module's
// matplotlib code (`python3 -m gradcodec.plot`, python/gradcodec/plot.py; docs/bench.md "Chart").
#pragma once

#include <string>

namespace gradcodec::cli {

// Refuses (Usage), before any work, a chart path whose extension is not .svg, .png or .pdf, or
// that exists without `force`.
void check_chart_path(const std::string& path, bool force);

// Draws the chart of `report_json` to `path` with `python3 -m gradcodec.plot` (the package from
// the build tree when the CLI runs from it, else the installed one). Error(Input) with the
// drawing program's own error line when it fails (no python3, no matplotlib).
void draw_chart(const std::string& report_json, const std::string& path);

}  // namespace gradcodec::cli
