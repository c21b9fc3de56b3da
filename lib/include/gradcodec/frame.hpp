// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — a frame's tensors as an encoder takes them, and the policy for NaN/Inf.
#pragma once

#include <gradcodec/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace gradcodec {

// What a lossy pipeline does with a tensor holding NaN or ±Inf (lossless pipelines keep them
// bit-exact): refuse it (Error Input naming the tensor and the count), or store it raw.
enum class NonFinite : uint8_t { Refuse, Raw };

// The advice that ends a refusal of NaN/Inf (or of values a lossy stage cannot represent) by
// default: the option of this library that stores such tensors raw. A caller whose users spell it
// otherwise gives its own words (the CLI: --nonfinite=raw; the Python module: its keyword).
inline constexpr const char* kNonfiniteRawAdvice = "nonfinite = NonFinite::Raw stores such tensors raw";
// Merge's default words (it stores no tensor raw): the way out is the mean re-encoded losslessly.
inline constexpr const char* kMergeNonfiniteAdvice =
    "merge stores no tensor raw; the mean re-encoded with the preset lossless keeps such values";

// A frame's tensors, loaded one at a time (loading is serialized: format readers are not
// required to be thread-safe).
struct FrameSource {
  size_t count = 0;
  std::function<TensorInfo(size_t)> info;  // metadata without loading
  std::function<Tensor(size_t)> load;
  std::string source;    // informative: names the input in error messages
  std::string recorded;  // the frame's source as the container records it; empty: `source`
};

// A caller's tensor, described and not copied: `data` points at its elements, C order,
// little-endian, and stays valid until the call that takes the view returns.
struct TensorView {
  TensorView() = default;
  TensorView(std::string name_, DType dtype_, std::vector<uint64_t> shape_, const void* data_)
      : name(std::move(name_)), dtype(dtype_), shape(std::move(shape_)), data(data_) {}
  // float32 and float64 elements, their dtype from the pointer's type.
  TensorView(std::string name_, std::vector<uint64_t> shape_, const float* data_)
      : TensorView(std::move(name_), DType::F32, std::move(shape_), data_) {}
  TensorView(std::string name_, std::vector<uint64_t> shape_, const double* data_)
      : TensorView(std::move(name_), DType::F64, std::move(shape_), data_) {}
  // A non-floating array, kept as it is: its numpy dtype string ("<i8", "|b1") and byte size.
  static TensorView other(std::string name_, std::string descr_, std::vector<uint64_t> shape_, const void* data_,
                          uint64_t bytes_) {
    TensorView v(std::move(name_), DType::Other, std::move(shape_), data_);
    v.descr = std::move(descr_);
    v.bytes = bytes_;
    return v;
  }

  std::string name;
  DType dtype = DType::F32;
  std::vector<uint64_t> shape;  // empty: a 0-d array (one element)
  const void* data = nullptr;
  // For DType::Other only (a non-floating array kept as it is): its numpy dtype string ("<i8",
  // "|b1") and its size in bytes. Ignored for the floating types, whose size is the shape's.
  std::string descr;
  uint64_t bytes = 0;
};

}  // namespace gradcodec
