// XXH3-64 compiled for AVX2 (checksum_avx2.cpp is built with -mavx2): call only where the CPU
// has it (xxh3() in checksum.cpp decides).
#pragma once
#include <cstddef>
#include <cstdint>

namespace gradcodec {
uint64_t xxh3_avx2(const void* data, size_t n) noexcept;
}
