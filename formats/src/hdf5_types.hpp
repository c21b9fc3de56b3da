// SPDX-License-Identifier: BSD-3-Clause
// Internal to gradcodec::formats: the HDF5 datatype mapping, HDF5 types <-> gradcodec dtypes and
// numpy descrs. The writer (hdf5_write.cpp) builds file types with make_float, std_integer,
// make_bool and make_complex; the reader (hdf5_read.cpp) decides how to read a dataset with
// plan_read(). Which types map to what is listed with the decisions at the top of those two files.
// A type that cannot be inspected or built throws TypeFailure (hdf5_common.hpp). Call with the
// module lock held.
#pragma once

#include "hdf5_common.hpp"

#include <gradcodec/tensor.hpp>

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace gradcodec::formats::h5 {

// A float datatype of dtype `d` (f16 as h5py's float16, bf16 as a custom 2-byte float), little-
// or big-endian.
Hid make_float(DType d, bool big_endian);

// The standard integer type of `size` bytes (not a copy: do not close it), or H5I_INVALID_HID.
hid_t std_integer(size_t size, bool is_signed, bool big_endian);

// h5py's bool: an enum over a native int8 with FALSE = 0 and TRUE = 1.
Hid make_bool();

// h5py's complex: compound {r, i} of two equal floats.
Hid make_complex(size_t total, bool big_endian);

// How read() gets a dataset's bytes.
enum class ReadHow {
  Raw,         // memory type = the file type (no conversion); byte-swap by swap_unit
  Convert,     // HDF5 converts into the packed little-endian memory type of describe()
  Null,        // H5S_NULL: nothing to read
  Unreadable,  // read() throws `why`
};

struct ReadPlan {
  ReadHow how = ReadHow::Raw;
  size_t swap_unit = 1;
  Hid mem;
  uint64_t item_size = 0;
  std::string why;
};

// Decides how to read elements of file type `ft` and fills dtype/descr/big_endian/extra dims.
ReadPlan plan_read(hid_t ft, TensorInfo& info);

}  // namespace gradcodec::formats::h5
