// SPDX-License-Identifier: BSD-3-Clause
// What the facade's classes share: reading the options' pipeline and a caller's TensorView.
#pragma once

#include <gradcodec/codec.hpp>
#include <gradcodec/error.hpp>
#include <gradcodec/gradcodec.hpp>
#include <gradcodec/frame.hpp>
#include <gradcodec/pipeline.hpp>
#include <gradcodec/tensor.hpp>

#include <cstdint>
#include <string>

namespace gradcodec::api {

// The pipeline of a preset name or a pipeline text, not both (Error Usage); neither: "lossless".
Pipeline chosen_pipeline(const std::string& preset, const std::string& pipeline);

// The engine's options for an Encoder's (or a PartEncoder's) options.
EncodeOptions engine_options(const EncoderOptions& o);
// The container format's minor version the options ask for (0 or 1; else Error Usage).
uint16_t format_minor(const EncoderOptions& o);
// A frame's outcomes as the facade reports them, counted into `summary` (frames, tensors, bytes).
std::vector<TensorSummary> count_frame(std::vector<TensorOutcome>&& outcomes, EncodeSummary& summary);

// The bytes a view covers (its shape's for the floating types, `bytes` for Other).
inline uint64_t view_bytes(const TensorView& v) {
  if (v.dtype == DType::Other) return v.bytes;
  const uint64_t n = shape_elements(v.shape);
  const uint64_t size = dtype_size(v.dtype);
  if (n > UINT64_MAX / size) fail(ErrorCode::Input, v.name + ": shape " + shape_string(v.shape) + " is too large");
  return n * size;
}

// The tensor a view describes (name, dtype, shape).
inline TensorInfo view_info(const TensorView& v) {
  TensorInfo t;
  t.name = v.name;
  t.dtype = v.dtype;
  t.descr = v.descr;
  t.shape = v.shape;
  return t;
}

// A Tensor over the view's bytes (no copy): what a frame holding the view encodes. Error(Usage)
// for a view with bytes but no data.
inline Tensor view_tensor(const TensorView& v) {
  const uint64_t n = view_bytes(v);
  if (n && !v.data) fail(ErrorCode::Usage, v.name + ": a tensor view of " + std::to_string(n) + " bytes has no data");
  Tensor t;
  t.info = view_info(v);
  t.data = Buffer::view(nullptr, static_cast<const uint8_t*>(v.data), n);
  return t;
}

}  // namespace gradcodec::api
