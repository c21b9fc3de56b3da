// SPDX-License-Identifier: BSD-3-Clause
// safetensors reader (https://github.com/huggingface/safetensors, format README).
//
// File layout: u64 little-endian N, N bytes of UTF-8 JSON header (may end in spaces), then the
// byte buffer. The header is an object: optional "__metadata__" (string -> string) and one entry
// per tensor {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]} with offsets relative
// to the start of the buffer.
//
// Reader decisions (see also docs):
//  * Validation follows the reference implementation (safetensors crate, read_metadata/validate):
//    header size <= 100,000,000 bytes and within the file; header valid UTF-8 starting with '{';
//    strict JSON; "__metadata__" an object of strings (or null, like the reference); every entry has dtype/shape/data_offsets of
//    the right types (unknown extra fields are ignored, as serde does); entries sorted by offsets
//    are contiguous from 0, cover the whole buffer, and end - begin = elements x dtype size.
//    Stricter than the reference: duplicate keys are refused at every level (the reference keeps
//    the last of duplicate tensor or __metadata__ keys), shapes are limited to 64 dimensions and to 2^62 elements (the library's
//    shape_elements limit), and sub-byte dtypes (F4, F6_*) are refused as unsupported.
//  * JSON objects are unordered, so arrays() lists the tensors in data-offset order (the byte
//    layout order of the file; equal to header order for files written by the reference writer
//    and by us). Empty tensors sharing an offset keep their header order.
//  * The header is parsed with a SAX handler: no DOM is built, duplicate keys are seen. Arrays and
//    objects nested more than kMaxJsonDepth (128) levels are refused, as the reference's serde_json
//    refuses them (at its default recursion limit of 128).
//  * dtypes: F16/BF16/F32/F64 are floats; BOOL, U8..U64, I8..I64, C64 are DType::Other with the
//    numpy descr ("|b1", "|u1", "<u2", "|i1", "<i8", "<c8", ...). The 8-bit float kinds F8_E4M3,
//    F8_E5M2, F8_E8M0 have no numpy type: they become DType::Other with the one-field structured
//    numpy descr "[('F8_E4M3', '|V1')]" — a valid numpy dtype of one opaque byte whose field name
//    keeps the safetensors name, so the writer restores it exactly.
//  * read(i) returns a view into the mapped file (no copy) unless the data is misaligned for its
//    element size (only possible when a foreign writer did not pad the header) or the host is
//    big-endian; then it copies.
#include "readers.hpp"
#include "safetensors_common.hpp"
#include "text.hpp"

#include <gradcodec/error.hpp>

#include <gradcodec/detail/json_capped.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace gradcodec::formats {

namespace {

using namespace safetensors;

// ---------------------------------------------------------------------------------------------
// Header parsing

struct Entry {
  std::string name;
  size_t header_index = 0;
  const StDtype* dtype = nullptr;
  std::vector<uint64_t> shape;
  uint64_t begin = 0, end = 0;
  uint64_t nbytes = 0;
};

// SAX handler for the header. Builds the entries directly (no DOM) and refuses duplicate keys,
// ill-typed fields and anything the reference implementation would not deserialize.
class HeaderSax {
 public:
  using json = nlohmann::json;

  std::vector<Entry> entries;
  std::string error;  // first error, without the path
  std::vector<std::pair<std::string, std::string>> metadata;  // "__metadata__", in file order

  bool null() {
    // "__metadata__": null is accepted, as the reference's Option<HashMap> deserializes it to None
    Frame* f = top();
    if (f && f->role == Role::Root && f->field == "__metadata__") return true;
    return scalar("null");
  }
  bool boolean(bool) { return scalar("a boolean"); }
  bool number_integer(json::number_integer_t v) {
    if (v >= 0) return number_unsigned(static_cast<json::number_unsigned_t>(v));  // "-0"
    return number(false, true);
  }
  bool number_unsigned(json::number_unsigned_t v) {
    value_ = v;
    return number(true, false);
  }
  bool number_float(json::number_float_t, const std::string& lexeme) {
    // an integer too large for 64 bits also arrives here
    too_large_ = lexeme.find_first_of(".eE") == std::string::npos;
    return number(false, false);
  }
  bool string(std::string& s) {
    Frame* f = top();
    if (!f) return fail_("the header is not a JSON object");
    switch (f->role) {
      case Role::Root: return fail_(entry_not_object());
      case Role::Metadata:
        metadata.emplace_back(f->field, s);
        return true;
      case Role::Entry:
        if (f->field == "dtype") {
          dtype_ = s;
          have_dtype_ = true;
        } else if (f->field == "shape" || f->field == "data_offsets") {
          return fail_(entry_prefix() + f->field + " has the wrong type (a string)");
        }
        return true;
      case Role::Shape: return fail_(entry_prefix() + "shape entry " + printable(s) + " is not an integer");
      case Role::Offsets: return fail_(entry_prefix() + "data_offsets entry " + printable(s) + " is not an integer");
      case Role::Skip: return true;
    }
    return true;
  }
  bool binary(json::binary_t&) { return scalar("binary data"); }

  bool start_object(std::size_t) {
    Frame* f = top();
    if (!f) {
      stack_.push_back(Frame{Role::Root});
      return true;
    }
    switch (f->role) {
      case Role::Root:
        if (f->field == "__metadata__") {
          stack_.push_back(Frame{Role::Metadata});
        } else {
          begin_entry(f->field);
          stack_.push_back(Frame{Role::Entry});
        }
        return true;
      case Role::Metadata: return fail_("__metadata__ value of " + printable(f->field) + " is not a string");
      case Role::Entry:
        if (f->field == "dtype" || f->field == "shape" || f->field == "data_offsets")
          return fail_(entry_prefix() + f->field + " has the wrong type (an object)");
        stack_.push_back(Frame{Role::Skip});
        return true;
      case Role::Shape: return fail_(entry_prefix() + "shape entry is not an integer");
      case Role::Offsets: return fail_(entry_prefix() + "data_offsets entry is not an integer");
      case Role::Skip: stack_.push_back(Frame{Role::Skip}); return true;
    }
    return true;
  }

  bool key(std::string& k) {
    Frame* f = top();
    if (!f->keys.insert(k).second) {
      if (f->role == Role::Root) return fail_("duplicate key " + printable(k));
      if (f->role == Role::Metadata) return fail_("__metadata__ has a duplicate key " + printable(k));
      return fail_(entry_prefix() + "duplicate key " + printable(k));
    }
    f->field = k;
    return true;
  }

  bool end_object() {
    Role r = stack_.back().role;
    stack_.pop_back();
    if (r == Role::Entry) return finish_entry();
    return true;
  }

  bool start_array(std::size_t) {
    Frame* f = top();
    if (!f) return fail_("the header is not a JSON object");
    switch (f->role) {
      case Role::Root: return fail_(entry_not_object());
      case Role::Metadata: return fail_("__metadata__ value of " + printable(f->field) + " is not a string");
      case Role::Entry:
        if (f->field == "shape") {
          shape_.clear();
          have_shape_ = true;
          stack_.push_back(Frame{Role::Shape});
        } else if (f->field == "data_offsets") {
          offsets_count_ = 0;
          have_offsets_ = true;
          stack_.push_back(Frame{Role::Offsets});
        } else if (f->field == "dtype") {
          return fail_(entry_prefix() + "dtype has the wrong type (an array)");
        } else {
          stack_.push_back(Frame{Role::Skip});
        }
        return true;
      case Role::Shape: return fail_(entry_prefix() + "shape entry is not an integer");
      case Role::Offsets: return fail_(entry_prefix() + "data_offsets entry is not an integer");
      case Role::Skip: stack_.push_back(Frame{Role::Skip}); return true;
    }
    return true;
  }

  bool end_array() {
    Role r = stack_.back().role;
    stack_.pop_back();
    if (r == Role::Offsets && offsets_count_ != 2)
      return fail_(entry_prefix() + "data_offsets must have exactly 2 entries, not " +
                   std::to_string(offsets_count_));
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) {
    if (error.empty()) error = std::string("invalid JSON in header: ") + ex.what();
    return false;
  }

 private:
  enum class Role { Root, Metadata, Entry, Shape, Offsets, Skip };
  struct Frame {
    Role role;
    std::set<std::string> keys = {};
    std::string field = {};  // the last key (objects)
  };

  std::vector<Frame> stack_;
  size_t header_index_ = 0;
  // the entry being parsed
  std::string name_;
  std::string dtype_;
  std::vector<uint64_t> shape_;
  uint64_t offsets_[2] = {0, 0};
  size_t offsets_count_ = 0;
  bool have_dtype_ = false, have_shape_ = false, have_offsets_ = false;
  uint64_t value_ = 0;
  bool too_large_ = false;

  Frame* top() { return stack_.empty() ? nullptr : &stack_.back(); }

  bool fail_(const std::string& what) {
    if (error.empty()) error = what;
    return false;
  }

  std::string entry_prefix() const { return "tensor " + printable(name_) + ": "; }
  std::string entry_not_object() const {
    const std::string& k = stack_.back().field;
    if (k == "__metadata__") return "__metadata__ is not an object";
    return "tensor " + printable(k) + ": entry is not an object";
  }

  bool scalar(const char* what) {
    Frame* f = top();
    if (!f) return fail_("the header is not a JSON object");
    switch (f->role) {
      case Role::Root: return fail_(entry_not_object());
      case Role::Metadata:
        return fail_("__metadata__ value of " + printable(f->field) + " is not a string");
      case Role::Entry:
        if (f->field == "dtype" || f->field == "shape" || f->field == "data_offsets")
          return fail_(entry_prefix() + f->field + " has the wrong type (" + what + ")");
        return true;
      case Role::Shape: return fail_(entry_prefix() + "shape entry is not an integer");
      case Role::Offsets: return fail_(entry_prefix() + "data_offsets entry is not an integer");
      case Role::Skip: return true;
    }
    return true;
  }

  // A number was read; value_ holds it when `is_unsigned`.
  bool number(bool is_unsigned, bool negative) {
    Frame* f = top();
    if (!f) return fail_("the header is not a JSON object");
    switch (f->role) {
      case Role::Shape:
        if (negative) return fail_(entry_prefix() + "negative dimension in shape");
        if (!is_unsigned)
          return fail_(entry_prefix() + (too_large_ ? "dimension in shape does not fit 64 bits"
                                                    : "non-integer dimension in shape"));
        if (shape_.size() >= kMaxRank)
          return fail_(entry_prefix() + "shape has more than " + std::to_string(kMaxRank) + " dimensions");
        shape_.push_back(value_);
        return true;
      case Role::Offsets:
        if (negative) return fail_(entry_prefix() + "negative data offset");
        if (!is_unsigned)
          return fail_(entry_prefix() + (too_large_ ? "data offset does not fit 64 bits"
                                                    : "non-integer data offset"));
        if (offsets_count_ >= 2)
          return fail_(entry_prefix() + "data_offsets must have exactly 2 entries");
        offsets_[offsets_count_++] = value_;
        return true;
      default: return scalar("a number");
    }
  }

  void begin_entry(const std::string& name) {
    name_ = name;
    dtype_.clear();
    shape_.clear();
    offsets_count_ = 0;
    have_dtype_ = have_shape_ = have_offsets_ = false;
  }

  bool finish_entry() {
    for (auto [have, field] : {std::pair{have_dtype_, "dtype"}, std::pair{have_shape_, "shape"},
                               std::pair{have_offsets_, "data_offsets"}})
      if (!have) return fail_(entry_prefix() + "missing field '" + field + "'");
    Entry e;
    e.name = name_;
    e.header_index = header_index_++;
    e.dtype = find_dtype_by_name(dtype_);
    if (!e.dtype) {
      if (dtype_ == "F4" || dtype_ == "F6_E2M3" || dtype_ == "F6_E3M2")
        return fail_(entry_prefix() + "sub-byte dtype " + dtype_ + " is not supported");
      return fail_(entry_prefix() + "unknown dtype " + printable(dtype_));
    }
    e.shape = shape_;
    uint64_t n = 1;
    for (uint64_t d : e.shape) {
      if (d != 0 && n > kMaxElements / d)
        return fail_(entry_prefix() + "shape " + shape_string(e.shape) + " has too many elements");
      n *= d;
    }
    if (e.dtype->size > 1 && n > ~uint64_t{0} / e.dtype->size)
      return fail_(entry_prefix() + "shape " + shape_string(e.shape) + " has too many bytes");
    e.nbytes = n * e.dtype->size;
    e.begin = offsets_[0];
    e.end = offsets_[1];
    entries.push_back(std::move(e));
    return true;
  }
};

// ---------------------------------------------------------------------------------------------
// Reader

class SafetensorsReader final : public SnapshotReader {
 public:
  explicit SafetensorsReader(std::shared_ptr<const InputFile> file) : file_(std::move(file)) {
    const std::string& path = file_->path();
    auto bad = [&](const std::string& what) { fail(ErrorCode::Input, path + ": safetensors: " + what); };
    const uint64_t fsize = file_->size();
    if (fsize < 8)
      bad("file of " + std::to_string(fsize) + " bytes is shorter than the 8-byte header size");
    const uint64_t n = read_le64(file_->data());
    if (n > kMaxHeaderSize)
      bad("header size " + std::to_string(n) + " exceeds the 100 MB cap (" +
          std::to_string(kMaxHeaderSize) + " bytes)");
    if (n > fsize - 8)
      bad("header size " + std::to_string(n) + " beyond the end of the file (" +
          std::to_string(fsize) + " bytes)");
    const uint8_t* h = file_->data() + 8;
    if (!valid_utf8(h, n)) bad("header is not valid UTF-8");
    if (n == 0 || h[0] != '{') bad("header does not start with '{'");

    HeaderSax sax;
    DepthCappedSax<nlohmann::json, HeaderSax> capped(sax);  // (the Skip frames would grow without end)
    bool ok = false;
    try {
      ok = nlohmann::json::sax_parse(h, h + n, &capped, nlohmann::json::input_format_t::json, true);
    } catch (const nlohmann::json::exception& e) {
      if (sax.error.empty()) sax.error = std::string("invalid JSON in header: ") + e.what();
    }
    if (!capped.error().empty()) bad("header has " + capped.error());
    if (!ok || !sax.error.empty())
      bad((sax.error.empty() ? std::string("header is not valid JSON") : sax.error));

    metadata_ = std::move(sax.metadata);
    const uint64_t data_start = 8 + n;
    const uint64_t buffer_size = fsize - data_start;
    std::vector<Entry> entries = std::move(sax.entries);
    std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t pos = 0;
    const Entry* prev = nullptr;
    for (const Entry& e : entries) {
      std::string t = "tensor " + printable(e.name) + ": ";
      std::string offs = "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
      if (e.end < e.begin) bad(t + offs + " end before begin");
      if (e.end > buffer_size)
        bad(t + offs + " beyond the data buffer of " + std::to_string(buffer_size) + " bytes");
      if (e.begin < pos) bad(t + offs + " overlap tensor " + printable(prev->name));
      if (e.begin > pos)
        bad(t + offs + " leave a hole of " + std::to_string(e.begin - pos) + " bytes at buffer offset " +
            std::to_string(pos) + " (file offset " + std::to_string(data_start + pos) + ")");
      if (e.end - e.begin != e.nbytes)
        bad(t + offs + " hold " + std::to_string(e.end - e.begin) + " bytes but " + e.dtype->name +
            " shape " + shape_string(e.shape) + " needs " + std::to_string(e.nbytes));
      pos = e.end;
      prev = &e;
    }
    if (pos != buffer_size)
      bad("the tensors cover " + std::to_string(pos) + " bytes of the " + std::to_string(buffer_size) +
          "-byte data buffer (trailing bytes)");

    infos_.reserve(entries.size());
    for (Entry& e : entries) {
      TensorInfo info;
      info.name = std::move(e.name);
      info.dtype = e.dtype->dtype;
      info.descr = e.dtype->descr;
      info.shape = std::move(e.shape);
      infos_.push_back(std::move(info));
      where_.push_back(Where{data_start + e.begin, e.nbytes, e.dtype->size});
    }
  }

  Format format() const override { return Format::Safetensors; }
  const std::string& path() const override { return file_->path(); }
  const std::vector<TensorInfo>& arrays() const override { return infos_; }
  std::vector<std::pair<std::string, std::string>> metadata() const override { return metadata_; }

  Tensor read(size_t i) override {
    if (i >= infos_.size())
      fail(ErrorCode::Internal, path() + ": array index " + std::to_string(i) + " out of range");
    const Where& w = where_[i];
    Tensor t;
    t.info = infos_[i];
    t.data = file_->slice(w.offset, w.nbytes);
    const bool swap = std::endian::native != std::endian::little && t.info.dtype != DType::Other;
    const bool misaligned = reinterpret_cast<uintptr_t>(t.data.data()) % w.elem_size != 0;
    if (swap || misaligned) {
      std::vector<uint8_t> copy(t.data.data(), t.data.data() + t.data.size());
      if (swap) byteswap_in_place(copy.data(), copy.size(), w.elem_size);
      t.data = Buffer(std::move(copy));
    }
    return t;
  }

 private:
  struct Where {
    uint64_t offset;  // absolute, in the file
    uint64_t nbytes;
    size_t elem_size;
  };
  std::shared_ptr<const InputFile> file_;
  std::vector<TensorInfo> infos_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  std::vector<Where> where_;
};

}  // namespace

uint64_t safetensors_declared_size(const uint8_t* p, size_t avail) {
  if (avail < 8) return 8;
  const uint64_t n = read_le64(p);
  if (n > kMaxHeaderSize || n > avail - 8) return std::min<uint64_t>(n, kMaxHeaderSize) + 8;
  HeaderSax sax;
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(p + 8, p + 8 + n, &sax, nlohmann::json::input_format_t::json, true);
  } catch (const nlohmann::json::exception&) {
    ok = false;
  }
  uint64_t end = 0;
  if (ok && sax.error.empty())
    for (const Entry& e : sax.entries) end = std::max(end, e.end);
  return end > ~uint64_t{0} - 8 - n ? ~uint64_t{0} : 8 + n + end;  // saturated: refused as over the cap
}

std::unique_ptr<SnapshotReader> open_safetensors(std::shared_ptr<const InputFile> file) {
  return std::make_unique<SafetensorsReader>(std::move(file));
}

}  // namespace gradcodec::formats
