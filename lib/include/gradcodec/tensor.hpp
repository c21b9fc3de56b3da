// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — tensors and snapshots, the data model (docs/architecture.md, docs/formats.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gradcodec {

// Element types. The four floating types are gradients; everything else (integers, bool, complex,
// object, structured) is `Other` and carries its numpy-style description in Tensor::descr.
// The numeric values are part of the container format (docs/format.md): never renumber.
enum class DType : uint8_t { Other = 0, F16 = 1, BF16 = 2, F32 = 3, F64 = 4 };

// Size of one element in bytes; 0 for Other (whose size lives in the descr).
size_t dtype_size(DType t) noexcept;
// "f16", "bf16", "f32", "f64", "other".
const char* dtype_name(DType t) noexcept;
inline bool is_float(DType t) noexcept { return t != DType::Other; }

// A read-only byte buffer that either owns its bytes or views bytes kept alive by `owner`
// (a memory map, a larger read). Copying a Buffer shares, never copies, the bytes.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(std::vector<uint8_t> bytes);
  static Buffer view(std::shared_ptr<const void> owner, const uint8_t* data, size_t size);

  const uint8_t* data() const noexcept { return data_; }
  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

 private:
  std::shared_ptr<const void> owner_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Number of elements of a shape (1 for a 0-d shape). Throws Error(Input) on overflow of 2^63.
uint64_t shape_elements(const std::vector<uint64_t>& shape);
// "[3, 4, 5]"
std::string shape_string(const std::vector<uint64_t>& shape);

// Metadata of one array in a file or container.
struct TensorInfo {
  std::string name;             // "layer1.0.conv1.weight"
  DType dtype = DType::F32;
  std::string descr;            // numpy dtype string; always set for Other ("<i8", "|b1", "<c8",
                                // "|O", "[('a', '<i4')]"), may be empty for floats
  bool big_endian = false;      // the source stored the elements big-endian (restored on write)
  std::vector<uint64_t> shape;  // C order; empty for a 0-d (scalar) array

  uint64_t elements() const { return shape_elements(shape); }
};

// One array with its data. Data is C order and little-endian whatever the source stored
// (big-endian and Fortran-order sources are converted when read). For DType::Other the bytes
// are the source's, verbatim, and only meaningful with `descr`.
struct Tensor {
  TensorInfo info;
  Buffer data;

  const std::string& name() const { return info.name; }
  DType dtype() const { return info.dtype; }
  const std::vector<uint64_t>& shape() const { return info.shape; }
  uint64_t elements() const { return info.elements(); }
};

// Number of NaN and ±Inf elements of a floating tensor (0 for DType::Other), from the bit patterns.
uint64_t count_nonfinite(const Tensor& t) noexcept;
// Finite f64 elements with |x| > FLT_MAX: float32 cannot hold them (0 for every other dtype).
uint64_t count_beyond_f32(const Tensor& t) noexcept;

// Element conversions between a floating dtype's little-endian bytes and f32 (from_f32 rounds
// F16 and BF16 to nearest even). Error(Internal) for DType::Other.
void to_f32(DType dt, const uint8_t* src, uint64_t n, float* dst);
void from_f32(const float* src, uint64_t n, DType dt, uint8_t* dst);

// Ordered tensors of one training step plus its attributes.
struct Snapshot {
  std::vector<Tensor> tensors;
  std::string source;  // where it came from (file name), informative only
};

}  // namespace gradcodec
