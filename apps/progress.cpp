// SPDX-License-Identifier: BSD-3-Clause
#include "progress.hpp"

#include "common.hpp"

#include <atomic>
#include <cstdio>

#include <unistd.h>

namespace gradcodec::cli {

namespace {

// One line on one stderr: every bar draws under this lock, and warnings and errors take it.
std::mutex g_line_mu;
// Columns of the bar on the screen now (0: none), read by the signal handler.
std::atomic<int> g_drawn{0};
static_assert(std::atomic<int>::is_always_lock_free);

void clear_locked() {
  const int w = g_drawn.load();
  if (w == 0) return;
  std::fprintf(stderr, "\r%*s\r", w, "");
  std::fflush(stderr);
  g_drawn.store(0);
}

std::string amount(uint64_t n, ProgressBar::Unit unit) {
  if (unit == ProgressBar::Unit::Items) return std::to_string(n);
  return format("%.1f", double(n) / 1e6);
}

}  // namespace

ProgressBar::ProgressBar(std::string title, uint64_t total, Unit unit)
    : title_(std::move(title)), total_(total), unit_(unit), enabled_(!quiet() && ::isatty(STDERR_FILENO)) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::advance(uint64_t n, const std::string& label) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lk(g_line_mu);
  done_ += n;
  if (!label.empty()) label_ = label;
  draw_locked(done_ >= total_);
}

void ProgressBar::set(uint64_t done, uint64_t total, const std::string& label) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lk(g_line_mu);
  done_ = done;
  total_ = total;
  if (!label.empty()) label_ = label;
  draw_locked(done_ >= total_);
}

void ProgressBar::finish() {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lk(g_line_mu);
  clear_locked();
  enabled_ = false;
}

void ProgressBar::draw_locked(bool force) {
  const auto now = std::chrono::steady_clock::now();
  if (!force && g_drawn.load() != 0 && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  constexpr int kBar = 30;
  const uint64_t done = std::min(done_, total_);
  const double frac = total_ ? double(done) / double(total_) : 1.0;
  std::string bar(static_cast<size_t>(kBar * frac), '=');
  bar.resize(kBar, ' ');
  std::string line = format("%s [%s] %3d%%", title_.c_str(), bar.c_str(), static_cast<int>(100 * frac));
  if (unit_ != Unit::Percent)
    line += format(" %s/%s%s", amount(done, unit_).c_str(), amount(total_, unit_).c_str(), unit_ == Unit::Bytes ? " MB" : "");
  if (!label_.empty()) line += " " + one_line(label_);
  // One terminal line: a longer label is cut (at a UTF-8 character boundary).
  constexpr size_t kWidth = 79;
  if (line.size() > kWidth) {
    size_t cut = kWidth - 1;
    while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
    line = line.substr(0, cut) + "~";
  }
  const int old = g_drawn.load();
  const int width = static_cast<int>(line.size());
  std::fprintf(stderr, "\r%s%*s", line.c_str(), old > width ? old - width : 0, "");
  std::fflush(stderr);
  g_drawn.store(std::max(width, old));
}

std::unique_lock<std::mutex> hold_progress_line() {
  std::unique_lock<std::mutex> lk(g_line_mu);
  clear_locked();
  return lk;
}

void clear_progress_line_in_signal() noexcept {
  const int w = g_drawn.load();
  if (w <= 0) return;
  char buf[128];
  const int n = std::min<int>(w, static_cast<int>(sizeof buf) - 2);
  buf[0] = '\r';
  for (int i = 1; i <= n; ++i) buf[i] = ' ';
  buf[n + 1] = '\r';
  [[maybe_unused]] const ssize_t r = ::write(STDERR_FILENO, buf, static_cast<size_t>(n) + 2);
}

}  // namespace gradcodec::cli
