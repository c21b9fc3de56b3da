// SPDX-License-Identifier: BSD-3-Clause
// Internal: the list of input mappings that recover_input_fault() searches
// (<gradcodec/input_changes.hpp>). InputFile lists its mapping after mmap and unlists it before
// munmap.
#pragma once

#include <gradcodec/error.hpp>

#include <cstddef>

namespace gradcodec {

// Lists [begin, begin + bytes) as a mapping of the file `path` (whose characters must stay
// unchanged until unlisted); `code` is the error a change of it gives. Returns the slot, or -1
// when the list is full (then a truncation of this file is not recovered from).
int list_mapping(const void* begin, size_t bytes, const char* path, ErrorCode code) noexcept;
void unlist_mapping(int slot) noexcept;

}  // namespace gradcodec
