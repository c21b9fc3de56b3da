// SPDX-License-Identifier: BSD-3-Clause
// NPY: header parsing and formatting shared with NPZ and the directory format, plus the single-file
// .npy reader and writer. What the header's text means (its literal parser, numpy descrs) is in
// npy_header.hpp.
#include "npy.hpp"

#include "npy_header.hpp"
#include "readers.hpp"

#include <gradcodec/detail/pages.hpp>

#include <gradcodec/error.hpp>
#include <gradcodec/half.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <new>
#include <string_view>
#include <utility>

#include <fcntl.h>
#include <unistd.h>

namespace gradcodec::formats {
namespace npy {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;             // numpy's ARRAY_ALIGN
constexpr size_t kGrowthAxisDigits = 21;  // numpy's GROWTH_AXIS_MAX_DIGITS

[[noreturn]] void input_error(const std::string& where, const std::string& what) {
  fail(ErrorCode::Input, where + ": " + what);
}

uint32_t read_le(const uint8_t* p, size_t n) {
  uint32_t v = 0;
  for (size_t i = n; i-- > 0;) v = (v << 8) | p[i];
  return v;
}

// ---------------------------------------------------------------------------------------------
// Text encodings: headers 1.0/2.0 are latin-1, 3.0 is UTF-8; descr strings are kept as UTF-8.

std::string latin1_to_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x80) {
      out += ch;
    } else {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : 9;
    if (n == 9 || (n == 1 && c < 0xC2)) return false;  // stray continuation byte, overlong
    if (n > 0 && i + n >= s.size()) return false;        // sequence cut short
    for (size_t k = 1; k <= n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n + 1;
  }
  return true;
}

// UTF-8 → latin-1 when every character fits, as numpy's choice of version 1.0/2.0 over 3.0.
bool utf8_to_latin1(std::string_view s, std::string& out) {
  out.clear();
  for (size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if ((c == 0xC2 || c == 0xC3) && i + 1 < s.size() &&
               (static_cast<unsigned char>(s[i + 1]) & 0xC0) == 0x80) {
      out += static_cast<char>(((c & 0x1F) << 6) | (static_cast<unsigned char>(s[++i]) & 0x3F));
    } else {
      return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Data conversion.

template <size_t N>
void swap_elements(uint8_t* p, uint64_t count) {
  for (uint64_t i = 0; i < count; ++i, p += N) std::reverse(p, p + N);
}

void byteswap(uint8_t* p, uint64_t count, uint64_t itemsize) {
  switch (itemsize) {
    case 2: swap_elements<2>(p, count); break;
    case 4: swap_elements<4>(p, count); break;
    case 8: swap_elements<8>(p, count); break;
    default: break;
  }
}

// Fortran order (first index fastest) → C order (last index fastest), element by element.
template <size_t N>
void fortran_to_c_fixed(const uint8_t* src, uint8_t* dst, const std::vector<uint64_t>& shape,
                        uint64_t item) {
  const size_t nd = shape.size();
  std::vector<uint64_t> stride(nd), idx(nd, 0);  // Fortran strides, in elements
  uint64_t s = 1;
  for (size_t k = 0; k < nd; ++k) {
    stride[k] = s;
    s *= shape[k];
  }
  const uint64_t total = s, row = shape[nd - 1], row_stride = stride[nd - 1];
  const uint64_t isz = N ? N : item;
  uint64_t base = 0;  // Fortran offset of (idx[0], ..., idx[nd-2], 0)
  for (uint64_t out = 0; out < total; out += row) {
    uint8_t* d = dst + out * isz;
    const uint8_t* sp = src + base * isz;
    for (uint64_t j = 0; j < row; ++j) std::memcpy(d + j * isz, sp + j * row_stride * isz, isz);
    for (size_t k = nd - 1; k-- > 0;) {
      base += stride[k];
      if (++idx[k] < shape[k]) break;
      base -= stride[k] * shape[k];
      idx[k] = 0;
    }
  }
}

void fortran_to_c(const uint8_t* src, uint8_t* dst, const std::vector<uint64_t>& shape, uint64_t item) {
  switch (item) {
    case 1: fortran_to_c_fixed<1>(src, dst, shape, item); break;
    case 2: fortran_to_c_fixed<2>(src, dst, shape, item); break;
    case 4: fortran_to_c_fixed<4>(src, dst, shape, item); break;
    case 8: fortran_to_c_fixed<8>(src, dst, shape, item); break;
    default: fortran_to_c_fixed<0>(src, dst, shape, item); break;
  }
}

std::string shape_repr(const std::vector<uint64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

}  // namespace

// ---------------------------------------------------------------------------------------------

uint64_t header_end(const uint8_t* p, size_t avail, uint64_t total_size, const std::string& where) {
  if (avail < 8 || std::memcmp(p, kMagic, kMagicLen) != 0) {
    if (avail >= kMagicLen && std::memcmp(p, kMagic, kMagicLen) == 0)
      input_error(where, "truncated NPY preamble (" + std::to_string(total_size) + " bytes)");
    input_error(where, "not an NPY file (bad magic)");
  }
  unsigned major = p[6], minor = p[7];
  if (major < 1 || major > 3 || minor != 0)
    input_error(where, "unsupported NPY version " + std::to_string(major) + "." +
                           std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)");
  size_t len_bytes = major == 1 ? 2 : 4;
  if (avail < 8 + len_bytes)
    input_error(where, "truncated NPY preamble (" + std::to_string(total_size) + " bytes)");
  uint64_t hlen = read_le(p + 8, len_bytes);
  if (hlen > kMaxHeaderLength)
    input_error(where, "NPY header length " + std::to_string(hlen) + " exceeds the limit of " +
                           std::to_string(kMaxHeaderLength) + " bytes");
  uint64_t end = 8 + len_bytes + hlen;
  if (end > total_size)
    input_error(where, "NPY header length " + std::to_string(hlen) +
                           " goes beyond the end of the data (" + std::to_string(total_size) +
                           " bytes)");
  return end;
}

Header parse_header(const uint8_t* p, uint64_t end, uint64_t total_size, const std::string& where) {
  unsigned major = p[6];
  size_t start = major == 1 ? 10 : 12;
  std::string_view raw(reinterpret_cast<const char*>(p + start), end - start);
  std::string text;
  if (major < 3) {
    text = latin1_to_utf8(raw);
  } else {
    if (!valid_utf8(raw)) input_error(where, "malformed NPY header: not valid UTF-8");
    text = raw;
  }

  Header h;
  const Value *descr = nullptr, *fortran = nullptr, *shape = nullptr;
  std::vector<std::pair<std::string, Value>> dict;
  try {
    dict = Parser(text).dict();
  } catch (const ParseError& e) {
    input_error(where, "malformed NPY header: " + e.what + " at byte " +
                           std::to_string(start + e.offset));
  }
  for (const auto& [key, value] : dict) {
    const Value** slot = key == "descr" ? &descr : key == "fortran_order" ? &fortran
                         : key == "shape" ? &shape : nullptr;
    if (!slot) input_error(where, "malformed NPY header: unexpected key '" + key + "'");
    if (*slot) input_error(where, "malformed NPY header: duplicate key '" + key + "'");
    *slot = &value;
  }
  if (!descr || !fortran || !shape)
    input_error(where, std::string("malformed NPY header: missing key '") +
                           (!descr ? "descr" : !fortran ? "fortran_order" : "shape") + "'");
  if (fortran->kind != Value::Kind::Bool)
    input_error(where, "malformed NPY header: fortran_order is not True or False");
  h.fortran_order = fortran->boolean;

  if (shape->kind != Value::Kind::Tuple)
    input_error(where, "malformed NPY header: shape is not a tuple");
  for (const Value& d : shape->items) {
    if (d.kind != Value::Kind::Int) input_error(where, "malformed NPY header: shape holds a non-integer");
    std::string digits = text.substr(d.begin, d.end - d.begin);
    if (d.negative && d.magnitude != 0) input_error(where, "negative dimension " + digits + " in shape");
    if (d.too_big) input_error(where, "dimension " + digits + " in shape is too large");
    h.info.shape.push_back(d.magnitude);
  }

  Descr dd;
  std::string descr_text = descr->kind == Value::Kind::Str
                               ? descr->str
                               : text.substr(descr->begin, descr->end - descr->begin);
  if (!classify(*descr, dd)) input_error(where, "unknown dtype descr " + descr_text);
  h.info.dtype = dd.dtype;
  h.info.descr = descr_text;
  h.info.big_endian = dd.big_endian;
  h.swap = dd.big_endian;
  h.pickled = dd.object;
  h.itemsize = dd.object ? 0 : dd.itemsize;
  h.data_offset = end;

  uint64_t elements = 1;
  for (uint64_t d : h.info.shape)
    if (!mul_checked(elements, d, elements))
      input_error(where, "shape " + shape_string(h.info.shape) + " has too many elements");
  uint64_t available = total_size - end;
  if (h.pickled) {
    h.data_bytes = available;
  } else {
    if (!mul_checked(elements, h.itemsize, h.data_bytes))
      input_error(where, "shape " + shape_string(h.info.shape) + " of " + descr_text +
                             " overflows the size of any file");
    if (h.data_bytes > available)
      input_error(where, "truncated: shape " + shape_string(h.info.shape) + " of " + descr_text +
                             " needs " + std::to_string(h.data_bytes) + " bytes of data, only " +
                             std::to_string(available) + " follow the header");
  }
  return h;
}

Header parse_stream(const uint8_t* p, uint64_t size, const std::string& where) {
  uint64_t end = header_end(p, static_cast<size_t>(std::min<uint64_t>(size, kPreambleBytes)), size, where);
  return parse_header(p, end, size, where);
}

std::shared_ptr<uint8_t[]> allocate(uint64_t n, const std::string& where) {
  try {
    std::shared_ptr<uint8_t[]> p(new uint8_t[n ? n : 1]);
    prepare_written(p.get(), n);  // written whole next: mapped ahead, not a page fault per 4 KiB
    return p;
  } catch (const std::bad_alloc&) {
    input_error(where, "cannot allocate " + std::to_string(n) + " bytes for the array");
  }
}

Buffer to_tensor_data(const Header& h, Buffer raw, const std::string& where) {
  if (h.pickled || h.data_bytes == 0) return raw;
  size_t non_trivial = 0;
  for (uint64_t d : h.info.shape) non_trivial += d > 1;
  bool transpose = h.fortran_order && non_trivial > 1;
  bool misaligned = is_float(h.info.dtype) && reinterpret_cast<uintptr_t>(raw.data()) % h.itemsize != 0;
  if (!transpose && !h.swap && !misaligned) return raw;

  std::shared_ptr<uint8_t[]> owned = allocate(h.data_bytes, where);
  if (transpose) {
    fortran_to_c(raw.data(), owned.get(), h.info.shape, h.itemsize);
  } else {
    std::memcpy(owned.get(), raw.data(), h.data_bytes);
  }
  if (h.swap) byteswap(owned.get(), h.data_bytes / h.itemsize, h.itemsize);
  uint8_t* p = owned.get();
  return Buffer::view(std::move(owned), p, h.data_bytes);
}

void write_array(const Tensor& t, const Sink& out, std::vector<std::string>& warnings) {
  const TensorInfo& info = t.info;
  const std::string who = "tensor " + info.name;
  const bool be = info.big_endian;
  std::string descr_literal;
  uint64_t itemsize = 0;
  bool bf16 = false, swap = false, pickled = false;
  switch (info.dtype) {
    case DType::F16: descr_literal = be ? "'>f2'" : "'<f2'"; itemsize = 2; break;
    case DType::BF16:  // numpy has no bfloat16: float32 holds every bf16 value exactly
    case DType::F32: descr_literal = be ? "'>f4'" : "'<f4'"; itemsize = 4; break;
    case DType::F64: descr_literal = be ? "'>f8'" : "'<f8'"; itemsize = 8; break;
    case DType::Other: {
      if (info.descr.empty())
        fail(ErrorCode::Usage, who + ": dtype other without a numpy descr cannot be written to NPY");
      if (!valid_utf8(info.descr))
        fail(ErrorCode::Usage, who + ": dtype descr is not valid UTF-8");
      bool is_list = info.descr.front() == '[';
      if (!is_list && info.descr.find_first_of("'\"\\\n") != std::string::npos)
        fail(ErrorCode::Usage, who + ": dtype descr " + info.descr + " cannot be written to NPY");
      descr_literal = is_list ? info.descr : "'" + info.descr + "'";
      Descr dd;
      bool ok = false;
      try {
        Value v = Parser(descr_literal).single();
        ok = classify(v, dd);
      } catch (const ParseError&) {
        ok = false;
      }
      if (!ok || dd.dtype != DType::Other)
        fail(ErrorCode::Usage, who + ": dtype descr " + info.descr + " cannot be written to NPY");
      pickled = dd.object;
      itemsize = dd.itemsize;
      break;
    }
  }
  if (is_float(info.dtype)) {
    bf16 = info.dtype == DType::BF16;
    swap = be;
  }
  const uint64_t elements = info.elements();
  if (!pickled) {
    uint64_t in_size = 0;
    uint64_t in_item = is_float(info.dtype) ? dtype_size(info.dtype) : itemsize;
    if (!mul_checked(elements, in_item, in_size) || in_size != t.data.size())
      fail(ErrorCode::Internal, who + ": data holds " + std::to_string(t.data.size()) +
                                    " bytes, shape " + shape_string(info.shape) + " needs " +
                                    std::to_string(elements) + " × " + std::to_string(in_item));
  }

  // The header exactly as numpy 1.24 formats it (numpy/lib/format.py: _write_array_header).
  std::string dict = "{'descr': " + descr_literal + ", 'fortran_order': False, 'shape': " +
                     shape_repr(info.shape) + ", }";
  if (!info.shape.empty()) dict.append(kGrowthAxisDigits - std::to_string(info.shape[0]).size(), ' ');
  std::string encoded;
  unsigned major = 1;
  if (!utf8_to_latin1(dict, encoded)) {
    major = 3;
    encoded = dict;
  }
  size_t len_bytes = major == 1 ? 2 : 4;
  uint64_t hlen = encoded.size() + 1;
  uint64_t pad = kAlign - (kMagicLen + 2 + len_bytes + hlen) % kAlign;
  if (major == 1 && hlen + pad > 0xFFFF) {
    major = 2;
    len_bytes = 4;
    pad = kAlign - (kMagicLen + 2 + len_bytes + hlen) % kAlign;
  }
  uint64_t stored = hlen + pad;
  if (stored > kMaxHeaderLength)
    fail(ErrorCode::Usage, who + ": dtype descr too long for an NPY header");
  std::string header(kMagic, kMagicLen);
  header += static_cast<char>(major);
  header += '\0';
  for (size_t i = 0; i < len_bytes; ++i) header += static_cast<char>((stored >> (8 * i)) & 0xFF);
  header += encoded;
  header.append(pad, ' ');
  header += '\n';

  if (bf16)
    warnings.push_back(who + ": bf16 stored as float32 (numpy has no bfloat16)");
  out(header.data(), header.size());
  if (!bf16 && !swap) {
    out(t.data.data(), t.data.size());
    return;
  }
  // Converted data goes out in chunks: no second copy of the whole tensor.
  constexpr uint64_t kChunk = 1 << 14;
  std::vector<uint8_t> buf(kChunk * itemsize);
  const uint8_t* src = t.data.data();
  const uint64_t in_item = dtype_size(info.dtype);
  for (uint64_t done = 0; done < elements;) {
    uint64_t n = std::min(kChunk, elements - done);
    if (bf16) {
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, src + (done + i) * 2, 2);
        float f = bf16_to_f32(b);
        std::memcpy(buf.data() + i * 4, &f, 4);
      }
    } else {
      std::memcpy(buf.data(), src + done * in_item, n * in_item);
    }
    if (swap) byteswap(buf.data(), n, itemsize);
    out(buf.data(), n * itemsize);
    done += n;
  }
}

void check_file_name(const std::string& name, const std::string& where) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos)
    fail(ErrorCode::Usage, where + ": tensor name '" + name +
                               "' cannot be a file name in the directory (it is empty, '.' or "
                               "'..', or contains '/'); an .npz or .safetensors output keeps it");
}

void sync_file(const std::string& path, const std::string& target) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  bool ok = fd >= 0 && ::fsync(fd) == 0;
  int err = errno;
  if (fd >= 0) ::close(fd);
  if (!ok) fail(ErrorCode::Input, target + ": write failed: " + std::strerror(err));
}

}  // namespace npy

// ---------------------------------------------------------------------------------------------
// The .npy reader and writer.

namespace {

class NpyReader final : public SnapshotReader {
 public:
  explicit NpyReader(std::shared_ptr<const InputFile> file) : file_(std::move(file)) {
    header_ = npy::parse_stream(file_->data(), file_->size(), file_->path());
    // An array read from standard input gets numpy's default name for unnamed arrays.
    header_.info.name = file_->path() == "<stdin>"
                            ? "arr_0"
                            : std::filesystem::path(file_->path()).stem().string();
    infos_.push_back(header_.info);
  }
  Format format() const override { return Format::Npy; }
  const std::string& path() const override { return file_->path(); }
  const std::vector<TensorInfo>& arrays() const override { return infos_; }
  Tensor read(size_t i) override {
    if (i != 0) fail(ErrorCode::Internal, file_->path() + ": array index out of range");
    Buffer raw = file_->slice(header_.data_offset, header_.data_bytes);
    return Tensor{header_.info, npy::to_tensor_data(header_, std::move(raw), file_->path())};
  }

 private:
  std::shared_ptr<const InputFile> file_;
  npy::Header header_;
  std::vector<TensorInfo> infos_;
};

class NpyWriter final : public SnapshotWriter {
 public:
  NpyWriter(const std::string& path, bool overwrite) : path_(path), out_(path, overwrite) {}
  void add(const Tensor& t) override {
    if (started_)
      fail(ErrorCode::Usage, path_ + ": an .npy file holds exactly one tensor (write several "
                                     "to an .npz or a directory)");
    npy::write_array(t, [&](const void* p, size_t n) {
      started_ = true;
      out_.write(p, n);
    }, warnings_);
    complete_ = true;
  }
  void complete() override {
    if (!started_) fail(ErrorCode::Usage, path_ + ": no tensor to write");
    if (!complete_) fail(ErrorCode::Internal, path_ + ": an earlier write failed");
    out_.seal();
  }
  void publish() override { out_.publish(); }
  std::vector<std::string> take_warnings() override { return std::exchange(warnings_, {}); }

 private:
  std::string path_;
  AtomicOutput out_;
  bool started_ = false, complete_ = false;
  std::vector<std::string> warnings_;
};

}  // namespace

std::unique_ptr<SnapshotReader> open_npy(std::shared_ptr<const InputFile> file) {
  return std::make_unique<NpyReader>(std::move(file));
}

std::unique_ptr<SnapshotWriter> create_npy(const std::string& path, bool overwrite) {
  return std::make_unique<NpyWriter>(path, overwrite);
}

}  // namespace gradcodec::formats