// SPDX-License-Identifier: BSD-3-Clause
// Tensor selection by name for --include / --exclude: ECMAScript regular expressions (std::regex),
// kept in their own file, whose compiler warnings are handled there (name_filter.cpp).
#pragma once

#include <memory>
#include <string>

namespace gradcodec::cli {

class NameFilter {
 public:
  // Empty patterns select everything. Throws Error(Usage) naming the flag for an invalid pattern.
  NameFilter(const std::string& include, const std::string& exclude);
  ~NameFilter();
  NameFilter(NameFilter&&) noexcept;
  NameFilter& operator=(NameFilter&&) noexcept;

  // The name matches --include (when given) and not --exclude (when given).
  bool keeps(const std::string& name) const;

 private:
  struct Patterns;
  std::unique_ptr<Patterns> patterns_;
};

}  // namespace gradcodec::cli
