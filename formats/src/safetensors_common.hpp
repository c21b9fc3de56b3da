// SPDX-License-Identifier: BSD-3-Clause
// What the safetensors reader and writer share: the dtype table and small helpers.
#pragma once

#include <gradcodec/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace gradcodec::formats::safetensors {

constexpr uint64_t kMaxHeaderSize = 100'000'000;  // the reference implementation's cap
constexpr size_t kMaxRank = 64;
constexpr uint64_t kMaxElements = uint64_t{1} << 62;  // as shape_elements()

struct StDtype {
  const char* name;   // safetensors name
  DType dtype;
  const char* descr;  // numpy descr (empty for bf16, which numpy lacks)
  size_t size;        // bytes per element
};

const StDtype* find_dtype_by_name(const std::string& name);
const StDtype* find_float_dtype(DType t);
// Maps a numpy descr of a DType::Other tensor to a safetensors dtype. *swap_unit is set when the
// descr is big-endian and the bytes must be swapped per `swap_unit` bytes.
const StDtype* find_dtype_by_descr(const std::string& descr, size_t* swap_unit);
// One-line, printable rendering of a name or value taken from a file.
std::string printable(const std::string& s);
uint64_t read_le64(const uint8_t* p);
void byteswap_in_place(uint8_t* p, size_t n, size_t unit);

}  // namespace gradcodec::formats::safetensors
