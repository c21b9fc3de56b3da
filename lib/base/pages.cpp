// SPDX-License-Identifier: BSD-3-Clause
#include <gradcodec/detail/pages.hpp>

#include <algorithm>
#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace gradcodec {

void advise_huge_pages(const void* p, size_t bytes) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (!p || bytes < 2 * kHuge) return;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

void populate_read(const void* p, size_t bytes) noexcept {
#if defined(__linux__)
#ifndef MADV_POPULATE_READ
  constexpr int MADV_POPULATE_READ = 22;  // Linux 5.14; older kernels refuse it (EINVAL), harmlessly
#endif
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  if (!p || bytes < (size_t{256} << 10)) return;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes + page - 1) & ~(page - 1);
  (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ);
#else
  (void)p;
  (void)bytes;
#endif
}

void populate_write(void* p, size_t bytes) noexcept {
#if defined(__linux__)
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;  // Linux 5.14; older kernels refuse it (EINVAL), harmlessly
#endif
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  if (!p || bytes < (size_t{64} << 10)) return;
  // Whole pages inside the range only: a page shared with a neighbour is left to its first write.
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(page - 1);
  // 256 pages at a time; a group whose pages are all mapped already (memory the allocator is
  // reusing) is skipped: mincore reads the page table, where the advice would walk every page.
  constexpr size_t kGroup = 256;
  for (uintptr_t at = begin; at < end;) {
    const size_t len = static_cast<size_t>(std::min<uintptr_t>(end - at, kGroup * page));
    unsigned char in_core[kGroup];
    bool all = ::mincore(reinterpret_cast<void*>(at), len, in_core) == 0;
    for (size_t i = 0; all && i < len / page; ++i) all = in_core[i] & 1;
    if (!all) (void)madvise(reinterpret_cast<void*>(at), len, MADV_POPULATE_WRITE);
    at += len;
  }
#else
  (void)p;
  (void)bytes;
#endif
}

void prepare_written(void* p, size_t bytes) noexcept {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (!p) return;
  const uintptr_t from = reinterpret_cast<uintptr_t>(p), to = from + bytes;
  const uintptr_t begin = (from + kHuge - 1) & ~(kHuge - 1), end = to & ~(kHuge - 1);
  if (bytes < 2 * kHuge || end <= begin) {  // advise_huge_pages leaves it alone
    populate_write(p, bytes);
    return;
  }
  advise_huge_pages(p, bytes);
  populate_write(p, static_cast<size_t>(begin - from));
  populate_write(reinterpret_cast<void*>(end), static_cast<size_t>(to - end));
}

}  // namespace gradcodec
