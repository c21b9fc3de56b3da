// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — where in a .gcz container an error lies.
#pragma once

#include <gradcodec/container.hpp>
#include <gradcodec/error.hpp>

#include <cstddef>
#include <string>

namespace gradcodec {

// What a ContainerReader's own checks throw: an Error(Corrupt) whose message already names the
// file, the section and the offset ("<file>: corrupt container: <section> at offset <n>: <why>").
class ContainerError : public Error {
 public:
  explicit ContainerError(const std::string& message) : Error(ErrorCode::Corrupt, message) {}
};

// For a catch block around a stage decoder: rethrows the exception in flight, a Corrupt Error
// from the stage (which knows nothing of where its bytes came from) as a ContainerError
// "<where>: <the stage's message>". A ContainerError, another code or another exception passes
// as it is.
[[noreturn]] void rethrow_corrupt_as(const std::string& where);

// For a catch block around a stage decoder reading record i of frame f (metadata m) of `reader`:
// rethrows the exception in flight, a Corrupt Error from the stage (which knows nothing of the
// file) as a ContainerError naming the file, the frame, the record, its tensor and its offset as
// the reader's own checks do: "<file>: corrupt container: record 1 of frame 0 (tensor w) at
// offset 515: <the stage's message>". A ContainerError, another code or another exception passes
// as it is.
[[noreturn]] void rethrow_located(const ContainerReader& reader, size_t f, size_t i, const RecordMeta& m);

}  // namespace gradcodec
