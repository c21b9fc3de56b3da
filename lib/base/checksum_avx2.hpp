// SPDX-License-Identifier: BSD-3-Clause
// XXH3-64 compiled for AVX2 (checksum_avx2.cpp is built with -mavx2): call only where the CPU
// has it (checksum.cpp decides).
#pragma once
#include <cstddef>
#include <cstdint>

namespace gradcodec {
uint64_t xxh3_avx2(const void* data, size_t n) noexcept;
// XXH3's streaming functions on a state of xxhash's XXH3_state_t layout.
size_t xxh3_avx2_state_bytes() noexcept;
void xxh3_avx2_reset(void* state) noexcept;
void xxh3_avx2_update(void* state, const void* data, size_t n) noexcept;
uint64_t xxh3_avx2_digest(const void* state) noexcept;
}  // namespace gradcodec
