// SPDX-License-Identifier: BSD-3-Clause
#include <gradcodec/error.hpp>
#include <gradcodec/tensor.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace gradcodec {

size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::F16:
    case DType::BF16: return 2;
    case DType::F32: return 4;
    case DType::F64: return 8;
    case DType::Other: return 0;
  }
  return 0;
}

namespace {
// Elements whose exponent field is all ones (NaN or ±Inf), for little-endian words of type W.
// Counted in pieces of 2^15 with a W-wide counter so that the compiler can vectorise the loop.
template <class W>
uint64_t count_exponent_all_ones(const uint8_t* p, uint64_t n, W exponent_mask) noexcept {
  uint64_t c = 0;
  for (uint64_t at = 0; at < n; at += 32768) {
    const uint64_t end = std::min<uint64_t>(n, at + 32768);
    W piece = 0;
    for (uint64_t i = at; i < end; ++i) {
      W w;
      std::memcpy(&w, p + i * sizeof(W), sizeof(W));
      piece += static_cast<W>((w & exponent_mask) == exponent_mask);
    }
    c += piece;
  }
  return c;
}
}  // namespace

uint64_t count_nonfinite(const Tensor& t) noexcept {
  const size_t w = dtype_size(t.dtype());
  if (w == 0 || t.data.empty()) return 0;
  const uint64_t n = t.data.size() / w;
  switch (t.dtype()) {
    case DType::F16: return count_exponent_all_ones<uint16_t>(t.data.data(), n, 0x7c00);
    case DType::BF16: return count_exponent_all_ones<uint16_t>(t.data.data(), n, 0x7f80);
    case DType::F32: return count_exponent_all_ones<uint32_t>(t.data.data(), n, 0x7f800000u);
    case DType::F64: return count_exponent_all_ones<uint64_t>(t.data.data(), n, 0x7ff0000000000000ull);
    case DType::Other: return 0;
  }
  return 0;
}

uint64_t count_beyond_f32(const Tensor& t) noexcept {
  if (t.dtype() != DType::F64 || t.data.empty()) return 0;
  const uint64_t n = t.data.size() / 8;
  const uint8_t* p = t.data.data();
  uint64_t c = 0;
  for (uint64_t i = 0; i < n; ++i) {
    double v;
    std::memcpy(&v, p + 8 * i, 8);
    const double a = std::fabs(v);
    c += a > double(std::numeric_limits<float>::max()) && a <= std::numeric_limits<double>::max();
  }
  return c;
}

const char* dtype_name(DType t) noexcept {
  switch (t) {
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::Other: return "other";
  }
  return "?";
}

Buffer::Buffer(std::vector<uint8_t> bytes) {
  auto owned = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  data_ = owned->data();
  size_ = owned->size();
  owner_ = std::move(owned);
}

Buffer Buffer::view(std::shared_ptr<const void> owner, const uint8_t* data, size_t size) {
  Buffer b;
  b.owner_ = std::move(owner);
  b.data_ = data;
  b.size_ = size;
  return b;
}

uint64_t shape_elements(const std::vector<uint64_t>& shape) {
  uint64_t n = 1;
  for (uint64_t d : shape) {
    if (d != 0 && n > (uint64_t{1} << 62) / d)
      fail(ErrorCode::Input, "shape " + shape_string(shape) + " has too many elements");
    n *= d;
  }
  return n;
}

std::string shape_string(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string Error::without_nul(const std::string& s) {
  if (s.find('\0') == std::string::npos) return s;
  std::string out;
  for (char c : s) {
    if (c == '\0') out += "\\x00";
    else out += c;
  }
  return out;
}

const char* error_code_name(ErrorCode c) noexcept {
  switch (c) {
    case ErrorCode::Usage: return "usage";
    case ErrorCode::Input: return "input";
    case ErrorCode::Corrupt: return "corrupt";
    case ErrorCode::Internal: return "internal";
    case ErrorCode::Mismatch: return "mismatch";
  }
  return "?";
}

}  // namespace gradcodec
