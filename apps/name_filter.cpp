// SPDX-License-Identifier: BSD-3-Clause
// GCC 12 at -O1 with -fsanitize=address (the sanitizer build of scripts/test.sh) warns
// -Wmaybe-uninitialized about 10 times inside libstdc++'s <regex> compiler: std::function
// members of a temporary _State that libstdc++ moves from only when its opcode says they were
// set, which the optimizer cannot see. The warnings are in the standard library's code, not
// ours, and name no variable of this file; they are silenced for this file only, which is why
// the regular expressions live here and nowhere else.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "name_filter.hpp"

#include <gradcodec/gradcodec.hpp>

#include <optional>
#include <regex>

namespace gradcodec::cli {

struct NameFilter::Patterns {
  std::optional<std::regex> include, exclude;
};

namespace {

std::regex compile(const std::string& re, const char* flag) {
  try {
    return std::regex(re, std::regex::ECMAScript);
  } catch (const std::regex_error&) {
    fail(ErrorCode::Usage, std::string(flag) + " '" + re + "' is not a valid regular expression");
  }
}

}  // namespace

NameFilter::NameFilter(const std::string& include, const std::string& exclude)
    : patterns_(std::make_unique<Patterns>()) {
  if (!include.empty()) patterns_->include = compile(include, "--include");
  if (!exclude.empty()) patterns_->exclude = compile(exclude, "--exclude");
}

NameFilter::~NameFilter() = default;
NameFilter::NameFilter(NameFilter&&) noexcept = default;
NameFilter& NameFilter::operator=(NameFilter&&) noexcept = default;

bool NameFilter::keeps(const std::string& name) const {
  if (patterns_->include && !std::regex_search(name, *patterns_->include)) return false;
  if (patterns_->exclude && std::regex_search(name, *patterns_->exclude)) return false;
  return true;
}

}  // namespace gradcodec::cli
