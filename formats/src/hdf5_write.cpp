// SPDX-License-Identifier: BSD-3-Clause
// HDF5 writer: create_hdf5 and Hdf5Writer, and DescrParser, which turns a non-float tensor's numpy
// descr into the HDF5 type its dataset stores. The lock, errors and handles are in
// hdf5_common.hpp, the float/bool/complex/integer types in hdf5_types.hpp.
//
// Decisions (to be copied into docs/ by whoever owns them):
// - Writer: contiguous datasets, '.' (and '/') in tensor names become nested groups, names that
//   would be both a group and a dataset are refused (Usage) naming both tensors. Floats are written
//   with their own type as memory type after an explicit byte swap for big-endian, so every bit
//   (NaN payloads) is kept; f16 is h5py's float16 type. The writer stores bf16 as the custom 2-byte
//   float the reader knows (hdf5_read.cpp: fields 15,7,8,0,7, bias 127). h5py 3.7 has no bfloat16:
//   it reports such a dataset as float32 (in the stored byte order) and converts the values exactly
//   (checked by the tests); take_warnings() says so.
//   Other dtypes map back from the descr: ints, "|b1" (h5py's bool enum), "<c8"/"<c16" (h5py's
//   complex), "|S<n>", "|V<n>", list-descr compounds (stored with the member byte orders given);
//   anything else is refused (Usage) naming the tensor and the descr.
#include "readers.hpp"

#include "hdf5_attrs.hpp"
#include "hdf5_common.hpp"
#include "hdf5_types.hpp"

#include <gradcodec/error.hpp>

#include <hdf5.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gradcodec::formats {

using namespace h5;

namespace {

// A numpy descr parsed into the HDF5 type the dataset stores. The tensor's bytes are written with
// that same type as memory type (no HDF5 conversion, so every bit is kept): for atomic types whose
// stored byte order differs from the tensor's, the writer byte-swaps a copy first (swap).
// Compounds are stored with the member byte orders their descr gives.
struct WriteType {
  Hid file;
  size_t item_size = 0;
  bool swap = false;     // the tensor's bytes must be byte-swapped by swap_unit before writing
  size_t swap_unit = 1;
};

struct DescrError {
  std::string what;
};

// Parser of numpy descr text: "<i4", "|b1", "|S5", "[('a', '<i4'), ('b', '<f8', (3,))]".
class DescrParser {
 public:
  explicit DescrParser(const std::string& s) : s_(s) {}

  // A whole descr; `big_endian` asks for a big-endian file type for atomic types.
  WriteType top(bool big_endian) {
    skip();
    WriteType w;
    if (peek() == '[') {
      w.file = compound(0);  // stored as described (member orders as given)
    } else {
      Leaf l = leaf(trimmed(s_));
      bool target_be = l.order == '>' || (big_endian && l.order != '|');
      w.file = leaf_type(l, target_be);
      w.swap = l.unit > 1 && ((l.order == '>') != target_be);
      w.swap_unit = l.unit;
      pos_ = s_.size();
    }
    skip();
    if (pos_ != s_.size()) throw DescrError{"unexpected text after the descr"};
    w.item_size = H5Tget_size(w.file.get());
    return w;
  }

 private:
  struct Leaf {
    char order = '<';  // '<', '>' or '|'
    char kind = 0;
    size_t size = 0;
    size_t unit = 1;  // byte-swap unit
  };

  static Leaf leaf(const std::string& t) {
    Leaf l;
    size_t i = 0;
    if (i < t.size() && (t[i] == '<' || t[i] == '>' || t[i] == '|' || t[i] == '=')) {
      l.order = t[i] == '=' ? '<' : t[i];
      ++i;
    }
    if (i >= t.size()) throw DescrError{"empty type"};
    l.kind = t[i++];
    if (i >= t.size() || t.size() - i > 9) throw DescrError{"no size"};
    for (; i < t.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(t[i]))) throw DescrError{"bad size"};
      l.size = l.size * 10 + static_cast<size_t>(t[i] - '0');
    }
    switch (l.kind) {
      case 'i':
      case 'u':
        if (l.size != 1 && l.size != 2 && l.size != 4 && l.size != 8) throw DescrError{"unsupported integer size"};
        l.unit = l.size;
        break;
      case 'b':
        if (l.size != 1) throw DescrError{"unsupported bool size"};
        break;
      case 'f':
        // 16 bytes: numpy's longdouble where long double has 16 bytes (x86-64's 80-bit extended
        // precision), as the reader maps every 16-byte HDF5 float to it (hdf5_types.cpp).
        if (l.size != 2 && l.size != 4 && l.size != 8 && !(l.size == 16 && sizeof(long double) == 16))
          throw DescrError{"unsupported float size"};
        l.unit = l.size;
        break;
      case 'c':
        if (l.size != 8 && l.size != 16) throw DescrError{"unsupported complex size"};
        l.unit = l.size / 2;
        break;
      case 'S':
      case 'V':
        if (l.size == 0) throw DescrError{"zero-size type"};
        break;
      default: throw DescrError{"no HDF5 equivalent"};
    }
    if (l.size == 1 || l.kind == 'S' || l.kind == 'V' || l.kind == 'b') l.order = '|';
    return l;
  }

  static Hid leaf_type(const Leaf& l, bool be) {
    switch (l.kind) {
      case 'i':
      case 'u': return copy_type(std_integer(l.size, l.kind == 'i', be));
      case 'b': return make_bool();
      case 'f': {
        if (l.size != 16) return make_float(l.size == 2 ? DType::F16 : l.size == 4 ? DType::F32 : DType::F64, be);
        Hid t = copy_type(H5T_NATIVE_LDOUBLE);
        if (H5Tset_order(t.get(), be ? H5T_ORDER_BE : H5T_ORDER_LE) < 0) type_fail("cannot build a long double datatype");
        return t;
      }
      case 'c': return make_complex(l.size, be);
      case 'S': {
        Hid t = copy_type(H5T_C_S1);
        if (H5Tset_size(t.get(), l.size) < 0 || H5Tset_strpad(t.get(), H5T_STR_NULLPAD) < 0)
          type_fail("cannot build a string datatype");
        return t;
      }
      case 'V': {
        Hid t(H5Tcreate(H5T_OPAQUE, l.size), H5Tclose);
        if (!t.valid()) type_fail("cannot build an opaque datatype");
        return t;
      }
      default: throw DescrError{"no HDF5 equivalent"};
    }
  }

  static std::string trimmed(const std::string& t) {
    size_t a = 0, b = t.size();
    while (a < b && std::isspace(static_cast<unsigned char>(t[a]))) ++a;
    while (b > a && std::isspace(static_cast<unsigned char>(t[b - 1]))) --b;
    return t.substr(a, b - a);
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  void expect(char c) {
    skip();
    if (peek() != c) throw DescrError{std::string("expected '") + c + "'"};
    ++pos_;
  }
  std::string string_literal() {
    skip();
    char q = peek();
    if (q != '\'' && q != '"') throw DescrError{"expected a quoted string"};
    ++pos_;
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != q) {
      if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) ++pos_;
      out += s_[pos_++];
    }
    if (pos_ >= s_.size()) throw DescrError{"unterminated string"};
    ++pos_;
    return out;
  }
  uint64_t integer() {
    skip();
    uint64_t v = 0;
    size_t start = pos_;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      if (v > (uint64_t{1} << 40)) throw DescrError{"dimension too large"};
      v = v * 10 + static_cast<uint64_t>(s_[pos_++] - '0');
    }
    if (pos_ == start) throw DescrError{"expected a number"};
    return v;
  }

  Hid compound(int depth) {
    if (depth > 16) throw DescrError{"nested too deeply"};
    expect('[');
    std::vector<std::pair<std::string, Hid>> members;
    std::set<std::string> seen;
    for (;;) {
      skip();
      if (peek() == ']') break;
      expect('(');
      std::string name = string_literal();
      if (!seen.insert(name).second) throw DescrError{"duplicate field '" + name + "'"};
      expect(',');
      skip();
      Hid t;
      if (peek() == '[') {
        t = compound(depth + 1);
      } else {
        Leaf l = leaf(string_literal());
        t = leaf_type(l, l.order == '>');
      }
      skip();
      if (peek() == ',') {
        ++pos_;
        skip();
        if (peek() == '(') {
          ++pos_;
          std::vector<hsize_t> dims;
          for (;;) {
            skip();
            if (peek() == ')') break;
            dims.push_back(integer());
            skip();
            if (peek() == ',') ++pos_;
            else if (peek() != ')') throw DescrError{"bad subarray shape"};
          }
          ++pos_;
          if (dims.empty() || dims.size() > H5S_MAX_RANK) throw DescrError{"bad subarray shape"};
          for (auto dd : dims)
            if (dd == 0) throw DescrError{"empty subarray"};
          Hid a(H5Tarray_create2(t.get(), static_cast<unsigned>(dims.size()), dims.data()), H5Tclose);
          if (!a.valid()) type_fail("cannot build an array datatype");
          t = std::move(a);
        }
      }
      expect(')');
      members.emplace_back(std::move(name), std::move(t));
      skip();
      if (peek() == ',') ++pos_;
      else if (peek() != ']') throw DescrError{"expected ',' or ']'"};
    }
    ++pos_;
    if (members.empty()) throw DescrError{"empty compound"};
    size_t total = 0;
    for (const auto& m : members) total += H5Tget_size(m.second.get());
    Hid c(H5Tcreate(H5T_COMPOUND, total), H5Tclose);
    if (!c.valid()) type_fail("cannot build a compound datatype");
    size_t off = 0;
    for (const auto& [name, t] : members) {
      if (H5Tinsert(c.get(), name.c_str(), off, t.get()) < 0) type_fail("cannot build a compound datatype");
      off += H5Tget_size(t.get());
    }
    return c;
  }

  const std::string& s_;
  size_t pos_ = 0;
};

std::vector<std::string> split_name(const std::string& name) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : name) {
    if (c == '.' || c == '/') {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  return parts;
}

class Hdf5Writer final : public SnapshotWriter {
 public:
  Hdf5Writer(std::string path, std::unique_ptr<AtomicOutput> out, Hid fid, Hid lcpl)
      : path_(std::move(path)), out_(std::move(out)), fid_(std::move(fid)), lcpl_(std::move(lcpl)) {}

  ~Hdf5Writer() override {
    {
      H5Lock lock;
      lcpl_.close();
      fid_.close();
    }
    out_.reset();  // removes the temporary unless committed
  }

  void add(const Tensor& t) override {
    if (finished_) fail(ErrorCode::Internal, path_ + ": add() after finish()");
    const std::string& name = t.name();
    auto usage = [&](const std::string& what) -> Error {
      return Error(ErrorCode::Usage, path_ + ": tensor '" + printable(name) + "': " + what);
    };
    // Name → HDF5 path, refusing names that HDF5 cannot hold or that collide. A name that does
    // not split into non-empty parts ('.hidden', 'a..b', 'x.') and has no '/' is one dataset
    // of that name in the root group: the reader gives it back as it was.
    if (name.find('\0') != std::string::npos)  // HDF5 link names end at a NUL: it would be cut there
      throw usage("name holds a NUL byte, which an HDF5 name cannot");
    std::vector<std::string> parts = split_name(name);
    const bool empty_part = std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); });
    if (empty_part && name.find('/') == std::string::npos && name != "." && name != "..") parts = {name};
    for (const auto& p : parts)
      if (p.empty() || p == "." || p == "..")
        throw usage("name has an empty component (cannot become an HDF5 path)");
    std::string h5path;
    std::vector<std::string> prefixes;
    for (size_t k = 0; k < parts.size(); ++k) {
      h5path += "/" + parts[k];
      if (k + 1 < parts.size()) prefixes.push_back(h5path);
    }
    for (const auto& g : prefixes) {
      auto it = datasets_.find(g);
      if (it != datasets_.end())
        throw usage("conflicts with tensor '" + printable(it->second) + "': " + printable(g) +
                    " would have to be both a dataset and a group");
    }
    if (auto it = datasets_.find(h5path); it != datasets_.end())
      throw usage(it->second == name ? std::string("duplicate tensor name")
                                     : "conflicts with tensor '" + printable(it->second) + "': both map to " +
                                           printable(h5path));
    if (auto it = groups_.find(h5path); it != groups_.end())
      throw usage("conflicts with tensor '" + printable(it->second) + "': " + printable(h5path) +
                  " would have to be both a dataset and a group");
    if (t.shape().size() > H5S_MAX_RANK) throw usage("rank " + std::to_string(t.shape().size()) + " exceeds HDF5's 32");
    std::optional<uint64_t> elements = checked_elements(t.shape());
    if (!elements) throw usage("shape " + shape_string(t.shape()) + " has too many elements");

    H5Lock lock;
    WriteType wt;
    try {
      if (is_float(t.dtype())) {
        wt.file = make_float(t.dtype(), t.info.big_endian);
        wt.item_size = dtype_size(t.dtype());
        wt.swap = t.info.big_endian;
        wt.swap_unit = wt.item_size;
      } else {
        try {
          wt = DescrParser(t.info.descr).top(t.info.big_endian);
        } catch (const DescrError& d) {
          throw usage("dtype '" + printable(t.info.descr) + "' cannot be stored in HDF5 (" + d.what + ")");
        }
      }
    } catch (const TypeFailure& f) {
      fail(ErrorCode::Internal, path_ + ": tensor '" + printable(name) + "': " + f.what);
    }
    uint64_t n = *elements;
    if (n > std::numeric_limits<uint64_t>::max() / std::max<size_t>(wt.item_size, 1) ||
        n * wt.item_size != t.data.size())
      fail(ErrorCode::Internal, path_ + ": tensor '" + printable(name) + "': data has " + std::to_string(t.data.size()) +
                                    " bytes, its shape and dtype need " + std::to_string(n * wt.item_size));

    auto h5fail = [&](const std::string& what) {
      fail(ErrorCode::Input, path_ + ": dataset " + printable(h5path) + ": " + with_detail(what));
    };
    Hid space;
    if (t.shape().empty()) {
      space = space_hid(H5Screate(H5S_SCALAR));
    } else {
      std::vector<hsize_t> dims(t.shape().begin(), t.shape().end());
      space = space_hid(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
    }
    if (!space.valid()) h5fail("cannot create the dataspace");
    // No creation and modification times in the object header: the same tensors give the same
    // file bytes whenever they are written.
    Hid dcpl = plist_hid(H5Pcreate(H5P_DATASET_CREATE));
    if (!dcpl.valid() || H5Pset_obj_track_times(dcpl.get(), false) < 0) h5fail("cannot set the dataset's properties");
    Hid ds = dataset_hid(H5Dcreate2(fid_.get(), h5path.c_str(), wt.file.get(), space.get(), lcpl_.get(),
                                    dcpl.get(), H5P_DEFAULT));
    if (!ds.valid()) h5fail("cannot create the dataset");
    if (n > 0) {
      const uint8_t* src = t.data.data();
      std::vector<uint8_t> swapped;
      if (wt.swap && wt.swap_unit > 1) {
        swapped.assign(src, src + t.data.size());
        byte_swap(swapped.data(), swapped.size(), wt.swap_unit);
        src = swapped.data();
      }
      if (H5Dwrite(ds.get(), wt.file.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, src) < 0) h5fail("cannot write");
    }
    if (ds.close() < 0) h5fail("cannot close");
    datasets_.emplace(h5path, name);
    for (const auto& g : prefixes) groups_.emplace(g, name);
    if (t.dtype() == DType::BF16) {
      if (bf16_count_++ == 0) first_bf16_ = name;
    }
  }

  bool set_attributes_json(const std::string& json) override {
    attrs_ = json;
    return true;
  }

  void complete() override {
    if (finished_) return;
    {
      H5Lock lock;
      if (!attrs_.empty()) {
        std::map<std::string, std::string> tensor_paths;  // tensor name → HDF5 path
        for (const auto& [h5path, tensor] : datasets_) tensor_paths.emplace(tensor, h5path);
        for (auto& w : write_attributes(fid_.get(), lcpl_.get(), attrs_, tensor_paths)) attr_warnings_.push_back(std::move(w));
      }
      lcpl_.close();
      if (fid_.close() < 0) fail(ErrorCode::Input, path_ + ": " + with_detail("cannot complete the HDF5 file"));
    }
    out_->seal();
    finished_ = true;
  }
  void publish() override {
    if (!finished_) fail(ErrorCode::Internal, path_ + ": publish() before complete()");
    out_->publish();
  }

  std::vector<std::string> take_warnings() override {
    std::vector<std::string> w = std::move(attr_warnings_);
    attr_warnings_.clear();
    if (bf16_count_ > 0) {
      w.push_back(std::to_string(bf16_count_) + " bf16 tensor(s) (first: '" + first_bf16_ +
                  "') stored as a custom 2-byte HDF5 float (bfloat16 layout); h5py reads them as float32, "
                  "with exact values");
      bf16_count_ = 0;
    }
    return w;
  }

 private:
  std::string path_;
  std::unique_ptr<AtomicOutput> out_;
  Hid fid_;
  Hid lcpl_;
  std::map<std::string, std::string> datasets_;  // HDF5 path → tensor name
  std::map<std::string, std::string> groups_;    // HDF5 group path → first tensor that needed it
  size_t bf16_count_ = 0;
  std::string first_bf16_;
  std::string attrs_;                        // HDF5 attributes to write (hdf5_attrs.hpp), or ""
  std::vector<std::string> attr_warnings_;   // what of them could not be written
  bool finished_ = false;
};

}  // namespace

std::unique_ptr<SnapshotWriter> create_hdf5(const std::string& path, bool overwrite) {
  if (path == "-") fail(ErrorCode::Usage, "HDF5 cannot be written to standard output (use .npz)");
  auto out = std::make_unique<AtomicOutput>(path, overwrite);
  out->release_handle();
  H5Lock lock;
  Hid fapl = plist_hid(H5Pcreate(H5P_FILE_ACCESS));
  if (!fapl.valid() || !relax_file_locking(fapl.get()))
    fail(ErrorCode::Input, path + ": " + with_detail("cannot set up HDF5"));
  Hid fid = file_hid(H5Fcreate(out->temp_path().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()));
  if (!fid.valid()) fail(ErrorCode::Input, path + ": " + with_detail("cannot create the HDF5 file"));
  Hid lcpl = plist_hid(H5Pcreate(H5P_LINK_CREATE));
  if (!lcpl.valid() || H5Pset_create_intermediate_group(lcpl.get(), 1) < 0)
    fail(ErrorCode::Input, path + ": " + with_detail("cannot set up HDF5"));
  return std::make_unique<Hdf5Writer>(path, std::move(out), std::move(fid), std::move(lcpl));
}

}  // namespace gradcodec::formats
