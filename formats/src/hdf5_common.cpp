// SPDX-License-Identifier: BSD-3-Clause
// The common layer of the HDF5 reader and writer: the module lock, the walk of HDF5's error stack
// behind with_detail(), the handle makers and the small shared helpers (see hdf5_common.hpp for the
// threading and error rules).
#include "hdf5_common.hpp"

#include <algorithm>
#include <cctype>

namespace gradcodec::formats::h5 {

std::mutex& h5_mutex() {
  static std::mutex m;
  return m;
}

namespace {

struct StackSummary {
  std::string first;  // the most specific description
  bool fletcher = false;
};

herr_t walk_error(unsigned, const H5E_error2_t* e, void* data) noexcept {
  auto* s = static_cast<StackSummary*>(data);
  try {
    if (e && e->desc && *e->desc) {
      std::string d = e->desc;
      if (s->first.empty()) s->first = d;
      std::string low = d;
      std::transform(low.begin(), low.end(), low.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (low.find("fletcher32") != std::string::npos) s->fletcher = true;
    }
  } catch (...) {
  }
  return 0;
}

// Reads and clears HDF5's error stack (call right after the failed HDF5 call).
StackSummary take_stack() {
  StackSummary s;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_error, &s);
  H5Eclear2(H5E_DEFAULT);
  return s;
}

}  // namespace

std::string with_detail(const std::string& what) {
  StackSummary s = take_stack();
  if (s.fletcher) return "checksum mismatch (Fletcher32)";
  if (s.first.empty()) return what;
  return what + " (HDF5: " + s.first + ")";
}

Hid type_hid(hid_t id) { return Hid(id, H5Tclose); }
Hid space_hid(hid_t id) { return Hid(id, H5Sclose); }
Hid plist_hid(hid_t id) { return Hid(id, H5Pclose); }
Hid dataset_hid(hid_t id) { return Hid(id, H5Dclose); }
Hid file_hid(hid_t id) { return Hid(id, H5Fclose); }

[[noreturn]] void type_fail(const std::string& what) { throw TypeFailure{with_detail(what)}; }

Hid copy_type(hid_t t) {
  hid_t c = H5Tcopy(t);
  if (c < 0) type_fail("cannot copy a datatype");
  return type_hid(c);
}

std::string printable(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return out;
}

std::optional<uint64_t> checked_elements(const std::vector<uint64_t>& shape) {
  uint64_t n = 1;
  for (uint64_t d : shape) {
    if (d != 0 && n > (uint64_t{1} << 62) / d) return std::nullopt;
    n *= d;
  }
  return n;
}

void byte_swap(uint8_t* data, size_t bytes, size_t unit) {
  if (unit <= 1) return;
  for (size_t i = 0; i + unit <= bytes; i += unit) std::reverse(data + i, data + i + unit);
}

bool relax_file_locking([[maybe_unused]] hid_t fapl) {
#if H5_VERSION_GE(1, 10, 7)
  return H5Pset_file_locking(fapl, 1, 1) >= 0;
#else
  return true;
#endif
}

}  // namespace gradcodec::formats::h5
