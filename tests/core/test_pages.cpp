// SPDX-License-Identifier: BSD-3-Clause
// populate_write(): maps exactly the whole pages inside the range, keeps what they hold, and
// does nothing for small ranges; prepare_written(): maps the edges a huge-page advice leaves to
// 4 KiB faults, and all of a small range (Linux; the advice is optional elsewhere).
#include <catch2/catch.hpp>

#include <gradcodec/detail/pages.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>

using namespace gradcodec;

namespace {
// Which pages of [p, p + pages·page) are resident.
std::vector<bool> resident(const uint8_t* p, size_t pages) {
  std::vector<unsigned char> v(pages);
  REQUIRE(::mincore(const_cast<uint8_t*>(p), pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE)), v.data()) == 0);
  std::vector<bool> r(pages);
  for (size_t i = 0; i < pages; ++i) r[i] = v[i] & 1;
  return r;
}
struct Mapping {
  size_t bytes;
  uint8_t* p;
  explicit Mapping(size_t n) : bytes(n) {
    void* m = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(m != MAP_FAILED);
    p = static_cast<uint8_t*>(m);
    // Small pages, so that residency is counted page by page.
    (void)::madvise(m, n, MADV_NOHUGEPAGE);
  }
  ~Mapping() { ::munmap(p, bytes); }
};
}  // namespace

bool populate_write_works() {
  // Kernels before 5.14 refuse the advice; there is then nothing to check.
  Mapping probe(static_cast<size_t>(::sysconf(_SC_PAGESIZE)));
  return ::madvise(probe.p, probe.bytes, 23 /* MADV_POPULATE_WRITE */) == 0;
}

TEST_CASE("populate_write maps the whole pages inside the range and changes no byte", "[pages]") {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t pages = 64;
  Mapping m(pages * page);
  if (!populate_write_works()) {
    WARN("this kernel refuses MADV_POPULATE_WRITE: nothing to check");
    return;
  }
  m.p[5 * page + 1] = 42;  // written before: kept
  // From the middle of page 3 to the middle of page 40: pages 4..39 are whole inside it.
  populate_write(m.p + 3 * page + page / 2, 37 * page);
  const auto r = resident(m.p, pages);
  for (size_t i = 0; i < pages; ++i) {
    INFO("page " << i);
    CHECK(r[i] == (i >= 4 && i < 40));
  }
  CHECK(m.p[5 * page + 1] == 42);
  size_t nonzero = 0;
  for (size_t i = 4 * page; i < 40 * page; ++i) nonzero += m.p[i] != 0;
  CHECK(nonzero == 1);

  // Below 64 KiB and null pointers: nothing.
  Mapping small(pages * page);
  populate_write(small.p, (size_t{64} << 10) - 1);
  populate_write(nullptr, size_t{1} << 20);
  for (bool b : resident(small.p, pages)) CHECK_FALSE(b);
}

TEST_CASE("prepare_written maps the edges outside whole huge pages, and all of a small range", "[pages]") {
  if (!populate_write_works()) {
    WARN("this kernel refuses MADV_POPULATE_WRITE: nothing to check");
    return;
  }
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t huge = size_t{2} << 20, mib = size_t{1} << 20;
  Mapping m(14 * mib);
  const uintptr_t base = reinterpret_cast<uintptr_t>(m.p);
  uint8_t* const a = m.p + (((base + huge - 1) & ~(huge - 1)) - base);  // 2 MiB-aligned, inside
  // 9 MiB from 5 pages + 100 bytes past a: whole huge pages [a + 2 MiB, a + 8 MiB) are left to
  // the advice (untouched); the whole small pages before and after them are mapped.
  uint8_t* const p = a + 5 * page + 100;
  prepare_written(p, 9 * mib);
  const size_t span = 10 * mib / page;  // pages of [a, a + 10 MiB)
  const auto r = resident(a, span);
  const size_t first = 6, head_end = huge / page, tail = 8 * mib / page, last = (9 * mib + 5 * page + 100) / page;
  size_t wrong = 0;
  for (size_t i = 0; i < span; ++i) {
    const bool expected = (i >= first && i < head_end) || (i >= tail && i < last);
    // Pages outside the range may be mapped by a huge page the kernel chose for the edge: only
    // the range's own pages are checked.
    if (i < 5 || i > last) continue;
    if (r[i] != expected) {
      ++wrong;
      UNSCOPED_INFO("page " << i << (r[i] ? " mapped" : " not mapped"));
    }
  }
  CHECK(wrong == 0);

  // Below 4 MiB no huge page is advised: every whole page is mapped.
  Mapping small(2 * mib);
  prepare_written(small.p + 100, mib);
  const auto s = resident(small.p, 2 * mib / page);
  for (size_t i = 0; i < s.size(); ++i) {
    INFO("page " << i);
    CHECK(s[i] == (i >= 1 && i < mib / page));
  }
}
#endif
