// SPDX-License-Identifier: BSD-3-Clause
// Not part of the API (docs/api.md): shared by the library, the formats and the CLI; changes with them.
// Fresh memory for decoded tensors. A decode writes every byte of a buffer it has just
// allocated; for a large buffer the cost is then the kernel's page faults (one per 4 KiB page:
// ~15,000 for a 60 MB snapshot, more time than the decoding itself). Asking for transparent huge
// pages before the first write makes that ~30 faults (Linux, where THP is "madvise" or "always";
// elsewhere, or when the kernel declines, it changes nothing).
#pragma once
#include <algorithm>
#include <cstddef>
#include <vector>

namespace gradcodec {

// Advises the kernel to back [p, p + bytes) with huge pages. Only whole 2 MiB pages inside the
// range are touched; below 4 MiB it does nothing. Never fails (the advice is optional).
void advise_huge_pages(const void* p, size_t bytes) noexcept;

// Maps the pages of [p, p + bytes), a range of a memory-mapped file about to be read whole, in
// one system call instead of a page fault per few pages (MADV_POPULATE_READ, Linux 5.14). Below
// 256 KiB it does nothing. Never fails (advice only).
void populate_read(const void* p, size_t bytes) noexcept;

// Maps [p, p + bytes), fresh memory about to be written, in one system call instead of a page
// fault per 4 KiB page (MADV_POPULATE_WRITE, Linux 5.14), which writes fresh memory several times
// as fast (docs/performance.md, "Figures behind design choices"). The pages
// become resident as a write would make them; pages already mapped are left as they are (a
// group of 256 whose pages are all mapped costs one mincore call). Below 64 KiB it does nothing.
// Never fails.
void populate_write(void* p, size_t bytes) noexcept;

// Readies [p, p + bytes), fresh memory that is about to be written whole: huge pages advised
// for the whole 2 MiB pages inside it, and the rest (the edges, or all of a range below 4 MiB,
// which would fault one 4 KiB page at a time: up to 1,024 faults at the two edges of a large
// buffer) mapped with populate_write. Never fails.
void prepare_written(void* p, size_t bytes) noexcept;

// v.reserve(n) for n elements that are about to be written, all of them (prepare_written). Call
// before the values are written.
template <class T>
void reserve_fresh(std::vector<T>& v, size_t n) {
  if (v.capacity() >= n) return;
  v.reserve(n);
  prepare_written(v.data(), n * sizeof(T));
}

// A vector of n value-initialised (zero) elements, on huge pages when large.
template <class T>
std::vector<T> zeroed_fresh(size_t n) {
  std::vector<T> v;
  reserve_fresh(v, n);
  v.resize(n);
  return v;
}

// Appends n elements to v without zero-filling them first (a resize would zero the fresh memory,
// then the decoder would write it again: two passes over memory that is not in cache, one of
// them wasted). fill(T* dst, size_t first, size_t count) writes elements [first, first + count)
// of the output to dst, a cache-resident scratch chunk; first is a multiple of `Chunk`, and
// count is Chunk except for the last call. Each chunk is then appended.
template <size_t Chunk, class T, class Fill>
void append_chunked(std::vector<T>& v, size_t n, Fill&& fill) {
  static_assert(Chunk * sizeof(T) <= 32768, "the scratch chunk lives on the stack and in L1");
  reserve_fresh(v, v.size() + n);
  T chunk[Chunk];
  for (size_t first = 0; first < n; first += Chunk) {
    const size_t count = std::min(Chunk, n - first);
    fill(chunk, first, count);
    v.insert(v.end(), chunk, chunk + count);
  }
}

}  // namespace gradcodec
