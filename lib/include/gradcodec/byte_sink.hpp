// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — where a container's bytes go when they do not go to a named file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gradcodec {

// Receives a container's bytes in order. write() throws gradcodec::Error to stop the writer (a
// full disk, a closed pipe); finish() is called once, after the last byte, when the container is
// complete — a sink that publishes (renames, sends) does it there, so an incomplete container is
// never published.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual void write(const void* data, size_t n) = 0;
  virtual void finish() {}
};

// Appends to a caller's vector (which it does not clear first).
class VectorSink final : public ByteSink {
 public:
  explicit VectorSink(std::vector<uint8_t>& out) : out_(out) {}
  void write(const void* data, size_t n) override;

 private:
  std::vector<uint8_t>& out_;
};

// Writes to an open file descriptor (a pipe, a socket, a file the caller opened) with write(2),
// retrying short writes and EINTR; a failed write is Error(Input) with the system's reason. The
// descriptor is neither closed nor synced: it stays the caller's.
class FdSink final : public ByteSink {
 public:
  explicit FdSink(int fd) : fd_(fd) {}
  void write(const void* data, size_t n) override;

 private:
  int fd_;
};

}  // namespace gradcodec
