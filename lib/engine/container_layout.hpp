// SPDX-License-Identifier: BSD-3-Clause
// The .gcz container v1: what its writer (container_write.cpp) and reader (container_read.cpp)
// share. Byte layout: docs/format.md.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gradcodec::gcz {

inline constexpr uint8_t kMagic[8] = {0x89, 'G', 'C', 'Z', '\r', '\n', 0x1a, '\n'};
inline constexpr uint8_t kEndMagic[8] = {0x89, 'G', 'C', 'Z', 'E', 'N', 'D', '\n'};
inline constexpr size_t kPreambleSize = 16;
inline constexpr size_t kTrailerSize = 24;

}  // namespace gradcodec::gcz
