// SPDX-License-Identifier: BSD-3-Clause
#include <gradcodec/byte_sink.hpp>
#include <gradcodec/error.hpp>

#include <cerrno>
#include <cstring>
#include <string>
#include <unistd.h>

namespace gradcodec {

void VectorSink::write(const void* data, size_t n) {
  if (n == 0) return;
  const auto* p = static_cast<const uint8_t*>(data);
  out_.insert(out_.end(), p, p + n);
}

void FdSink::write(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t k = ::write(fd_, p, n);
    if (k < 0) {
      if (errno == EINTR) continue;
      fail(ErrorCode::Input, "file descriptor " + std::to_string(fd_) + ": write failed: " + std::strerror(errno));
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
}

}  // namespace gradcodec
