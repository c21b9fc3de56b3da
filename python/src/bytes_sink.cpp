// SPDX-License-Identifier: BSD-3-Clause
#include "bytes_sink.hpp"

#include <algorithm>
#include <cstring>
#include <new>

namespace py = pybind11;

namespace gradcodec::python {

namespace {
constexpr size_t kFirst = size_t{1} << 16;
}

BytesSink::BytesSink() {
  py::gil_scoped_acquire gil;
  obj_ = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(kFirst));
  if (!obj_) throw py::error_already_set();
  cap_ = kFirst;
}

BytesSink::~BytesSink() {
  if (!obj_) return;
  py::gil_scoped_acquire gil;
  Py_DECREF(obj_);
}

void BytesSink::grow(size_t need) {
  size_t cap = std::max(need, cap_ * 2);
  py::gil_scoped_acquire gil;
  // On failure _PyBytes_Resize frees the object and sets obj_ to null.
  if (_PyBytes_Resize(&obj_, static_cast<Py_ssize_t>(cap)) != 0) {
    PyErr_Clear();
    size_ = cap_ = 0;
    throw std::bad_alloc();
  }
  cap_ = cap;
}

void BytesSink::write(const void* data, size_t n) {
  if (!obj_) throw std::bad_alloc();  // a growth failed before
  if (n > cap_ - size_) grow(size_ + n);
  if (n) std::memcpy(PyBytes_AS_STRING(obj_) + size_, data, n);
  size_ += n;
}

py::bytes BytesSink::take() {
  if (!obj_) throw std::bad_alloc();
  if (_PyBytes_Resize(&obj_, static_cast<Py_ssize_t>(size_)) != 0) {
    PyErr_Clear();
    size_ = cap_ = 0;
    throw std::bad_alloc();
  }
  PyObject* out = obj_;
  obj_ = nullptr;
  size_ = cap_ = 0;
  return py::reinterpret_steal<py::bytes>(out);
}

}  // namespace gradcodec::python
