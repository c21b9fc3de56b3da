// populate_write(): maps exactly the whole pages inside the range, keeps what they hold, and
// does nothing for small ranges (Linux; the advice is optional elsewhere).
#include <catch2/catch.hpp>

#include "core/pages.hpp"

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

TEST_CASE("populate_write maps the whole pages inside the range and changes no byte", "[pages]") {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t pages = 64;
  Mapping m(pages * page);
  {
    // Kernels before 5.14 refuse the advice; there is then nothing to check.
    Mapping probe(page);
    if (::madvise(probe.p, page, 23 /* MADV_POPULATE_WRITE */) != 0) {
      WARN("this kernel refuses MADV_POPULATE_WRITE: nothing to check");
      return;
    }
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
#endif
