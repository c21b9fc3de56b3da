// SPDX-License-Identifier: BSD-3-Clause
// Internal to gradcodec::formats: the NPY array format (numpy/lib/format.py), shared by the .npy
// reader/writer, the directory-of-.npy reader/writer and the .npz reader/writer.
//
// An NPY stream is: "\x93NUMPY", major, minor, the header length (u16 LE for 1.0, u32 LE for 2.0
// and 3.0), the header (a Python dict literal: latin-1 for 1.0/2.0, UTF-8 for 3.0), the data.
// The header is parsed by a small strict parser (never evaluated; npy_header.hpp); every length is
// checked against the stream's size before anything is allocated.
#pragma once

#include <gradcodec/tensor.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gradcodec::formats::npy {

// Header lengths above this are refused (numpy itself refuses more than 10000 bytes by default).
inline constexpr uint64_t kMaxHeaderLength = uint64_t{1} << 20;
// Bytes a reader needs to see before it knows the full header length (magic, version, u32).
inline constexpr size_t kPreambleBytes = 12;

// A parsed NPY header.
struct Header {
  TensorInfo info;             // name left empty; dtype, descr, big_endian and shape (C order) set
  bool fortran_order = false;  // the data is stored first index fastest
  bool swap = false;           // the elements are floats stored big-endian
  bool pickled = false;        // object dtype: the data is a pickle, kept verbatim, never read
  uint64_t itemsize = 0;       // bytes per element in the stream (0 for pickles)
  uint64_t data_offset = 0;    // bytes from the stream's start to the data
  uint64_t data_bytes = 0;     // elements × itemsize; for pickles everything after the header
};

// Length of the preamble plus header (= the data offset) from the stream's first
// min(kPreambleBytes, total_size) bytes (`avail` of them are given). Checks the magic, the
// version, the length cap and that the header fits in `total_size`.
// Errors are Error(Input) "<where>: <what>".
uint64_t header_end(const uint8_t* p, size_t avail, uint64_t total_size, const std::string& where);

// Parses the header p[0, end) (end from header_end) of a stream of `total_size` bytes and checks
// that the data the header promises is present.
Header parse_header(const uint8_t* p, uint64_t end, uint64_t total_size, const std::string& where);

// header_end + parse_header for a stream held whole in memory (a .npy file).
Header parse_stream(const uint8_t* p, uint64_t size, const std::string& where);

// Turns exactly h.data_bytes of stream data into Tensor data (C order; floats little-endian).
// Shares `raw` when nothing needs converting; otherwise returns a new owned buffer.
Buffer to_tensor_data(const Header& h, Buffer raw, const std::string& where);

// n bytes (uninitialised; to be written whole: their pages are mapped ahead, prepare_written),
// or Error(Input) "<where>: cannot allocate ..." instead of bad_alloc.
std::shared_ptr<uint8_t[]> allocate(uint64_t n, const std::string& where);

// Writes `t` as one NPY stream through `out` (called a few times: the header, then the data):
// version 1.0 (2.0 / 3.0 only when the header needs it), C order, '<' floats or '>' with swapped
// data when t.info.big_endian, bf16 as exact float32 (a note is appended to `warnings`), other
// dtypes as their descr and bytes verbatim. Everything is validated before the first byte goes
// out: Error(Usage) for a tensor NPY cannot hold (Other without a valid descr), Error(Internal)
// when the data size contradicts the shape.
using Sink = std::function<void(const void* data, size_t n)>;
void write_array(const Tensor& t, const Sink& out, std::vector<std::string>& warnings);

// Refuses (Error(Usage) "<where>: ...") a tensor name that cannot become NAME.npy inside a
// directory without escaping it: empty, ".", "..", or containing '/' or NUL.
void check_file_name(const std::string& name, const std::string& where);

// Flushes the file at `path` to stable storage (for files written by name through a library or
// closed with AtomicOutput::release_handle, whose commit() then only renames). Error(Input)
// naming `target` on failure.
void sync_file(const std::string& path, const std::string& target);

}  // namespace gradcodec::formats::npy
