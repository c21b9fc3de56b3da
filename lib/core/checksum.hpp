// XXH3-64 over byte ranges (the container's section and stream checksums).
#pragma once
#include <cstddef>
#include <cstdint>

namespace gradcodec {
// The same value on every CPU; with AVX2 the bulk of a long input is hashed 32 bytes at a time
// (Debian's libxxhash is built for SSE2; every stream is hashed once when written and once
// when read, and a dense decode's checksum is read at the speed of this pass).
uint64_t xxh3(const void* data, size_t n) noexcept;
// Whether xxh3() runs the AVX2 code on this CPU (for the tests).
bool xxh3_vectorised() noexcept;
}
