// SPDX-License-Identifier: BSD-3-Clause
// Internal to gradcodec::formats: HDF5 attributes of groups and datasets, carried as JSON from an
// HDF5 input (read_attributes, used by hdf5_read.cpp) to an HDF5 output (write_attributes, used
// by hdf5_write.cpp). The JSON layout is documented in docs/formats.md ("HDF5 attributes"):
//
//   [{"object": "/", "attrs": [ATTR, ...]},
//    {"object": "/layer1/weight", "tensor": "layer1.weight", "attrs": [ATTR, ...]}, ...]
//   ATTR = {"name": NAME, "dtype": D, "shape": [d0, ...] | [] (scalar) | null (empty), "value": V}
//
// D is numpy's descr for numbers ("<i4", ">u2", "|i1", "<f2", "<f4", ">f8", "|b1"), "|S<n>" for
// fixed-length byte strings, "str" for variable-length strings; strings carry "cset" ("ascii" or
// "utf-8") and fixed ones "strpad" ("nullterm", "nullpad", "spacepad"). V is one value for a
// scalar and a flat list in C order for an array (absent when shape is null); floats that are
// not finite are the strings "nan", "inf", "-inf". Values are read through HDF5's conversion to
// 64-bit integers or doubles, which holds every value of these types exactly.
// Call with the module lock held (hdf5_common.hpp).
#pragma once

#include <hdf5.h>

#include <map>
#include <string>
#include <vector>

namespace gradcodec::formats::h5 {

// Attributes holding more elements than this, or more bytes than kMaxAttributeBytes, are not
// kept (named in a note); nor are those past kMaxAttributesJson bytes of JSON for one file (the
// container's header is capped at 16 MiB).
constexpr unsigned long long kMaxAttributeElements = 65536;
constexpr unsigned long long kMaxAttributeBytes = 1ull << 20;
constexpr unsigned long long kMaxAttributesJson = 4ull << 20;

struct AttrObject {
  std::string h5path;  // "/" for the root group
  std::string tensor;  // the tensor a dataset becomes; empty for a group
};

// The attributes of `objects` (in that order, each object's by name) as the JSON above, or ""
// when none has any. Every attribute that cannot be kept (its type, its size) adds a line to
// `notes` naming the object and the attribute. Never throws for the file's content.
std::string read_attributes(hid_t fid, const std::vector<AttrObject>& objects, std::vector<std::string>& notes);

// Writes the attributes of `json` into the open file `fid`. A dataset is found by its tensor
// name through `tensor_paths` (tensor name -> HDF5 path, as the writer placed it); a group by its
// path, created (with its parents, through `lcpl`) when the output has no such group yet. Returns
// one warning per object or attribute not written (not in the output, a malformed entry).
std::vector<std::string> write_attributes(hid_t fid, hid_t lcpl, const std::string& json,
                                          const std::map<std::string, std::string>& tensor_paths);

}  // namespace gradcodec::formats::h5
