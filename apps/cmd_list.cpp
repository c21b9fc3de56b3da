// SPDX-License-Identifier: BSD-3-Clause
// gradcodec list stages|presets [--json]
#include "commands.hpp"

#include <gradcodec/gradcodec.hpp>

#include <cmath>

#include <nlohmann/json.hpp>

namespace gradcodec::cli {

namespace {

std::string param_text(const ParamRecord& p) {
  std::string s = p.name;
  if (!p.default_text.empty()) s += "=" + p.default_text;
  else if (p.required) s += " (required)";
  if (p.type == "choice") {
    std::string c;
    for (const auto& x : p.choices) c += (c.empty() ? "" : "|") + x;
    s += " {" + c + "}";
  }
  return s;
}

nlohmann::ordered_json list_json(const std::string& what) {
  auto out = nlohmann::ordered_json::array();
  if (what == "stages") {
    for (const auto& e : stage_catalogue()) {
      auto params = nlohmann::ordered_json::array();
      for (const auto& p : e.params) params.push_back(param_text(p));
      out.push_back({{"name", e.name}, {"kind", e.kind}, {"version", e.version},
                     {"params", params}, {"summary", e.summary}, {"source", e.source}, {"example", e.example}});
    }
  } else {
    for (const auto& p : preset_catalogue())
      out.push_back({{"name", p.name}, {"pipeline", p.pipeline}, {"source", p.source},
                     {"encode_memory", std::round(p.encode_memory * 10) / 10}});
  }
  return out;
}

int run_list(const std::string& what, bool json) {
  if (json) {
    std::printf("%s\n", list_json(what).dump(1).c_str());
    return 0;
  }
  if (what == "stages") {
    for (const auto& e : stage_catalogue()) {
      std::printf("%-12s %-12s v%u  %s\n", e.name.c_str(), e.kind.c_str(), e.version, e.summary.c_str());
      std::string params;
      for (const auto& p : e.params) params += (params.empty() ? "" : ", ") + param_text(p);
      if (!params.empty()) std::printf("%29s params: %s\n", "", params.c_str());
      std::printf("%29s source: %s\n", "", e.source.c_str());
    }
    return 0;
  }
  for (const auto& p : preset_catalogue()) {
    std::printf("%-20s %s\n", p.name.c_str(), p.pipeline.c_str());
    std::printf("%-20s source: %s\n", "", p.source.c_str());
    std::printf("%-20s encode memory: %.1f bytes per element (f32 [4096, 4096], --memory-limit)\n", "",
                p.encode_memory);
  }
  return 0;
}

}  // namespace

void setup_list(CLI::App& app, Runner& run) {
  auto what = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("list", "list the registered stages or the presets");
  sub->add_option("stages|presets", *what, "what to list")->required()->check(CLI::IsMember({"stages", "presets"}));
  sub->add_flag("--json", *json, "print a JSON array (name, pipeline/kind, params, source, ...)");
  sub->callback([what, json, &run] { run = [what, json] { return run_list(*what, *json); }; });
}

}  // namespace gradcodec::cli
