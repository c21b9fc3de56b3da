// SPDX-License-Identifier: BSD-3-Clause
// The HDF5 datatype mapping (see hdf5_types.hpp): the float layouts, the types the writer builds,
// describe() (what an HDF5 type is for numpy, and the packed little-endian memory type it is read
// into), the validation of every type a file declares and plan_read().
#include "hdf5_types.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gradcodec::formats::h5 {

// ---------------------------------------------------------------------------------------------
// Datatype mapping: HDF5 types ↔ gradcodec dtypes and numpy descrs
// ---------------------------------------------------------------------------------------------

namespace {

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

}  // namespace

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


Hid make_bool() {
  Hid t(H5Tenum_create(H5T_NATIVE_INT8), H5Tclose);
  if (!t.valid()) type_fail("cannot build the bool datatype");
  int8_t f = 0, tr = 1;
  if (H5Tenum_insert(t.get(), "FALSE", &f) < 0 || H5Tenum_insert(t.get(), "TRUE", &tr) < 0)
    type_fail("cannot build the bool datatype");
  return t;
}

Hid make_complex(size_t total, bool big_endian) {
  hid_t part = total == 8 ? (big_endian ? H5T_IEEE_F32BE : H5T_IEEE_F32LE)
                          : (big_endian ? H5T_IEEE_F64BE : H5T_IEEE_F64LE);
  Hid t(H5Tcreate(H5T_COMPOUND, total), H5Tclose);
  if (!t.valid() || H5Tinsert(t.get(), "r", 0, part) < 0 || H5Tinsert(t.get(), "i", total / 2, part) < 0)
    type_fail("cannot build the complex datatype");
  return t;
}

namespace {

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
        // Built by appends: GCC 12 warns falsely (-Wrestrict) on "(" + str + ", " + ... here.
        d.descr += "(";
        d.descr += py_repr(name);
        d.descr += ", ";
        d.descr += md.descr.starts_with("[") ? md.descr : py_repr(md.descr);
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

}  // namespace

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

}  // namespace gradcodec::formats::h5
