// gradcodec list stages|presets
#include "commands.hpp"

namespace gradcodec::cli {

namespace {

std::string param_text(const ParamSpec& p) {
  std::string s = p.name;
  if (!p.default_text.empty()) s += "=" + p.default_text;
  else if (p.required) s += " (required)";
  if (p.type == ParamType::Choice) {
    std::string c;
    for (const auto& x : p.choices) c += (c.empty() ? "" : "|") + x;
    s += " {" + c + "}";
  }
  return s;
}

int run_list(const std::string& what) {
  if (what == "stages") {
    for (const auto& e : stage_table()) {
      std::printf("%-12s %-12s v%u  %s\n", e.name, stage_kind_name(e.kind), e.version, e.summary);
      std::string params;
      for (const auto& p : e.params) params += (params.empty() ? "" : ", ") + param_text(p);
      if (!params.empty()) std::printf("%29s params: %s\n", "", params.c_str());
      std::printf("%29s source: %s\n", "", e.source);
    }
    return 0;
  }
  for (const auto& p : preset_table()) {
    std::printf("%-20s %s\n", p.name, Pipeline::preset(p.name).text().c_str());
    std::printf("%-20s source: %s\n", "", p.source);
  }
  return 0;
}

}  // namespace

void setup_list(CLI::App& app, Runner& run) {
  auto what = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("list", "list the registered stages or the presets");
  sub->add_option("WHAT", *what, "stages | presets")->required()->check(CLI::IsMember({"stages", "presets"}));
  sub->callback([what, &run] { run = [what] { return run_list(*what); }; });
}

}  // namespace gradcodec::cli
