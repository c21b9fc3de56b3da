// SPDX-License-Identifier: BSD-3-Clause
// The Python module's arrays (docs/python.md): a frame handed over by gradcodec/_frames.py as
// (name, kind, numpy array) triples, seen as TensorViews without a copy; decoded tensors handed
// back as numpy arrays.
#pragma once

#include <gradcodec/frame.hpp>
#include <gradcodec/tensor.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <vector>

namespace gradcodec::python {

// A frame's tensors as views of the caller's arrays, which it keeps referenced. `items` is a
// sequence of (name, kind, array): kind "f16", "bf16" (the array holds the bits as 16-bit
// integers), "f32", "f64" or "other" (any other dtype, kept as its bytes with the array's
// dtype string); every array C-contiguous and little-endian (gradcodec/_frames.py makes them
// so). Anything else raises ValueError. Built with the GIL held; the views stay valid while
// the HeldFrame lives, so the encoder may read them with the GIL released.
struct HeldFrame {
  std::vector<pybind11::array> arrays;
  std::vector<TensorView> views;
};
HeldFrame hold_frame(const pybind11::sequence& items);

// A decoded tensor as (kind, numpy array), kinds as hold_frame's: "bf16" is the bits as uint16;
// "other" is an array of the stored dtype string when numpy reads it and has the tensor's size,
// else the bytes (a bytes object). The data is copied into the new array. GIL held.
pybind11::tuple to_python(const Tensor& t);

// The kind of a dtype, as hold_frame names it.
const char* kind_name(DType d) noexcept;

}  // namespace gradcodec::python
