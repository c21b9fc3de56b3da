// SPDX-License-Identifier: BSD-3-Clause
// What the facade's classes share: reading the options' pipeline and a caller's TensorView.
#pragma once

#include <gradcodec/error.hpp>
#include <gradcodec/frame.hpp>
#include <gradcodec/pipeline.hpp>
#include <gradcodec/tensor.hpp>

#include <cstdint>
#include <string>

namespace gradcodec::api {

// The pipeline of a preset name or a pipeline text, not both (Error Usage); neither: "lossless".
Pipeline chosen_pipeline(const std::string& preset, const std::string& pipeline);

// The bytes a view covers (its shape's for the floating types, `bytes` for Other).
inline uint64_t view_bytes(const TensorView& v) {
  if (v.dtype == DType::Other) return v.bytes;
  const uint64_t n = shape_elements(v.shape);
  const uint64_t size = dtype_size(v.dtype);
  if (n > UINT64_MAX / size) fail(ErrorCode::Input, v.name + ": shape " + shape_string(v.shape) + " is too large");
  return n * size;
}

}  // namespace gradcodec::api
