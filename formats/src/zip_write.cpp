// SPDX-License-Identifier: BSD-3-Clause
#include "zip_write.hpp"

#include "text.hpp"

#include <gradcodec/error.hpp>

#include <algorithm>

namespace gradcodec::formats {

namespace {

constexpr uint64_t kMax32 = 0xFFFFFFFFu;  // a 32-bit field holding this defers to the ZIP64 field
constexpr uint16_t kDate1980 = (0 << 9) | (1 << 5) | 1;  // DOS date 1980-01-01 (time 00:00 is 0)
constexpr uint16_t kMadeBy = (3 << 8) | 45;              // Unix, spec version 4.5
constexpr uint32_t kRegularFile = 0100644u << 16;        // external attributes: -rw-r--r--

struct Bytes {
  std::vector<uint8_t> v;
  Bytes& u16(uint64_t x) { return le(x, 2); }
  Bytes& u32(uint64_t x) { return le(x, 4); }
  Bytes& u64(uint64_t x) { return le(x, 8); }
  Bytes& str(const std::string& s) {
    v.insert(v.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& le(uint64_t x, int n) {
    for (int i = 0; i < n; ++i) v.push_back(static_cast<uint8_t>(x >> (8 * i)));
    return *this;
  }
};

bool is_ascii(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

}  // namespace

ZipStoredWriter::ZipStoredWriter(Out out, std::string target) : out_(std::move(out)), target_(std::move(target)) {}

void ZipStoredWriter::put(const std::vector<uint8_t>& bytes) {
  out_(bytes.data(), bytes.size());
  pos_ += bytes.size();
}

void ZipStoredWriter::close_member() {
  if (open_ && left_ != 0)
    fail(ErrorCode::Internal, target_ + ": zip member '" + entries_.back().name + "' got " + std::to_string(left_) +
                                  " bytes fewer than announced");
  open_ = false;
}

void ZipStoredWriter::begin(const std::string& name, uint64_t size, uint32_t crc, uint64_t align) {
  if (finished_) fail(ErrorCode::Internal, target_ + ": zip member added after the archive was finished");
  close_member();
  if (name.empty() || name.size() > 0xFFFF)
    fail(ErrorCode::Usage, target_ + ": a zip member name must have 1 to 65535 bytes");
  const bool utf8 = !is_ascii(name) && valid_utf8(reinterpret_cast<const uint8_t*>(name.data()), name.size());
  entries_.push_back({name, pos_, size, crc, utf8});
  Bytes h;
  h.u32(0x04034b50).u16(45).u16(utf8 ? 0x0800 : 0).u16(0).u16(0).u16(kDate1980).u32(crc);
  const uint64_t plain_end = pos_ + 30 + name.size() + 20;  // where the data starts without padding
  const uint64_t pad = plain_end % align == 0 ? 0 : (align - (plain_end + 4) % align) % align + 4;
  h.u32(kMax32).u32(kMax32).u16(name.size()).u16(20 + pad).str(name);
  h.u16(0x0001).u16(16).u64(size).u64(size);  // ZIP64: original and stored size
  if (pad) h.u16(0x4246).u16(pad - 4).v.resize(h.v.size() + (pad - 4), 'Z');
  put(h.v);
  left_ = size;
  open_ = true;
}

void ZipStoredWriter::data(const void* p, size_t n) {
  if (!open_ || n > left_)
    fail(ErrorCode::Internal, target_ + ": zip member data beyond the size announced");
  out_(p, n);
  pos_ += n;
  left_ -= n;
}

void ZipStoredWriter::finish() {
  if (finished_) fail(ErrorCode::Internal, target_ + ": zip archive finished twice");
  close_member();
  finished_ = true;
  const uint64_t cd_offset = pos_;
  for (const Entry& e : entries_) {
    Bytes z;  // ZIP64 extra: only the fields whose 32-bit slot overflows, in this order
    if (e.size >= kMax32) z.u64(e.size).u64(e.size);
    if (e.offset >= kMax32) z.u64(e.offset);
    const bool zip64 = !z.v.empty();
    Bytes c;
    c.u32(0x02014b50).u16(kMadeBy).u16(zip64 ? 45 : 20).u16(e.utf8 ? 0x0800 : 0).u16(0).u16(0).u16(kDate1980);
    c.u32(e.crc).u32(std::min(e.size, kMax32)).u32(std::min(e.size, kMax32));
    c.u16(e.name.size()).u16(zip64 ? 4 + z.v.size() : 0).u16(0).u16(0).u16(0).u32(kRegularFile);
    c.u32(std::min(e.offset, kMax32)).str(e.name);
    if (zip64) c.u16(0x0001).u16(z.v.size()).v.insert(c.v.end(), z.v.begin(), z.v.end());
    put(c.v);
  }
  const uint64_t cd_size = pos_ - cd_offset, n = entries_.size();
  Bytes end;
  if (n >= 0xFFFF || cd_size >= kMax32 || cd_offset >= kMax32) {
    const uint64_t at = pos_;
    end.u32(0x06064b50).u64(44).u16(kMadeBy).u16(45).u32(0).u32(0).u64(n).u64(n).u64(cd_size).u64(cd_offset);
    end.u32(0x07064b50).u32(0).u64(at).u32(1);
  }
  end.u32(0x06054b50).u16(0).u16(0).u16(std::min<uint64_t>(n, 0xFFFF)).u16(std::min<uint64_t>(n, 0xFFFF));
  end.u32(std::min(cd_size, kMax32)).u32(std::min(cd_offset, kMax32)).u16(0);
  put(end.v);
}

}  // namespace gradcodec::formats
