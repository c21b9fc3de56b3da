// SPDX-License-Identifier: BSD-3-Clause
#include "bench_collective_report.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace gradcodec::cli {

namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

void print_collective_table(const nlohmann::ordered_json& report, bool markdown) {
  const std::vector<std::string> head = {"row", "collective", "payload B", "sent B", "bits/param", "encode ms",
                                         "transfer ms", "aggregate ms", "decode ms", "step ms", "vs fp32", "vs fp16",
                                         "rel L2"};
  std::vector<std::vector<std::string>> cells;
  for (const auto& r : report["rows"])
    cells.push_back({r["name"].get<std::string>(), r["collective"].get<std::string>(),
                     fixed(r["payload_bytes"].get<double>(), 0), fixed(r["sent_bytes"].get<double>(), 0),
                     fixed(r["bits_per_param"].get<double>(), 3), fixed(1e3 * r["encode_seconds"].get<double>(), 3),
                     fixed(1e3 * r["transfer_seconds"].get<double>(), 3),
                     fixed(1e3 * r["aggregate_seconds"].get<double>(), 3),
                     fixed(1e3 * r["decode_seconds"].get<double>(), 3), fixed(1e3 * r["step_seconds"].get<double>(), 3),
                     fixed(r["speedup_fp32"].get<double>(), 2), fixed(r["speedup_fp16"].get<double>(), 2),
                     fixed(r["rel_l2"].get<double>(), 4)});
  std::printf("bench --collective: %d ranks, %zu step(s), %llu parameters per worker, medians of %zu timed steps\n",
              report["ranks"].get<int>(), report["steps"].get<size_t>(),
              static_cast<unsigned long long>(report["parameters"].get<uint64_t>()),
              report["timed_steps"].get<size_t>());
  std::vector<size_t> width(head.size());
  for (size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto& row : cells) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& v) {
    std::string s = markdown ? "|" : "";
    for (size_t c = 0; c < v.size(); ++c) {
      const std::string pad(width[c] - v[c].size(), ' ');
      s += markdown ? " " + v[c] + pad + " |" : (c ? "  " : "") + (c < 2 ? v[c] + pad : pad + v[c]);
    }
    std::printf("%s\n", s.c_str());
  };
  line(head);
  if (markdown) {
    std::vector<std::string> rule;
    for (size_t c = 0; c < head.size(); ++c) rule.push_back(std::string(width[c], '-'));
    line(rule);
  }
  for (const auto& row : cells) line(row);
}

}  // namespace gradcodec::cli
