// SPDX-License-Identifier: BSD-3-Clause
// ZipStoredWriter (formats/src/zip_write.*), the npz writer's zip layer: every header field as
// the zip specification (APPNOTE 6.3) and numpy's writer lay them out, ZIP64 where a value needs
// it — checked on archives of more than 4 GiB whose data bytes are counted, not stored — and the
// archives libzip, through the npz reader, reads back.
#include <catch2/catch.hpp>

#include "zip_write.hpp"

#include <gradcodec/error.hpp>
#include <gradcodec/file_io.hpp>
#include <gradcodec/formats/snapshot_io.hpp>

#include <cstring>
#include <map>
#include <string>
#include <vector>

using namespace gradcodec;
using namespace gradcodec::formats;

namespace {

// Keeps the archive's header bytes by position; member data (fed in 1 MiB calls) is only counted.
struct Capture {
  std::map<uint64_t, std::vector<uint8_t>> pieces;
  uint64_t pos = 0;
  void operator()(const void* p, size_t n) {
    if (n < (1u << 20)) {
      auto* b = static_cast<const uint8_t*>(p);
      pieces[pos] = std::vector<uint8_t>(b, b + n);
    }
    pos += n;
  }
  // The bytes written at [at, at + n), which must lie in one kept piece.
  std::vector<uint8_t> at(uint64_t at, size_t n) const {
    auto it = pieces.upper_bound(at);
    REQUIRE(it != pieces.begin());
    --it;
    REQUIRE(at + n <= it->first + it->second.size());
    const auto* b = it->second.data() + (at - it->first);
    return std::vector<uint8_t>(b, b + n);
  }
};

uint64_t le(const std::vector<uint8_t>& v, size_t off, int n) {
  uint64_t x = 0;
  for (int i = n - 1; i >= 0; --i) x = (x << 8) | v.at(off + static_cast<size_t>(i));
  return x;
}

// A sink appending the archive to `out`.
ZipStoredWriter::Out into(std::vector<uint8_t>& out) {
  return [&out](const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  };
}

// Feeds `n` zero bytes in 1 MiB calls.
void zeros(ZipStoredWriter& w, uint64_t n) {
  static const std::vector<uint8_t> mib(1u << 20, 0);
  while (n > 0) {
    const size_t k = static_cast<size_t>(std::min<uint64_t>(n, mib.size()));
    w.data(mib.data(), k);
    n -= k;
  }
}

}  // namespace

TEST_CASE("zip writer: local header, central directory and end record of a small archive", "[zip]") {
  std::vector<uint8_t> out;
  ZipStoredWriter w(into(out), "mem.npz");
  const std::string data = "hello, zip";
  w.begin("a.npy", data.size(), 0x12345678u);
  w.data(data.data(), 4);
  w.data(data.data() + 4, data.size() - 4);
  w.begin("b.npy", 0, 0);
  w.finish();
  // Local header of a.npy: signature, version 4.5, no flags, stored, 1980-01-01 00:00, the CRC,
  // 0xFFFFFFFF sizes deferring to the ZIP64 extra (id 1, 16 bytes: both sizes), then the data.
  CHECK(le(out, 0, 4) == 0x04034b50);
  CHECK(le(out, 4, 2) == 45);
  CHECK(le(out, 6, 2) == 0);
  CHECK(le(out, 8, 2) == 0);
  CHECK(le(out, 10, 2) == 0);
  CHECK(le(out, 12, 2) == 0x0021);
  CHECK(le(out, 14, 4) == 0x12345678u);
  CHECK(le(out, 18, 4) == 0xFFFFFFFFu);
  CHECK(le(out, 22, 4) == 0xFFFFFFFFu);
  CHECK(le(out, 26, 2) == 5);
  CHECK(le(out, 28, 2) == 20);
  CHECK(std::string(out.begin() + 30, out.begin() + 35) == "a.npy");
  CHECK(le(out, 35, 2) == 1);
  CHECK(le(out, 37, 2) == 16);
  CHECK(le(out, 39, 8) == data.size());
  CHECK(le(out, 47, 8) == data.size());
  CHECK(std::string(out.begin() + 55, out.begin() + 65) == data);
  const size_t b_at = 65, cd = b_at + 30 + 5 + 20;
  CHECK(le(out, b_at, 4) == 0x04034b50);
  // Central directory: no ZIP64 fields needed, so version 2.0 and no extra.
  CHECK(le(out, cd, 4) == 0x02014b50);
  CHECK(le(out, cd + 4, 2) == ((3u << 8) | 45));
  CHECK(le(out, cd + 6, 2) == 20);
  CHECK(le(out, cd + 16, 4) == 0x12345678u);
  CHECK(le(out, cd + 20, 4) == data.size());
  CHECK(le(out, cd + 24, 4) == data.size());
  CHECK(le(out, cd + 28, 2) == 5);
  CHECK(le(out, cd + 30, 2) == 0);
  CHECK(le(out, cd + 38, 4) == (0100644u << 16));
  CHECK(le(out, cd + 42, 4) == 0);
  const size_t cd2 = cd + 46 + 5;
  CHECK(le(out, cd2 + 42, 4) == b_at);
  const size_t eocd = cd2 + 46 + 5;
  REQUIRE(out.size() == eocd + 22);
  CHECK(le(out, eocd, 4) == 0x06054b50);
  CHECK(le(out, eocd + 8, 2) == 2);
  CHECK(le(out, eocd + 10, 2) == 2);
  CHECK(le(out, eocd + 12, 4) == eocd - cd);
  CHECK(le(out, eocd + 16, 4) == cd);
  CHECK(w.position() == out.size());
}

TEST_CASE("zip writer: an empty archive is the bare end record, as numpy writes it", "[zip]") {
  std::vector<uint8_t> out;
  ZipStoredWriter w(into(out), "mem.npz");
  w.finish();
  std::vector<uint8_t> want(22, 0);
  want[0] = 'P', want[1] = 'K', want[2] = 5, want[3] = 6;
  CHECK(out == want);
}

TEST_CASE("zip writer: ZIP64 sizes, offsets and end records past 4 GiB", "[zip]") {
  // A 5 GiB member, then a small one whose header lies past 4 GiB.
  Capture cap;
  ZipStoredWriter w([&](const void* p, size_t n) { cap(p, n); }, "big.npz");
  const uint64_t big = uint64_t{5} << 30;
  w.begin("big.npy", big, 7);
  zeros(w, big);
  const uint64_t second = cap.pos;
  w.begin("small.npy", 3, 9);
  w.data("abc", 3);
  w.finish();
  const uint64_t cd = second + 30 + 9 + 20 + 3;
  // big: sizes in the extra, its offset (0) in the 32-bit field.
  auto e1 = cap.at(cd, 46 + 7 + 4 + 16);
  CHECK(le(e1, 0, 4) == 0x02014b50);
  CHECK(le(e1, 6, 2) == 45);
  CHECK(le(e1, 20, 4) == 0xFFFFFFFFu);
  CHECK(le(e1, 24, 4) == 0xFFFFFFFFu);
  CHECK(le(e1, 30, 2) == 20);
  CHECK(le(e1, 42, 4) == 0);
  CHECK(le(e1, 46 + 7, 2) == 1);
  CHECK(le(e1, 46 + 7 + 2, 2) == 16);
  CHECK(le(e1, 46 + 7 + 4, 8) == big);
  CHECK(le(e1, 46 + 7 + 12, 8) == big);
  // small: sizes in 32 bits, its offset in the extra.
  const uint64_t cd2 = cd + 46 + 7 + 20;
  auto e2 = cap.at(cd2, 46 + 9 + 12);
  CHECK(le(e2, 20, 4) == 3);
  CHECK(le(e2, 30, 2) == 12);
  CHECK(le(e2, 42, 4) == 0xFFFFFFFFu);
  CHECK(le(e2, 46 + 9, 2) == 1);
  CHECK(le(e2, 46 + 9 + 2, 2) == 8);
  CHECK(le(e2, 46 + 9 + 4, 8) == second);
  // ZIP64 end record, its locator, then the classic end record deferring to them.
  const uint64_t end64 = cd2 + 46 + 9 + 12;
  auto z = cap.at(end64, 56 + 20 + 22);
  CHECK(le(z, 0, 4) == 0x06064b50);
  CHECK(le(z, 4, 8) == 44);
  CHECK(le(z, 24, 8) == 2);
  CHECK(le(z, 32, 8) == 2);
  CHECK(le(z, 40, 8) == end64 - cd);
  CHECK(le(z, 48, 8) == cd);
  CHECK(le(z, 56, 4) == 0x07064b50);
  CHECK(le(z, 64, 8) == end64);
  CHECK(le(z, 72, 4) == 1);
  CHECK(le(z, 76, 4) == 0x06054b50);
  CHECK(le(z, 76 + 12, 4) == end64 - cd);
  CHECK(le(z, 76 + 16, 4) == 0xFFFFFFFFu);
  CHECK(cap.pos == end64 + 98);
}

TEST_CASE("zip writer: the UTF-8 flag for UTF-8 names that are not ASCII only", "[zip]") {
  for (const auto& [name, flag] : std::vector<std::pair<std::string, bool>>{
           {"plain.npy", false}, {"gr\xc3\xb6\xc3\x9f" "e.npy", true}, {"bad\xff.npy", false},
           {"overlong\xc0\xaf.npy", false}, {"\xe2\x82\xac.npy", true}, {"cut\xe2\x82", false}}) {
    INFO(name);
    std::vector<uint8_t> out;
    ZipStoredWriter w(into(out), "mem.npz");
    w.begin(name, 0, 0);
    w.finish();
    CHECK(le(out, 6, 2) == (flag ? 0x0800u : 0u));
    const size_t cd = 30 + name.size() + 20;
    CHECK(le(out, cd + 8, 2) == (flag ? 0x0800u : 0u));
  }
}

TEST_CASE("zip writer: data beyond or short of the announced size is an internal error", "[zip]") {
  auto sink = [](const void*, size_t) {};
  {
    ZipStoredWriter w(sink, "mem.npz");
    w.begin("a.npy", 2, 0);
    CHECK_THROWS_AS(w.data("abc", 3), Error);
  }
  {
    ZipStoredWriter w(sink, "mem.npz");
    w.begin("a.npy", 2, 0);
    w.data("a", 1);
    try {
      w.finish();
      FAIL("a short member was accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Internal);
    }
  }
  {
    ZipStoredWriter w(sink, "mem.npz");
    CHECK_THROWS_AS(w.data("a", 1), Error);  // no member open
    w.finish();
    CHECK_THROWS_AS(w.begin("b.npy", 0, 0), Error);
    CHECK_THROWS_AS(w.finish(), Error);
  }
}

TEST_CASE("zip writer: the npz writer's archives read back through libzip, CRCs checked", "[zip][npz]") {
  // The npz reader (libzip) checks each stored member's CRC-32 as it reads it.
  const std::string path = "/tmp/gradcodec_test_zip_write.npz";
  {
    auto w = create_snapshot(path, true);
    Tensor a;
    a.info.name = "layer.weight";
    a.info.dtype = DType::F32;
    a.info.shape = {3, 5};
    std::vector<float> v(15);
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5f * static_cast<float>(i) - 3;
    a.data = Buffer(std::vector<uint8_t>(reinterpret_cast<uint8_t*>(v.data()), reinterpret_cast<uint8_t*>(v.data()) + 60));
    w->add(a);
    Tensor b = a;
    b.info.name = "gr\xc3\xb6\xc3\x9f" "e";
    w->add(b);
    w->finish();
  }
  auto r = open_snapshot(path);
  REQUIRE(r->arrays().size() == 2);
  CHECK(r->arrays()[1].name == "gr\xc3\xb6\xc3\x9f" "e");
  Tensor t = r->read(0);
  REQUIRE(t.data.size() == 60);
  float first;
  std::memcpy(&first, t.data.data(), 4);
  CHECK(first == -3.0f);
  std::remove(path.c_str());
}
