// SPDX-License-Identifier: BSD-3-Clause
#include "arrays.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

namespace py = pybind11;

namespace gradcodec::python {

namespace {

DType kind_of(const std::string& kind) {
  if (kind == "f16") return DType::F16;
  if (kind == "bf16") return DType::BF16;
  if (kind == "f32") return DType::F32;
  if (kind == "f64") return DType::F64;
  if (kind == "other") return DType::Other;
  throw py::value_error("gradcodec: unknown tensor kind '" + kind + "'");
}

std::vector<uint64_t> shape_of(const py::array& a) {
  std::vector<uint64_t> shape;
  for (py::ssize_t d = 0; d < a.ndim(); ++d) shape.push_back(static_cast<uint64_t>(a.shape(d)));
  return shape;
}

}  // namespace

const char* kind_name(DType d) noexcept {
  switch (d) {
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::Other: return "other";
  }
  return "other";
}

HeldFrame hold_frame(const py::sequence& items) {
  HeldFrame held;
  held.arrays.reserve(items.size());
  held.views.reserve(items.size());
  for (const py::handle item : items) {
    const auto triple = item.cast<py::tuple>();
    if (triple.size() != 3) throw py::value_error("gradcodec: a frame item is (name, kind, array)");
    auto name = triple[0].cast<std::string>();
    const DType dtype = kind_of(triple[1].cast<std::string>());
    auto a = triple[2].cast<py::array>();
    if (!(a.flags() & py::array::c_style)) throw py::value_error("gradcodec: tensor " + name + " is not C-contiguous");
    const py::dtype dt = a.dtype();
    if (dt.byteorder() == '>') throw py::value_error("gradcodec: tensor " + name + " is big-endian");
    if (dtype != DType::Other && static_cast<size_t>(dt.itemsize()) != dtype_size(dtype))
      throw py::value_error("gradcodec: tensor " + name + " has " + std::to_string(dt.itemsize()) +
                            "-byte elements, not " + kind_name(dtype));
    if (dtype == DType::Other) {
      const auto descr = py::module_::import("gradcodec._frames").attr("descr_of")(a.dtype()).cast<std::string>();
      held.views.push_back(TensorView::other(std::move(name), descr, shape_of(a), a.data(),
                                             static_cast<uint64_t>(a.nbytes())));
    } else {
      held.views.emplace_back(std::move(name), dtype, shape_of(a), a.data());
    }
    held.arrays.push_back(std::move(a));
  }
  return held;
}

py::tuple to_python(const Tensor& t) {
  std::vector<py::ssize_t> shape(t.info.shape.begin(), t.info.shape.end());
  const char* kind = kind_name(t.info.dtype);
  py::dtype dt;
  switch (t.info.dtype) {
    case DType::F16: dt = py::dtype("<f2"); break;
    case DType::BF16: dt = py::dtype("<u2"); break;
    case DType::F32: dt = py::dtype("<f4"); break;
    case DType::F64: dt = py::dtype("<f8"); break;
    case DType::Other: {
      // The stored dtype string ("<i8", "|b1", "[('a', '<i4')]"): numpy reads most; one it does
      // not (or an object array, whose bytes were pointers) comes back as the bytes.
      py::object numpy_dtype = py::none();
      try {  // (a descr that is not UTF-8 has no dtype either)
        numpy_dtype = py::module_::import("gradcodec._frames").attr("numpy_dtype")(t.info.descr);
      } catch (const py::error_already_set&) {
      }
      if (numpy_dtype.is_none())
        return py::make_tuple(kind, py::bytes(reinterpret_cast<const char*>(t.data.data()), t.data.size()));
      dt = py::reinterpret_borrow<py::dtype>(numpy_dtype);
      if (dt.kind() == 'O' || static_cast<uint64_t>(dt.itemsize()) * t.elements() != t.data.size())
        return py::make_tuple(kind, py::bytes(reinterpret_cast<const char*>(t.data.data()), t.data.size()));
      break;
    }
  }
  py::array out(dt, shape);
  if (t.data.size() != static_cast<size_t>(out.nbytes()))
    throw std::logic_error("gradcodec: decoded tensor " + t.info.name + " has " + std::to_string(t.data.size()) +
                           " bytes for its shape's " + std::to_string(out.nbytes()));
  if (t.data.size()) std::memcpy(out.mutable_data(), t.data.data(), t.data.size());
  return py::make_tuple(kind, out);
}

}  // namespace gradcodec::python
