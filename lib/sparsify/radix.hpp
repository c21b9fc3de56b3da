// SPDX-License-Identifier: BSD-3-Clause
// The radix select shared by topk and tcs: 31-bit ranking keys taken three digits at a time,
// most significant first (11, 10, 10 bits), and the histogram walk that finds the r-th largest.
#pragma once

#include <gradcodec/error.hpp>

#include <array>
#include <cstdint>
#include <string>

namespace gradcodec::stages::radix {

constexpr unsigned kShift[3] = {20, 10, 0};
constexpr uint32_t kBins[3] = {2048, 1024, 1024};
inline uint32_t digit(uint32_t key, int level) { return (key >> kShift[level]) & (kBins[level] - 1); }

using Hist = std::array<uint64_t, 2048>;

// The bin holding the r-th largest key (r ≥ 1) of a histogram of `bins` bins; r becomes the rank
// inside it. `who` names the caller in the (internal) error of a rank beyond the histogram.
inline uint32_t pick_bin(const Hist& h, uint32_t bins, uint64_t& r, const char* who) {
  for (uint32_t b = bins; b-- > 0;) {
    if (h[b] >= r) return b;
    r -= h[b];
  }
  fail(ErrorCode::Internal, std::string(who) + ": rank beyond the histogram");
}

}  // namespace gradcodec::stages::radix
