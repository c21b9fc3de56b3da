// SPDX-License-Identifier: BSD-3-Clause
// Text checks the format readers and writers share.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gradcodec::formats {

// Strict UTF-8 (as Rust's str::from_utf8): no overlong forms, no surrogates, <= U+10FFFF.
bool valid_utf8(const uint8_t* p, size_t n);

}  // namespace gradcodec::formats
