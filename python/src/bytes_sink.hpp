// SPDX-License-Identifier: BSD-3-Clause
// A container written straight into a Python bytes object (gradcodec.encode into memory). The
// object grows by _PyBytes_Resize, a realloc: once large, its pages are remapped, neither copied
// nor touched again; take() shrinks it to the container's size and hands it over without a copy.
// A VectorSink and a bytes copy at the end would fault every page of the output two or three
// times (docs/performance.md, "The Python module against the C++ facade").
//
// Writes come from the Encoder with the GIL released (PyEncoder::add, finish); each growth, which
// touches the Python object, takes the GIL for its moment, as do construction and destruction.
#pragma once

#include <gradcodec/byte_sink.hpp>

#include <pybind11/pybind11.h>

#include <cstddef>

namespace gradcodec::python {

class BytesSink final : public ByteSink {
 public:
  BytesSink();
  ~BytesSink() override;
  BytesSink(const BytesSink&) = delete;
  BytesSink& operator=(const BytesSink&) = delete;

  void write(const void* data, size_t n) override;
  // The bytes written, as one bytes object (the GIL held); the sink is empty after.
  pybind11::bytes take();

 private:
  void grow(size_t need);

  PyObject* obj_ = nullptr;  // a bytes object of capacity cap_, of which size_ bytes are written
  size_t size_ = 0, cap_ = 0;
};

}  // namespace gradcodec::python
