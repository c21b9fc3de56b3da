// HDF5 reader and writer (HDF5 C API, 1.10.x; 1.12+ handled where the object-visit API differs).
//
// Threading: the HDF5 library found on Debian is built without its thread-safety option, so every
// HDF5 call of the whole process must be serialized. This module does that with one global mutex
// (h5_mutex()): every entry point below (open_hdf5, Reader::read, the reader's destructor,
// create_hdf5, Writer::add/finish and the writer's destructor) holds it for as long as it calls
// HDF5 or owns an HDF5 handle. Nothing else in gradcodec may call HDF5 without taking it.
//
// Errors: HDF5's automatic error printing is switched off whenever the lock is taken; a failed
// call is turned into gradcodec::Error whose one-line message names the file, the dataset when
// there is one, and the most specific description found on HDF5's error stack. Every handle is
// owned by an RAII wrapper (Hid), so each one is closed on every path.
//
// Decisions (to be copied into docs/ by whoever owns them):
// - Datasets are listed with H5Ovisit by name, ascending, depth first: the order h5py's
//   visititems() shows. A dataset reachable through several hard links is listed once; soft and
//   external links are not followed. A dataset "a/b/c" becomes tensor "a.b.c".
// - A dataset with an H5S_NULL dataspace (h5py.Empty) is read as an empty 1-d array, shape [0].
// - Floats: IEEE f16 (h5py's float16: 2 bytes, fields 15,10,5,0,10, bias 15), bfloat16 (2 bytes,
//   fields 15,7,8,0,7, bias 127), f32, f64, little- or big-endian. Their bytes are read exactly as
//   stored (no HDF5 conversion, so NaN payloads survive) and byte-swapped here when big-endian;
//   TensorInfo::big_endian records that. Everything else is DType::Other with a numpy descr.
// - Non-float datasets are DType::Other with numpy's descr, data converted to numpy's packed
//   little-endian layout: ints "<i8", h5py's bool enum "|b1", h5py's complex {r,i} "<c8"/"<c16",
//   fixed strings "|S5", opaque "|V3", other enums as their base integer, compounds as a list descr
//   "[('a', '<i4'), ('b', '<f8', (3,))]", HDF5 array types as extra trailing dims (as h5py does).
//   Variable-length data, references, bf16 inside compounds and unusual floats are listed (descr
//   "|O" or "|V<n>") but read() throws naming the dataset. So do datasets whose data lives in other
//   files (external storage, virtual datasets: never opened) and those needing a filter this
//   libhdf5 lacks (h5py's lzf, blosc, ...).
// - Two datasets whose names map to the same tensor name ("a.b" and "a/b") make open() fail.
// - Sizes are checked before anything is allocated: every datatype is validated (compound members
//   inside the compound, array dims matching the size, sane float fields); contiguous data must
//   lie inside the file; unallocated data (fill values) may not exceed 64 MiB; chunked/compact
//   data may not exceed max(64 MiB, 1100 x the file size) (deflate's best ratio is ~1032:1).
// - Known limit: libhdf5 1.10.8 itself can still crash on some hostile metadata (a few in 10^3
//   randomly corrupted files, inside H5Dopen/B-tree decoding, before this code sees any value).
// - Writer: contiguous datasets, '.' (and '/') in tensor names become nested groups, names that
//   would be both a group and a dataset are refused (Usage) naming both tensors. Floats are written
//   with their own type as memory type after an explicit byte swap for big-endian, so every bit
//   (NaN payloads) is kept; f16 is h5py's float16 type. The writer stores bf16 as the custom 2-byte
//   float above. h5py 3.7 has no bfloat16: it reports such a dataset as float32 (in the stored byte
//   order) and converts the values exactly (checked by the tests); take_warnings() says so.
//   Other dtypes map back from the descr: ints, "|b1" (h5py's bool enum), "<c8"/"<c16" (h5py's
//   complex), "|S<n>", "|V<n>", list-descr compounds (stored with the member byte orders given);
//   anything else is refused (Usage) naming the tensor and the descr.
#include "readers.hpp"

#include <gradcodec/error.hpp>

#include <hdf5.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

namespace gradcodec::formats {

namespace {

// ---------------------------------------------------------------------------------------------
// Serialization and error handling
// ---------------------------------------------------------------------------------------------

std::mutex& h5_mutex() {
  static std::mutex m;
  return m;
}

// Holds the module lock and keeps HDF5 from printing while it is held.
class H5Lock {
 public:
  H5Lock() : guard_(h5_mutex()) { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

 private:
  std::lock_guard<std::mutex> guard_;
};

struct StackSummary {
  std::string first;  // the most specific description
  bool fletcher = false;
};

herr_t walk_error(unsigned, const H5E_error2_t* e, void* data) noexcept {
  auto* s = static_cast<StackSummary*>(data);
  try {
    if (e && e->desc && *e->desc) {
      std::string d = e->desc;
      if (s->first.empty()) s->first = d;
      std::string low = d;
      std::transform(low.begin(), low.end(), low.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (low.find("fletcher32") != std::string::npos) s->fletcher = true;
    }
  } catch (...) {
  }
  return 0;
}

// Reads and clears HDF5's error stack (call right after the failed HDF5 call).
StackSummary take_stack() {
  StackSummary s;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_error, &s);
  H5Eclear2(H5E_DEFAULT);
  return s;
}

// "what (HDF5: detail)"; a Fletcher32 failure becomes "checksum mismatch".
std::string with_detail(const std::string& what) {
  StackSummary s = take_stack();
  if (s.fletcher) return "checksum mismatch (Fletcher32)";
  if (s.first.empty()) return what;
  return what + " (HDF5: " + s.first + ")";
}

// ---------------------------------------------------------------------------------------------
// Handles
// ---------------------------------------------------------------------------------------------

class Hid {
 public:
  using Closer = herr_t (*)(hid_t);
  Hid() = default;
  Hid(hid_t id, Closer c) : id_(id), close_(c) {}
  Hid(const Hid&) = delete;
  Hid& operator=(const Hid&) = delete;
  Hid(Hid&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = H5I_INVALID_HID; }
  Hid& operator=(Hid&& o) noexcept {
    if (this != &o) {
      close();
      id_ = o.id_;
      close_ = o.close_;
      o.id_ = H5I_INVALID_HID;
    }
    return *this;
  }
  ~Hid() { close(); }

  hid_t get() const noexcept { return id_; }
  bool valid() const noexcept { return id_ >= 0; }
  // Closes now; returns HDF5's status (negative on failure, e.g. a failed flush of a file).
  herr_t close() noexcept {
    herr_t r = 0;
    if (id_ >= 0 && close_) r = close_(id_);
    id_ = H5I_INVALID_HID;
    return r;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer close_ = nullptr;
};

Hid type_hid(hid_t id) { return Hid(id, H5Tclose); }
Hid space_hid(hid_t id) { return Hid(id, H5Sclose); }
Hid plist_hid(hid_t id) { return Hid(id, H5Pclose); }
Hid dataset_hid(hid_t id) { return Hid(id, H5Dclose); }
Hid file_hid(hid_t id) { return Hid(id, H5Fclose); }

// A failure while inspecting a type: caught by the callers and turned into a message that names
// the file and the dataset.
struct TypeFailure {
  std::string what;
};

[[noreturn]] void type_fail(const std::string& what) { throw TypeFailure{with_detail(what)}; }

Hid copy_type(hid_t t) {
  hid_t c = H5Tcopy(t);
  if (c < 0) type_fail("cannot copy a datatype");
  return type_hid(c);
}

// Dataset names come from the file: keep error messages on one line whatever they contain.
std::string printable(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return out;
}

// Element count of a shape, or nullopt beyond 2^62 (the limit shape_elements() enforces).
std::optional<uint64_t> checked_elements(const std::vector<uint64_t>& shape) {
  uint64_t n = 1;
  for (uint64_t d : shape) {
    if (d != 0 && n > (uint64_t{1} << 62) / d) return std::nullopt;
    n *= d;
  }
  return n;
}

void byte_swap(uint8_t* data, size_t bytes, size_t unit) {
  if (unit <= 1) return;
  for (size_t i = 0; i + unit <= bytes; i += unit) std::reverse(data + i, data + i + unit);
}

// ---------------------------------------------------------------------------------------------
// Datatype mapping: HDF5 types ↔ gradcodec dtypes and numpy descrs
// ---------------------------------------------------------------------------------------------

struct FloatLayout {
  size_t size, spos, epos, esize, mpos, msize, ebias;
};
constexpr FloatLayout kF16{2, 15, 10, 5, 0, 10, 15};
constexpr FloatLayout kBF16{2, 15, 7, 8, 0, 7, 127};
constexpr FloatLayout kF32{4, 31, 23, 8, 0, 23, 127};
constexpr FloatLayout kF64{8, 63, 52, 11, 0, 52, 1023};

// The dtype of an H5T_FLOAT type when it is one of the four gradient layouts (any byte order
// LE/BE); nullopt otherwise.
std::optional<DType> float_dtype(hid_t t) {
  if (H5Tget_class(t) != H5T_FLOAT) return std::nullopt;
  H5T_order_t order = H5Tget_order(t);
  if (order != H5T_ORDER_LE && order != H5T_ORDER_BE) return std::nullopt;
  size_t size = H5Tget_size(t);
  size_t prec = H5Tget_precision(t);
  int off = H5Tget_offset(t);
  size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
  if (H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize) < 0) {
    H5Eclear2(H5E_DEFAULT);
    return std::nullopt;
  }
  size_t ebias = H5Tget_ebias(t);
  if (H5Tget_norm(t) != H5T_NORM_IMPLIED || off != 0 || prec != size * 8) return std::nullopt;
  auto is = [&](const FloatLayout& l) {
    return size == l.size && spos == l.spos && epos == l.epos && esize == l.esize &&
           mpos == l.mpos && msize == l.msize && ebias == l.ebias;
  };
  if (is(kF16)) return DType::F16;
  if (is(kBF16)) return DType::BF16;
  if (is(kF32)) return DType::F32;
  if (is(kF64)) return DType::F64;
  return std::nullopt;
}

bool is_big_endian(hid_t t) { return H5Tget_order(t) == H5T_ORDER_BE; }

// A 2-byte float type built the way h5py builds float16: a copy of IEEE f32 with new fields.
Hid make_small_float(const FloatLayout& l, bool big_endian) {
  Hid t = copy_type(H5T_IEEE_F32LE);
  if (H5Tset_fields(t.get(), l.spos, l.epos, l.esize, l.mpos, l.msize) < 0 ||
      H5Tset_size(t.get(), l.size) < 0 || H5Tset_ebias(t.get(), l.ebias) < 0 ||
      (big_endian && H5Tset_order(t.get(), H5T_ORDER_BE) < 0))
    type_fail("cannot build a 2-byte float datatype");
  return t;
}

Hid make_float(DType d, bool big_endian) {
  switch (d) {
    case DType::F16: return make_small_float(kF16, big_endian);
    case DType::BF16: return make_small_float(kBF16, big_endian);
    case DType::F32: return copy_type(big_endian ? H5T_IEEE_F32BE : H5T_IEEE_F32LE);
    case DType::F64: return copy_type(big_endian ? H5T_IEEE_F64BE : H5T_IEEE_F64LE);
    case DType::Other: break;
  }
  type_fail("not a floating dtype");
}

hid_t std_integer(size_t size, bool is_signed, bool big_endian) {
  switch (size) {
    case 1: return is_signed ? (big_endian ? H5T_STD_I8BE : H5T_STD_I8LE) : (big_endian ? H5T_STD_U8BE : H5T_STD_U8LE);
    case 2: return is_signed ? (big_endian ? H5T_STD_I16BE : H5T_STD_I16LE) : (big_endian ? H5T_STD_U16BE : H5T_STD_U16LE);
    case 4: return is_signed ? (big_endian ? H5T_STD_I32BE : H5T_STD_I32LE) : (big_endian ? H5T_STD_U32BE : H5T_STD_U32LE);
    case 8: return is_signed ? (big_endian ? H5T_STD_I64BE : H5T_STD_I64LE) : (big_endian ? H5T_STD_U64BE : H5T_STD_U64LE);
    default: return H5I_INVALID_HID;
  }
}

// h5py's bool: an enum over a native int8 with FALSE = 0 and TRUE = 1.
Hid make_bool() {
  Hid t(H5Tenum_create(H5T_NATIVE_INT8), H5Tclose);
  if (!t.valid()) type_fail("cannot build the bool datatype");
  int8_t f = 0, tr = 1;
  if (H5Tenum_insert(t.get(), "FALSE", &f) < 0 || H5Tenum_insert(t.get(), "TRUE", &tr) < 0)
    type_fail("cannot build the bool datatype");
  return t;
}

// h5py's complex: compound {r, i} of two equal floats.
Hid make_complex(size_t total, bool big_endian) {
  hid_t part = total == 8 ? (big_endian ? H5T_IEEE_F32BE : H5T_IEEE_F32LE)
                          : (big_endian ? H5T_IEEE_F64BE : H5T_IEEE_F64LE);
  Hid t(H5Tcreate(H5T_COMPOUND, total), H5Tclose);
  if (!t.valid() || H5Tinsert(t.get(), "r", 0, part) < 0 || H5Tinsert(t.get(), "i", total / 2, part) < 0)
    type_fail("cannot build the complex datatype");
  return t;
}

std::string member_name(hid_t t, unsigned i) {
  char* n = H5Tget_member_name(t, i);
  if (!n) type_fail("cannot read a member name");
  std::string s(n);
  H5free_memory(n);
  return s;
}

bool is_bool_enum(hid_t t) {
  if (H5Tget_class(t) != H5T_ENUM || H5Tget_size(t) != 1 || H5Tget_nmembers(t) != 2) return false;
  bool seen_false = false, seen_true = false;
  for (unsigned i = 0; i < 2; ++i) {
    int8_t v = 0;
    if (H5Tget_member_value(t, i, &v) < 0) type_fail("cannot read an enum value");
    std::string n = member_name(t, i);
    if (n == "FALSE" && v == 0) seen_false = true;
    if (n == "TRUE" && v == 1) seen_true = true;
  }
  return seen_false && seen_true;
}

// The float member type of a compound that h5py would read as complex, or nullopt.
std::optional<DType> complex_part(hid_t t) {
  if (H5Tget_class(t) != H5T_COMPOUND || H5Tget_nmembers(t) != 2) return std::nullopt;
  size_t size = H5Tget_size(t);
  if (member_name(t, 0) != "r" || member_name(t, 1) != "i") return std::nullopt;
  Hid r = type_hid(H5Tget_member_type(t, 0));
  Hid i = type_hid(H5Tget_member_type(t, 1));
  if (!r.valid() || !i.valid()) type_fail("cannot read a compound member");
  auto dr = float_dtype(r.get());
  auto di = float_dtype(i.get());
  if (!dr || !di || *dr != *di || (*dr != DType::F32 && *dr != DType::F64)) return std::nullopt;
  if (H5Tget_order(r.get()) != H5Tget_order(i.get())) return std::nullopt;
  size_t part = dtype_size(*dr);
  if (size != 2 * part || H5Tget_member_offset(t, 0) != 0 || H5Tget_member_offset(t, 1) != part)
    return std::nullopt;
  return dr;
}

// Python repr of a string (numpy descrs are Python literals).
std::string py_repr(const std::string& s) {
  char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (c == q || c == '\\') out += '\\';
    out += c;
  }
  out += q;
  return out;
}

std::string shape_tuple(const std::vector<uint64_t>& dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  if (dims.size() == 1) s += ",";
  return s + ")";
}

std::string int_descr(size_t size, bool is_signed) {
  return std::string(size == 1 ? "|" : "<") + (is_signed ? "i" : "u") + std::to_string(size);
}

constexpr const char* kVlenWhy = "variable-length data cannot be passed through";

// What an HDF5 datatype is for numpy, and a little-endian packed memory type that HDF5 can
// convert the stored elements into.
struct Desc {
  std::string descr;           // numpy descr of one element (of the base, for an array type)
  std::vector<uint64_t> sub;   // numpy subarray shape (HDF5 array type dims), else empty
  Hid mem;                     // memory type (valid when why is empty)
  std::string why;             // non-empty: the bytes cannot be represented
  bool big_endian = false;     // the stored element (or its parts) is big-endian
};

Desc describe(hid_t t, int depth = 0) {
  if (depth > 16) type_fail("datatype nested too deeply");
  Desc d;
  size_t size = H5Tget_size(t);
  H5T_class_t cls = H5Tget_class(t);
  switch (cls) {
    case H5T_INTEGER: {
      bool sgn = H5Tget_sign(t) == H5T_SGN_2;
      d.big_endian = is_big_endian(t) && size > 1;
      hid_t std = std_integer(size, sgn, false);
      if (std < 0) {
        d.descr = "|V" + std::to_string(size);
        d.why = "integers of " + std::to_string(size) + " bytes have no numpy type";
        break;
      }
      d.descr = int_descr(size, sgn);
      d.mem = copy_type(std);
      break;
    }
    case H5T_FLOAT: {
      d.big_endian = is_big_endian(t);
      auto f = float_dtype(t);
      if (f && *f != DType::BF16) {
        d.descr = "<f" + std::to_string(dtype_size(*f));
        d.mem = make_float(*f, false);
      } else if (!f && size == 16 && sizeof(long double) == 16) {
        d.descr = "<f16";  // numpy's longdouble on x86-64
        d.mem = copy_type(H5T_NATIVE_LDOUBLE);
      } else {
        d.descr = "|V" + std::to_string(size);
        d.why = f ? "bfloat16 inside a compound or array has no numpy type"
                  : "unsupported floating-point layout";
      }
      break;
    }
    case H5T_ENUM: {
      if (is_bool_enum(t)) {
        d.descr = "|b1";
        d.mem = make_bool();
        break;
      }
      Hid base = type_hid(H5Tget_super(t));
      if (!base.valid()) type_fail("cannot read an enum's base type");
      Desc b = describe(base.get(), depth + 1);
      d.descr = b.descr;
      d.big_endian = b.big_endian;
      if (!b.why.empty()) {
        d.why = b.why;
        break;
      }
      // A little-endian copy of the enum: the order must be set before members are inserted.
      Hid e(H5Tenum_create(b.mem.get()), H5Tclose);
      if (!e.valid()) type_fail("cannot build an enum datatype");
      int n = H5Tget_nmembers(t);
      std::vector<uint8_t> value(size);
      for (int i = 0; i < n; ++i) {
        if (H5Tget_member_value(t, static_cast<unsigned>(i), value.data()) < 0)
          type_fail("cannot read an enum value");
        if (b.big_endian) std::reverse(value.begin(), value.end());
        std::string name = member_name(t, static_cast<unsigned>(i));
        if (H5Tenum_insert(e.get(), name.c_str(), value.data()) < 0) type_fail("cannot build an enum datatype");
      }
      d.mem = std::move(e);
      break;
    }
    case H5T_COMPOUND: {
      if (auto part = complex_part(t)) {
        Hid r = type_hid(H5Tget_member_type(t, 0));
        d.big_endian = is_big_endian(r.get());
        d.descr = "<c" + std::to_string(size);
        d.mem = make_complex(size, false);
        break;
      }
      int n = H5Tget_nmembers(t);
      if (n <= 0) {
        d.descr = "|V" + std::to_string(size);
        d.why = "empty compound type";
        break;
      }
      std::vector<std::pair<std::string, Desc>> members;
      size_t total = 0;
      for (int i = 0; i < n; ++i) {
        Hid mt = type_hid(H5Tget_member_type(t, static_cast<unsigned>(i)));
        if (!mt.valid()) type_fail("cannot read a compound member");
        Desc md = describe(mt.get(), depth + 1);
        if (md.why.empty()) total += H5Tget_size(md.mem.get());
        else if (d.why.empty()) d.why = md.why;
        members.emplace_back(member_name(t, static_cast<unsigned>(i)), std::move(md));
      }
      d.descr = "[";
      for (size_t i = 0; i < members.size(); ++i) {
        const auto& [name, md] = members[i];
        if (i) d.descr += ", ";
        d.descr += "(" + py_repr(name) + ", " + (md.descr.starts_with("[") ? md.descr : py_repr(md.descr));
        if (!md.sub.empty()) d.descr += ", " + shape_tuple(md.sub);
        d.descr += ")";
      }
      d.descr += "]";
      if (!d.why.empty()) break;
      Hid c(H5Tcreate(H5T_COMPOUND, total), H5Tclose);
      if (!c.valid()) type_fail("cannot build a compound datatype");
      size_t off = 0;
      for (const auto& [name, md] : members) {
        if (H5Tinsert(c.get(), name.c_str(), off, md.mem.get()) < 0) type_fail("cannot build a compound datatype");
        off += H5Tget_size(md.mem.get());
      }
      d.mem = std::move(c);
      break;
    }
    case H5T_STRING: {
      htri_t var = H5Tis_variable_str(t);
      if (var < 0) type_fail("cannot inspect a string type");
      if (var > 0) {
        d.descr = "|O";
        d.why = kVlenWhy;
        break;
      }
      d.descr = "|S" + std::to_string(size);
      d.mem = copy_type(t);
      break;
    }
    case H5T_OPAQUE:
      d.descr = "|V" + std::to_string(size);
      d.mem = copy_type(t);
      break;
    case H5T_BITFIELD: {
      d.big_endian = is_big_endian(t) && size > 1;
      d.descr = int_descr(size, false);
      if (size != 1 && size != 2 && size != 4 && size != 8) {
        d.descr = "|V" + std::to_string(size);
        d.why = "bitfields of " + std::to_string(size) + " bytes have no numpy type";
        break;
      }
      d.mem = copy_type(t);
      if (H5Tset_order(d.mem.get(), H5T_ORDER_LE) < 0) type_fail("cannot build a bitfield datatype");
      break;
    }
    case H5T_ARRAY: {
      int nd = H5Tget_array_ndims(t);
      if (nd < 0 || nd > H5S_MAX_RANK) type_fail("cannot read an array type's rank");
      std::vector<hsize_t> dims(static_cast<size_t>(nd));
      if (nd > 0 && H5Tget_array_dims2(t, dims.data()) < 0) type_fail("cannot read an array type's dims");
      Hid base = type_hid(H5Tget_super(t));
      if (!base.valid()) type_fail("cannot read an array's base type");
      Desc b = describe(base.get(), depth + 1);
      d.descr = b.descr;
      d.why = b.why;
      d.big_endian = b.big_endian;
      d.sub.assign(dims.begin(), dims.end());
      d.sub.insert(d.sub.end(), b.sub.begin(), b.sub.end());
      if (!d.why.empty()) break;
      Hid a(H5Tarray_create2(b.mem.get(), static_cast<unsigned>(nd), dims.data()), H5Tclose);
      if (!a.valid()) type_fail("cannot build an array datatype");
      d.mem = std::move(a);
      break;
    }
    case H5T_VLEN:
      d.descr = "|O";
      d.why = kVlenWhy;
      break;
    case H5T_REFERENCE:
      d.descr = "|O";
      d.why = "object references cannot be passed through";
      break;
    default:
      d.descr = "|V" + std::to_string(size);
      d.why = "unsupported HDF5 datatype class";
      break;
  }
  return d;
}

// ---------------------------------------------------------------------------------------------
// Reader
// ---------------------------------------------------------------------------------------------

// How read() gets a dataset's bytes.
enum class ReadHow {
  Raw,         // memory type = the file type (no conversion); byte-swap by swap_unit
  Convert,     // HDF5 converts into the packed little-endian memory type of describe()
  Null,        // H5S_NULL: nothing to read
  Unreadable,  // read() throws `why`
};

struct Entry {
  std::string h5path;  // "/layer1/0/conv1/weight"
  TensorInfo info;
  ReadHow how = ReadHow::Raw;
  size_t swap_unit = 1;
  uint64_t item_size = 0;  // bytes per element in memory
  std::string why;
};

// Upper bound for data that has no storage of its own in the file (unallocated fill values,
// chunked datasets whose compressed size says little): never allocate more than this, or more
// than deflate's best ratio (~1032:1) allows for the file's size.
constexpr uint64_t kMaxUnbackedBytes = uint64_t{64} << 20;
constexpr uint64_t kMaxExpansion = 1100;

struct ReadPlan {
  ReadHow how = ReadHow::Raw;
  size_t swap_unit = 1;
  Hid mem;
  uint64_t item_size = 0;
  std::string why;
};

// HDF5 trusts the datatype messages of a file: a corrupt compound (a member beyond the end of the
// structure, say) makes its conversion code copy out of bounds. Every type is checked here first.
bool h5_error_pending() { return H5Eget_num(H5E_DEFAULT) > 0; }

void validate_type(hid_t t, int depth = 0) {
  if (depth > 16) type_fail("datatype nested too deeply");
  size_t size = H5Tget_size(t);
  H5T_class_t cls = H5Tget_class(t);
  if (size == 0 || cls == H5T_NO_CLASS) type_fail("invalid datatype");
  auto bad = [](const std::string& what) { throw TypeFailure{"invalid datatype: " + what}; };
  switch (cls) {
    case H5T_INTEGER:
    case H5T_BITFIELD:
    case H5T_FLOAT: {
      size_t prec = H5Tget_precision(t);
      int off = H5Tget_offset(t);
      if (prec == 0 || off < 0 || prec > size * 8 || static_cast<size_t>(off) > size * 8 - prec)
        bad("precision and offset exceed the size");
      if (cls == H5T_FLOAT) {
        size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
        if (H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize) < 0) type_fail("cannot read float fields");
        if (spos >= prec || esize == 0 || esize > 32 || epos > prec || esize > prec - epos || mpos > prec ||
            msize > prec - mpos)
          bad("float fields exceed the precision");
      }
      break;
    }
    case H5T_COMPOUND: {
      int n = H5Tget_nmembers(t);
      if (n < 0) type_fail("cannot count compound members");
      for (int i = 0; i < n; ++i) {
        unsigned u = static_cast<unsigned>(i);
        size_t off = H5Tget_member_offset(t, u);
        if (h5_error_pending()) type_fail("cannot read a compound member offset");
        Hid mt = type_hid(H5Tget_member_type(t, u));
        if (!mt.valid()) type_fail("cannot read a compound member");
        validate_type(mt.get(), depth + 1);
        size_t msize = H5Tget_size(mt.get());
        if (off > size || msize > size - off) bad("a compound member lies outside the compound");
        char* name = H5Tget_member_name(t, u);
        if (!name) type_fail("cannot read a member name");
        H5free_memory(name);
      }
      break;
    }
    case H5T_ARRAY: {
      int nd = H5Tget_array_ndims(t);
      if (nd <= 0 || nd > H5S_MAX_RANK) bad("array rank out of range");
      std::vector<hsize_t> dims(static_cast<size_t>(nd));
      if (H5Tget_array_dims2(t, dims.data()) < 0) type_fail("cannot read an array type's dims");
      Hid base = type_hid(H5Tget_super(t));
      if (!base.valid()) type_fail("cannot read an array's base type");
      validate_type(base.get(), depth + 1);
      uint64_t total = H5Tget_size(base.get());
      for (hsize_t d : dims) {
        if (d == 0 || total > size / d) bad("array dims do not match its size");
        total *= d;
      }
      if (total != size) bad("array dims do not match its size");
      break;
    }
    case H5T_ENUM: {
      Hid base = type_hid(H5Tget_super(t));
      if (!base.valid()) type_fail("cannot read an enum's base type");
      validate_type(base.get(), depth + 1);
      if (H5Tget_size(base.get()) != size || H5Tget_class(base.get()) != H5T_INTEGER)
        bad("enum base type does not match");
      if (H5Tget_nmembers(t) < 0) type_fail("cannot count enum members");
      break;
    }
    default:
      break;  // strings, opaque: raw bytes; vlen, references, time: never read
  }
}

// Decides how to read elements of file type `ft` and fills dtype/descr/big_endian/extra dims.
ReadPlan plan_read(hid_t ft, TensorInfo& info) {
  ReadPlan p;
  validate_type(ft);
  Desc d = describe(ft);
  info.shape.insert(info.shape.end(), d.sub.begin(), d.sub.end());
  info.big_endian = d.big_endian;
  // The element type under any array dims.
  Hid elem = copy_type(ft);
  while (H5Tget_class(elem.get()) == H5T_ARRAY) {
    elem = type_hid(H5Tget_super(elem.get()));
    if (!elem.valid()) type_fail("cannot read an array's base type");
  }
  hid_t et = elem.get();
  size_t esize = H5Tget_size(et);
  if (auto f = float_dtype(et)) {
    info.dtype = *f;
    info.descr = *f == DType::BF16 ? "" : "<f" + std::to_string(esize);
    p.how = ReadHow::Raw;
    p.swap_unit = info.big_endian ? esize : 1;
  } else {
    info.dtype = DType::Other;
    info.descr = d.descr;
    H5T_class_t cls = H5Tget_class(et);
    bool raw = false;
    if (!d.why.empty()) {
      p.how = ReadHow::Unreadable;
      p.why = d.why;
      return p;
    }
    if (cls == H5T_INTEGER) {
      raw = H5Tget_precision(et) == esize * 8 && H5Tget_offset(et) == 0;
      p.swap_unit = esize;
    } else if (cls == H5T_ENUM) {
      Hid base = type_hid(H5Tget_super(et));
      raw = base.valid() && H5Tget_precision(base.get()) == esize * 8 && H5Tget_offset(base.get()) == 0;
      p.swap_unit = esize;
    } else if (cls == H5T_COMPOUND && complex_part(et)) {
      raw = true;
      p.swap_unit = esize / 2;
    } else if (cls == H5T_STRING || cls == H5T_OPAQUE) {
      raw = true;
      p.swap_unit = 1;
    }
    if (!d.big_endian) p.swap_unit = 1;
    p.how = raw ? ReadHow::Raw : ReadHow::Convert;
  }
  if (p.how == ReadHow::Raw) {
    p.mem = copy_type(ft);
  } else {
    p.mem = std::move(d.mem);
  }
  // The memory type covers the array dims; item_size is per element of the tensor's shape.
  uint64_t sub = 1;
  for (uint64_t k : d.sub) sub *= k;  // HDF5 caps array types far below overflow
  size_t whole = H5Tget_size(p.mem.get());
  if (whole == 0 || sub == 0 || whole % sub != 0) type_fail("inconsistent array datatype");
  p.item_size = whole / sub;
  return p;
}

#if H5_VERSION_GE(1, 12, 0)
using ObjInfo = H5O_info2_t;
#else
using ObjInfo = H5O_info_t;
#endif

struct VisitState {
  std::vector<std::string> datasets;
  bool failed = false;
};

herr_t visit_object(hid_t, const char* name, const ObjInfo* info, void* data) noexcept {
  auto* s = static_cast<VisitState*>(data);
  try {
    if (info && info->type == H5O_TYPE_DATASET && name) s->datasets.emplace_back(name);
    return 0;
  } catch (...) {
    s->failed = true;
    return -1;
  }
}

herr_t visit_all(hid_t file, VisitState& state) {
#if H5_VERSION_GE(1, 12, 0)
  return H5Ovisit3(file, H5_INDEX_NAME, H5_ITER_INC, visit_object, &state, H5O_INFO_BASIC);
#else
  return H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_INC, visit_object, &state, H5O_INFO_BASIC);
#endif
}

const char* filter_name(H5Z_filter_t f) {
  switch (f) {
    case H5Z_FILTER_DEFLATE: return "gzip";
    case H5Z_FILTER_SHUFFLE: return "shuffle";
    case H5Z_FILTER_FLETCHER32: return "fletcher32";
    case H5Z_FILTER_SZIP: return "szip";
    case H5Z_FILTER_NBIT: return "nbit";
    case H5Z_FILTER_SCALEOFFSET: return "scaleoffset";
    case 32000: return "lzf";
    case 32001: return "blosc";
    case 32004: return "lz4";
    case 32008: return "bitshuffle";
    case 32015: return "zstd";
    default: return "unknown";
  }
}

class Hdf5Reader final : public SnapshotReader {
 public:
  Hdf5Reader(std::shared_ptr<const InputFile> file, Hid fid, std::vector<Entry> entries)
      : file_(std::move(file)), fid_(std::move(fid)), entries_(std::move(entries)) {
    infos_.reserve(entries_.size());
    for (const auto& e : entries_) infos_.push_back(e.info);
  }
  ~Hdf5Reader() override {
    H5Lock lock;
    fid_.close();
  }

  Format format() const override { return Format::Hdf5; }
  const std::string& path() const override { return file_->path(); }
  const std::vector<TensorInfo>& arrays() const override { return infos_; }

  Tensor read(size_t i) override {
    if (i >= entries_.size())
      fail(ErrorCode::Internal, path() + ": array index " + std::to_string(i) + " out of range");
    const Entry& e = entries_[i];
    auto bad = [&](const std::string& what) -> Error {
      return Error(ErrorCode::Input, path() + ": dataset " + printable(e.h5path) + ": " + what);
    };
    Tensor t;
    t.info = e.info;
    if (e.how == ReadHow::Unreadable) throw bad(e.why);
    if (e.how == ReadHow::Null) return t;
    uint64_t n = e.info.elements();
    if (n == 0) return t;
    uint64_t bytes = n * e.item_size;  // bounded when the entry was made
    std::shared_ptr<uint8_t[]> buf(new uint8_t[bytes]);

    H5Lock lock;
    try {
      Hid ds = dataset_hid(H5Dopen2(fid_.get(), e.h5path.c_str(), H5P_DEFAULT));
      if (!ds.valid()) throw bad(with_detail("cannot open"));
      Hid ft = type_hid(H5Dget_type(ds.get()));
      if (!ft.valid()) throw bad(with_detail("cannot read the datatype"));
      TensorInfo again;
      again.shape = {};
      ReadPlan p = plan_read(ft.get(), again);
      if (p.how != e.how || p.item_size != e.item_size) throw bad("datatype changed while reading");
      if (H5Dread(ds.get(), p.mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.get()) < 0)
        throw bad(with_detail("cannot read data"));
    } catch (const TypeFailure& f) {
      throw bad(f.what);
    }
    byte_swap(buf.get(), bytes, e.swap_unit);
    const uint8_t* data = buf.get();
    t.data = Buffer::view(std::shared_ptr<const void>(buf, buf.get()), data, bytes);
    return t;
  }

 private:
  std::shared_ptr<const InputFile> file_;
  Hid fid_;
  std::vector<Entry> entries_;
  std::vector<TensorInfo> infos_;
};

// Inspects one dataset; throws Error(Input) for a dataset that lies about itself.
Entry inspect(hid_t fid, const std::string& path, const std::string& rel, uint64_t file_size) {
  Entry e;
  e.h5path = "/" + rel;
  e.info.name = rel;
  std::replace(e.info.name.begin(), e.info.name.end(), '/', '.');
  auto bad = [&](const std::string& what) -> Error {
    return Error(ErrorCode::Input, path + ": dataset " + printable(e.h5path) + ": " + what);
  };
  try {
    Hid ds = dataset_hid(H5Dopen2(fid, e.h5path.c_str(), H5P_DEFAULT));
    if (!ds.valid()) throw bad(with_detail("cannot open"));
    Hid space = space_hid(H5Dget_space(ds.get()));
    if (!space.valid()) throw bad(with_detail("cannot read the dataspace"));
    H5S_class_t sc = H5Sget_simple_extent_type(space.get());
    bool null_space = false;
    if (sc == H5S_SIMPLE) {
      int rank = H5Sget_simple_extent_ndims(space.get());
      if (rank < 0 || rank > H5S_MAX_RANK) throw bad(with_detail("bad dataspace rank"));
      std::vector<hsize_t> dims(static_cast<size_t>(rank));
      if (rank > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0)
        throw bad(with_detail("cannot read the dataspace"));
      e.info.shape.assign(dims.begin(), dims.end());
    } else if (sc == H5S_SCALAR) {
      e.info.shape.clear();
    } else if (sc == H5S_NULL) {
      null_space = true;  // shape [0]: see the decisions at the top
    } else {
      throw bad(with_detail("unknown dataspace class"));
    }
    std::optional<uint64_t> space_elems = null_space ? 0 : checked_elements(e.info.shape);
    if (!space_elems) throw bad("dataspace " + shape_string(e.info.shape) + " has too many elements");

    Hid ft = type_hid(H5Dget_type(ds.get()));
    if (!ft.valid()) throw bad(with_detail("cannot read the datatype"));
    ReadPlan p = plan_read(ft.get(), e.info);
    if (null_space) e.info.shape = {0};
    e.how = null_space && p.how != ReadHow::Unreadable ? ReadHow::Null : p.how;
    e.swap_unit = p.swap_unit;
    e.item_size = p.item_size;
    e.why = p.why;
    std::optional<uint64_t> elems_or = checked_elements(e.info.shape);  // includes array-type dims
    if (!elems_or) throw bad("shape " + shape_string(e.info.shape) + " has too many elements");
    uint64_t elems = *elems_or;
    if (e.how != ReadHow::Raw && e.how != ReadHow::Convert) return e;
    if (elems == 0) return e;

    size_t file_item = H5Tget_size(ft.get());
    if (file_item == 0) throw bad("datatype of size 0");
    if (*space_elems > std::numeric_limits<uint64_t>::max() / file_item ||
        elems > std::numeric_limits<uint64_t>::max() / e.item_size)
      throw bad("declares more data than can be addressed");
    uint64_t stored = *space_elems * file_item;  // bytes the elements take in the file (with array dims)
    uint64_t in_memory = elems * e.item_size;

    Hid dcpl = plist_hid(H5Dget_create_plist(ds.get()));
    if (!dcpl.valid()) throw bad(with_detail("cannot read the creation properties"));
    int ext = H5Pget_external_count(dcpl.get());
    if (ext < 0) throw bad(with_detail("cannot read the storage properties"));
    if (ext > 0) {
      e.how = ReadHow::Unreadable;
      e.why = "data in external files is not read (security)";
      return e;
    }
    H5D_layout_t layout = H5Pget_layout(dcpl.get());
    if (layout == H5D_VIRTUAL) {
      e.how = ReadHow::Unreadable;
      e.why = "virtual datasets (data in other files) are not read";
      return e;
    }
    int nfilters = H5Pget_nfilters(dcpl.get());
    for (int k = 0; k < nfilters; ++k) {
      unsigned flags = 0;
      size_t nelem = 0;
      char fname[64] = {0};
      unsigned config = 0;
      H5Z_filter_t fid_k =
          H5Pget_filter2(dcpl.get(), static_cast<unsigned>(k), &flags, &nelem, nullptr, sizeof fname, fname, &config);
      if (fid_k < 0) throw bad(with_detail("cannot read the filter pipeline"));
      if (H5Zfilter_avail(fid_k) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        e.how = ReadHow::Unreadable;
        e.why = std::string("compressed with filter ") + filter_name(fid_k) + " (id " + std::to_string(fid_k) +
                "), which this build cannot decode";
        return e;
      }
    }

    if (layout == H5D_CONTIGUOUS) {
      haddr_t addr = H5Dget_offset(ds.get());
      H5Eclear2(H5E_DEFAULT);
      if (addr == HADDR_UNDEF) {
        if (stored > kMaxUnbackedBytes)
          throw bad("declares " + std::to_string(stored) + " bytes but none are stored in the file");
      } else if (addr > file_size || stored > file_size - addr) {
        throw bad("data of " + std::to_string(stored) + " bytes at offset " + std::to_string(addr) +
                  " extends beyond the end of the file (" + std::to_string(file_size) + " bytes)");
      }
    } else {
      uint64_t cap = file_size > std::numeric_limits<uint64_t>::max() / kMaxExpansion
                         ? std::numeric_limits<uint64_t>::max()
                         : std::max(kMaxUnbackedBytes, file_size * kMaxExpansion);
      if (stored > cap)
        throw bad("declares " + std::to_string(stored) + " bytes, implausible for a file of " +
                  std::to_string(file_size) + " bytes");
    }
    if (in_memory > std::max<uint64_t>(stored, 1) * 4)
      throw bad("declares an implausible amount of data");
    return e;
  } catch (const TypeFailure& f) {
    throw bad(f.what);
  }
}

std::atomic<uint64_t> g_image_counter{0};

// HDF5 locks files it opens; on file systems without locks (some NFS/Lustre mounts) that makes
// every open fail. Keep locking where it works and ignore it where the file system has none.
bool relax_file_locking([[maybe_unused]] hid_t fapl) {
#if H5_VERSION_GE(1, 10, 7)
  return H5Pset_file_locking(fapl, 1, 1) >= 0;
#else
  return true;
#endif
}

}  // namespace

std::unique_ptr<SnapshotReader> open_hdf5(std::shared_ptr<const InputFile> file) {
  const std::string& path = file->path();
  H5Lock lock;
  Hid fapl = plist_hid(H5Pcreate(H5P_FILE_ACCESS));
  if (!fapl.valid()) fail(ErrorCode::Input, path + ": " + with_detail("cannot set up HDF5"));
  if (H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG) < 0 || !relax_file_locking(fapl.get()))
    fail(ErrorCode::Input, path + ": " + with_detail("cannot set up HDF5"));
  Hid fid;
  if (path == "<stdin>") {
    // The data came through a pipe: open the memory image with the core driver (copied once).
    if (file->size() < 8)
      fail(ErrorCode::Input, path + ": not an HDF5 file (" + std::to_string(file->size()) + " bytes)");
    if (H5Pset_fapl_core(fapl.get(), 1 << 20, 0) < 0 ||
        H5Pset_file_image(fapl.get(), const_cast<uint8_t*>(file->data()), file->size()) < 0)
      fail(ErrorCode::Input, path + ": " + with_detail("cannot load the HDF5 image"));
    // A unique name: HDF5 identifies open files by name for the core driver.
    std::string name = "gradcodec-stdin-image-" + std::to_string(++g_image_counter);
    fid = file_hid(H5Fopen(name.c_str(), H5F_ACC_RDONLY, fapl.get()));
  } else {
    fid = file_hid(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()));
  }
  if (!fid.valid()) fail(ErrorCode::Input, path + ": " + with_detail("not a readable HDF5 file"));

  hsize_t fsize = 0;
  if (H5Fget_filesize(fid.get(), &fsize) < 0) {
    H5Eclear2(H5E_DEFAULT);
    fsize = file->size();
  }
  uint64_t file_size = fsize;

  VisitState state;
  if (visit_all(fid.get(), state) < 0 || state.failed)
    fail(ErrorCode::Input, path + ": " + with_detail("cannot list the datasets"));

  std::vector<Entry> entries;
  std::map<std::string, std::string> names;  // tensor name → HDF5 path
  entries.reserve(state.datasets.size());
  for (const std::string& rel : state.datasets) {
    Entry e = inspect(fid.get(), path, rel, file_size);
    auto [it, fresh] = names.emplace(e.info.name, e.h5path);
    if (!fresh)
      fail(ErrorCode::Input, path + ": datasets " + printable(it->second) + " and " + printable(e.h5path) +
                                 " both map to tensor name '" + printable(e.info.name) + "'");
    entries.push_back(std::move(e));
  }
  return std::make_unique<Hdf5Reader>(std::move(file), std::move(fid), std::move(entries));
}

// ---------------------------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------------------------

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
        if (l.size != 2 && l.size != 4 && l.size != 8) throw DescrError{"unsupported float size"};
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
      case 'f': return make_float(l.size == 2 ? DType::F16 : l.size == 4 ? DType::F32 : DType::F64, be);
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
    // Name → HDF5 path, refusing names that HDF5 cannot hold or that collide.
    std::vector<std::string> parts = split_name(name);
    for (const auto& p : parts)
      if (p.empty()) throw usage("name has an empty component (cannot become an HDF5 path)");
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
    Hid ds = dataset_hid(H5Dcreate2(fid_.get(), h5path.c_str(), wt.file.get(), space.get(), lcpl_.get(),
                                    H5P_DEFAULT, H5P_DEFAULT));
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

  void finish() override {
    if (finished_) return;
    {
      H5Lock lock;
      lcpl_.close();
      if (fid_.close() < 0) fail(ErrorCode::Input, path_ + ": " + with_detail("cannot complete the HDF5 file"));
    }
    out_->commit();
    finished_ = true;
  }

  std::vector<std::string> take_warnings() override {
    std::vector<std::string> w;
    if (bf16_count_ > 0) {
      w.push_back(path_ + ": " + std::to_string(bf16_count_) + " bf16 tensor(s) (first: '" + first_bf16_ +
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
