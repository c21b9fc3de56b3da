// SPDX-License-Identifier: BSD-3-Clause
// The progress bar of long runs (README.md "Commands"): one line on stderr, redrawn in place,
// shown only when stderr is a terminal and --quiet was not given.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace gradcodec::cli {

class ProgressBar {
 public:
  // What `done` and `total` count: bytes (shown as MB, 10^6 bytes), items (runs), or units that
  // mean nothing to a user (only the percentage is shown).
  enum class Unit { Bytes, Items, Percent };
  // `title` opens the line ("encode"). `total` may be raised later with add_total().
  ProgressBar(std::string title, uint64_t total, Unit unit);
  ~ProgressBar();  // clears the line
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Thread-safe. The line is redrawn at most ten times a second, and once when done reaches total.
  void advance(uint64_t n, const std::string& label = {});
  void set(uint64_t done, uint64_t total, const std::string& label = {});
  // Clears the line for good: what is printed next starts at column 0.
  void finish();
  bool shown() const noexcept { return enabled_; }

 private:
  void draw_locked(bool force);

  std::string title_, label_;
  uint64_t done_ = 0, total_ = 0;
  Unit unit_;
  bool enabled_ = false;
  std::chrono::steady_clock::time_point last_{};
};

// Holds the progress line off: clears it if it is on the screen and keeps every bar from
// drawing until the lock goes, so that a warning or an error printed meanwhile starts at column 0
// on a line of its own (the bar comes back below it with its next update).
std::unique_lock<std::mutex> hold_progress_line();
// The same for a signal handler, which may not lock: clears the line. Async-signal-safe.
void clear_progress_line_in_signal() noexcept;

}  // namespace gradcodec::cli
