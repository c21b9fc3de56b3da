// XXH3-64 over byte ranges (the container's section checksums).
#pragma once
#include <cstddef>
#include <cstdint>

namespace gradcodec {
uint64_t xxh3(const void* data, size_t n) noexcept;
}
