// SPDX-License-Identifier: BSD-3-Clause
// A searched stage named without its parameter (docs/target.md): `--pipeline topk --target bits=1`
// asks the search for topk's ratio, so the text need not give one. The first stage at the top
// level of the text (not inside a quoted parameter) that declares a searched parameter and gives
// neither it nor its alternative (topk's k) gets the parameter's finest grid value, which the
// search replaces; the text is otherwise left as written.
#include <gradcodec/gradcodec.hpp>
#include <gradcodec/pipeline.hpp>
#include <gradcodec/plugin/registry.hpp>

#include <cctype>
#include <map>

namespace gradcodec {

namespace {

// The parts of `text` between `sep` at parenthesis depth 0, outside double quotes.
std::vector<std::string> split_top(const std::string& text, char sep) {
  std::vector<std::string> parts(1);
  int depth = 0;
  bool quoted = false;
  for (char c : text) {
    if (c == '"') quoted = !quoted;
    if (!quoted && c == '(') ++depth;
    if (!quoted && c == ')') --depth;
    if (!quoted && depth == 0 && c == sep) {
      parts.emplace_back();
      continue;
    }
    parts.back() += c;
  }
  return parts;
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// A parameter's value as given in the segment's list, or its default; "" when neither.
std::string given_or_default(const StageEntry& e, const std::map<std::string, std::string>& given,
                             const std::string& key) {
  if (auto it = given.find(key); it != given.end()) return it->second;
  for (const auto& p : e.params)
    if (p.name == key) return p.default_text;
  return "";
}

}  // namespace

std::string target_pipeline(const std::string& text) {
  std::vector<std::string> stages = split_top(text, '|');
  for (std::string& segment : stages) {
    const std::string s = trim(segment);
    size_t n = 0;
    while (n < s.size() && (std::isalnum(static_cast<unsigned char>(s[n])) || s[n] == '_' || s[n] == '-' || s[n] == '+'))
      ++n;
    const StageEntry* e = find_stage(s.substr(0, n));
    if (!e || e->target.empty()) continue;
    // The parameters given: NAME=VALUE items of the list, if any.
    const std::string rest = trim(s.substr(n));
    std::map<std::string, std::string> given;
    if (rest.size() >= 2 && rest.front() == '(' && rest.back() == ')')
      for (const std::string& item : split_top(rest.substr(1, rest.size() - 2), ','))
        if (const auto eq = item.find('='); eq != std::string::npos) given[trim(item.substr(0, eq))] = trim(item.substr(eq + 1));
    for (const TargetParam& p : e->target) {
      if (p.when) {  // "mode=accuracy": applies when the stage's mode (given or default) is that
        const std::string when = p.when;
        const auto eq = when.find('=');
        if (given_or_default(*e, given, when.substr(0, eq)) != when.substr(eq + 1)) continue;
      }
      const char* other = alternative_param(e->name, p.name);
      if (given.count(p.name) || (other && given.count(other))) return text;  // as written
      const std::string item = std::string(p.name) + "=" + format_number(p.larger_is_finer ? p.hi : p.lo, ParamType::Float);
      const std::string filled = rest.empty() || rest == "()" ? s.substr(0, n) + "(" + item + ")"
                                                              : s.substr(0, s.size() - 1) + ", " + item + ")";
      segment = " " + filled + " ";
      std::string out;
      for (size_t k = 0; k < stages.size(); ++k) out += (k ? "|" : "") + stages[k];
      return trim(out);
    }
    // No searched parameter of this stage applies (zfp(mode=precision)): the search looks on.
  }
  return text;
}

}  // namespace gradcodec
