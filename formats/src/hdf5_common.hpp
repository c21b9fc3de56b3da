// SPDX-License-Identifier: BSD-3-Clause
// Internal to gradcodec::formats (not installed): the common layer of the HDF5 reader
// (hdf5_read.cpp), writer (hdf5_write.cpp) and type mapping (hdf5_types.hpp): the process-wide
// lock, HDF5's error stack turned into messages, RAII handles and small shared helpers.
//
// Threading: the HDF5 library found on Debian is built without its thread-safety option, so every
// HDF5 call of the whole process must be serialized. This module does that with one global mutex
// (h5_mutex()): every entry point (open_hdf5, Reader::read, the reader's destructor, create_hdf5,
// Writer::add/finish and the writer's destructor) holds it for as long as it calls HDF5 or owns an
// HDF5 handle. Nothing else in gradcodec may call HDF5 without taking it.
//
// Errors: HDF5's automatic error printing is switched off whenever the lock is taken; a failed
// call is turned into gradcodec::Error whose one-line message names the file, the dataset when
// there is one, and the most specific description found on HDF5's error stack. Every handle is
// owned by an RAII wrapper (Hid), so each one is closed on every path.
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace gradcodec::formats::h5 {

// ---------------------------------------------------------------------------------------------
// Serialization and error handling
// ---------------------------------------------------------------------------------------------

// The one mutex every HDF5 call of the process is made under (see Threading above).
std::mutex& h5_mutex();

// Holds the module lock and keeps HDF5 from printing while it is held.
class H5Lock {
 public:
  H5Lock() : guard_(h5_mutex()) { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

 private:
  std::lock_guard<std::mutex> guard_;
};

// "what (HDF5: detail)"; a Fletcher32 failure becomes "checksum mismatch".
std::string with_detail(const std::string& what);

// ---------------------------------------------------------------------------------------------
// Handles
// ---------------------------------------------------------------------------------------------

class Hid {
 public:
  using Closer = herr_t (*)(hid_t);
  Hid() = default;
  Hid(hid_t id, Closer c) : id_(id), close_(c) {}
  Hid(const Hid&) = delete;
  Hid& operator=(const Hid&) = delete;
  Hid(Hid&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = H5I_INVALID_HID; }
  Hid& operator=(Hid&& o) noexcept {
    if (this != &o) {
      close();
      id_ = o.id_;
      close_ = o.close_;
      o.id_ = H5I_INVALID_HID;
    }
    return *this;
  }
  ~Hid() { close(); }

  hid_t get() const noexcept { return id_; }
  bool valid() const noexcept { return id_ >= 0; }
  // Closes now; returns HDF5's status (negative on failure, e.g. a failed flush of a file).
  herr_t close() noexcept {
    herr_t r = 0;
    if (id_ >= 0 && close_) r = close_(id_);
    id_ = H5I_INVALID_HID;
    return r;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer close_ = nullptr;
};

Hid type_hid(hid_t id);
Hid space_hid(hid_t id);
Hid plist_hid(hid_t id);
Hid dataset_hid(hid_t id);
Hid file_hid(hid_t id);

// A failure while inspecting a type: caught by the callers and turned into a message that names
// the file and the dataset.
struct TypeFailure {
  std::string what;
};

// Throws TypeFailure{with_detail(what)}.
[[noreturn]] void type_fail(const std::string& what);

Hid copy_type(hid_t t);

// Dataset names come from the file: keep error messages on one line whatever they contain.
std::string printable(const std::string& s);

// Element count of a shape, or nullopt beyond 2^62 (the limit shape_elements() enforces).
std::optional<uint64_t> checked_elements(const std::vector<uint64_t>& shape);

void byte_swap(uint8_t* data, size_t bytes, size_t unit);

// HDF5 locks files it opens; on file systems without locks (some NFS/Lustre mounts) that makes
// every open fail. Keep locking where it works and ignore it where the file system has none.
bool relax_file_locking(hid_t fapl);

}  // namespace gradcodec::formats::h5
