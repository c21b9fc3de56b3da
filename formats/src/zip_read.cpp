// SPDX-License-Identifier: BSD-3-Clause
// Central directory reading (PKWARE APPNOTE 6.3: end of central directory record, its ZIP64
// locator and record, central file headers, local file headers).
#include "zip_read.hpp"

#include <gradcodec/error.hpp>

#include <set>

namespace gradcodec::formats {

namespace {

constexpr uint32_t kLocal = 0x04034b50, kCentral = 0x02014b50, kEnd = 0x06054b50;
constexpr uint32_t kEnd64 = 0x06064b50, kLocator64 = 0x07064b50;

uint64_t rd(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n; i-- > 0;) v = (v << 8) | p[i];
  return v;
}

struct Directory {
  uint64_t offset = 0, size = 0, entries = 0;
};

// The central directory's place, or an error text ("" = found).
std::string find_directory(const uint8_t* d, uint64_t size, Directory& dir) {
  if (size < 22) return "not a zip archive (too short)";
  uint64_t at = size - 22;
  const uint64_t lowest = size - 22 > 0xFFFF ? size - 22 - 0xFFFF : 0;
  while (rd(d + at, 4) != kEnd) {
    if (at == lowest) return "not a zip archive (no end of central directory record)";
    --at;
  }
  const uint8_t* e = d + at;
  if (rd(e + 4, 2) != 0 || rd(e + 6, 2) != 0) return "a multi-disk zip archive";
  dir.entries = rd(e + 10, 2);
  dir.size = rd(e + 12, 4);
  dir.offset = rd(e + 16, 4);
  if (dir.entries == 0xFFFF || dir.size == 0xFFFFFFFF || dir.offset == 0xFFFFFFFF) {
    if (at < 20 || rd(d + at - 20, 4) != kLocator64) return "a ZIP64 archive without its locator";
    const uint64_t z = rd(d + at - 20 + 8, 8);
    if (z > size || size - z < 56 || rd(d + z, 4) != kEnd64) return "a ZIP64 end record beyond the archive";
    dir.entries = rd(d + z + 32, 8);
    dir.size = rd(d + z + 40, 8);
    dir.offset = rd(d + z + 48, 8);
  }
  if (dir.offset > size || dir.size > size - dir.offset) return "a central directory beyond the end of the archive";
  if (dir.entries > dir.size / 46) return "a central directory too small for its " + std::to_string(dir.entries) + " entries";
  return {};
}

}  // namespace

std::vector<ZipMember> list_zip(const uint8_t* d, uint64_t size, const std::string& where) {
  auto bad = [&](const std::string& what) { fail(ErrorCode::Input, where + ": " + what); };
  Directory dir;
  if (std::string e = find_directory(d, size, dir); !e.empty()) bad(e);
  std::vector<ZipMember> out;
  out.reserve(static_cast<size_t>(dir.entries));
  std::set<std::string> names;
  uint64_t pos = dir.offset;
  const uint64_t end = dir.offset + dir.size;
  for (uint64_t i = 0; i < dir.entries; ++i) {
    if (end - pos < 46 || rd(d + pos, 4) != kCentral) bad("central directory entry " + std::to_string(i) + " is damaged");
    const uint8_t* c = d + pos;
    const uint64_t flags = rd(c + 8, 2), n = rd(c + 28, 2), m = rd(c + 30, 2), k = rd(c + 32, 2);
    if (end - pos - 46 < n + m + k) bad("central directory entry " + std::to_string(i) + " runs past the directory");
    ZipMember z;
    z.name.assign(reinterpret_cast<const char*>(c + 46), static_cast<size_t>(n));
    z.method = static_cast<uint16_t>(rd(c + 10, 2));
    z.crc = static_cast<uint32_t>(rd(c + 16, 4));
    z.comp_size = rd(c + 20, 4);
    z.size = rd(c + 24, 4);
    uint64_t local = rd(c + 42, 4);
    // ZIP64 extended information: the fields whose 32-bit slot is full, in this order.
    for (const uint8_t *x = c + 46 + n, *xe = x + m; xe - x >= 4;) {
      const uint64_t id = rd(x, 2), len = rd(x + 2, 2);
      if (static_cast<uint64_t>(xe - x - 4) < len) break;
      if (id == 0x0001) {
        const uint8_t *f = x + 4, *fe = f + len;
        for (uint64_t* slot : {&z.size, &z.comp_size, &local})
          if (*slot == 0xFFFFFFFF) {
            if (fe - f < 8) bad("member " + z.name + ": ZIP64 field missing");
            *slot = rd(f, 8);
            f += 8;
          }
      }
      x += 4 + len;
    }
    if (flags & 1) bad("member '" + z.name + "' is encrypted");
    if (!names.insert(z.name).second) bad("duplicate member '" + z.name + "'");
    if (local > size || size - local < 30 || rd(d + local, 4) != kLocal)
      bad("member '" + z.name + "': local header missing at offset " + std::to_string(local));
    const uint64_t ln = rd(d + local + 26, 2), lm = rd(d + local + 28, 2);
    if (size - local - 30 < ln + lm) bad("member '" + z.name + "': local header runs past the archive");
    if (ln != n || std::string(reinterpret_cast<const char*>(d + local + 30), static_cast<size_t>(ln)) != z.name)
      bad("member '" + z.name + "': its local header names another member");
    z.data_offset = local + 30 + ln + lm;
    if (z.comp_size > size - z.data_offset)
      bad("member '" + z.name + "' of " + std::to_string(z.comp_size) + " bytes runs past the end of the archive");
    out.push_back(std::move(z));
    pos += 46 + n + m + k;
  }
  return out;
}

bool zip_has_torch_pickle(const uint8_t* d, uint64_t size) noexcept {
  Directory dir;
  if (!find_directory(d, size, dir).empty()) return false;
  uint64_t pos = dir.offset;
  const uint64_t end = dir.offset + dir.size;
  for (uint64_t i = 0; i < dir.entries && end - pos >= 46 && rd(d + pos, 4) == kCentral; ++i) {
    const uint8_t* c = d + pos;
    const uint64_t n = rd(c + 28, 2), m = rd(c + 30, 2), k = rd(c + 32, 2);
    if (end - pos - 46 < n + m + k) return false;
    const std::string_view name(reinterpret_cast<const char*>(c + 46), static_cast<size_t>(n));
    const size_t slash = name.find('/');
    if (slash != std::string_view::npos && slash > 0 && name.substr(slash) == "/data.pkl") return true;
    pos += 46 + n + m + k;
  }
  return false;
}

}  // namespace gradcodec::formats
