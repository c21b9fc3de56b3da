// SPDX-License-Identifier: BSD-3-Clause
// A zip archive of stored (uncompressed) members written front to back, as np.savez writes one:
// each member's local header carries its CRC-32 and sizes, which the caller knows before the data,
// and a ZIP64 extra field (numpy's force_zip64), so no byte is written twice and nothing is seeked
// back; the central directory gives ZIP64 fields only where a value does not fit in 32 bits, and
// the end records are ZIP64 only when the archive needs them. Members are dated 1980-01-01 00:00
// (numpy's date); a name that is valid UTF-8 and not ASCII gets the UTF-8 flag (bit 11).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gradcodec::formats {

class ZipStoredWriter {
 public:
  using Out = std::function<void(const void* data, size_t n)>;
  // `out` receives the archive's bytes in order; `target` names the output in errors.
  ZipStoredWriter(Out out, std::string target);

  // Starts a member of exactly `size` bytes whose CRC-32 (zlib's crc32) is `crc`. With `align`
  // (a power of two) > 1 the local header gets a padding extra field (id 0x4246, "FB", as
  // PyTorch's writer) so that the member's data starts at a multiple of `align` in the archive.
  void begin(const std::string& name, uint64_t size, uint32_t crc, uint64_t align = 1);
  // The member's bytes, in any number of calls.
  void data(const void* p, size_t n);
  // The central directory and the end records; no member may follow.
  void finish();

  uint64_t position() const noexcept { return pos_; }

 private:
  struct Entry {
    std::string name;
    uint64_t offset, size;
    uint32_t crc;
    bool utf8;
  };
  void put(const std::vector<uint8_t>& bytes);
  void close_member();

  Out out_;
  std::string target_;
  std::vector<Entry> entries_;
  uint64_t pos_ = 0;
  uint64_t left_ = 0;  // bytes the open member still expects
  bool open_ = false, finished_ = false;
};

}  // namespace gradcodec::formats
