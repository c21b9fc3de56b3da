// SPDX-License-Identifier: BSD-3-Clause
// A zip archive's members from its central directory, read from bytes in memory (a mapped file),
// so that a stored member's bytes can be used in place. For torch.save archives (torch_read.cpp);
// NPZ goes through libzip (npz.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gradcodec::formats {

struct ZipMember {
  std::string name;
  uint64_t data_offset = 0;  // of its bytes in the archive (after the local header)
  uint64_t comp_size = 0;    // bytes in the archive
  uint64_t size = 0;         // bytes once inflated
  uint32_t crc = 0;
  uint16_t method = 0;       // 0 stored, 8 deflated, ...
};

// Every member in central-directory order. ZIP64 is read; encrypted members, multi-disk
// archives, duplicate names, and any offset or size beyond the archive are refused
// (Error(Input), messages prefixed by `where`). Each member's local header is checked to be
// there and to name the same member; its extra field only moves the data.
std::vector<ZipMember> list_zip(const uint8_t* d, uint64_t size, const std::string& where);

// Whether `d` is a zip archive whose central directory lists a member "DIR/data.pkl" with no
// other '/' in it (torch.save's layout since PyTorch 1.6, and TorchScript's). Never throws.
bool zip_has_torch_pickle(const uint8_t* d, uint64_t size) noexcept;

}  // namespace gradcodec::formats
