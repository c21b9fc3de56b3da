// SPDX-License-Identifier: BSD-3-Clause
// HDF5 attributes: read into the JSON layout of hdf5_attrs.hpp and written back from it.
#include "hdf5_attrs.hpp"

#include "hdf5_common.hpp"
#include "hdf5_types.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gradcodec::formats::h5 {

namespace {

using json = nlohmann::ordered_json;

struct NotKept {
  std::string why;
};

Hid object_hid(hid_t id) { return Hid(id, H5Oclose); }
Hid attr_hid(hid_t id) { return Hid(id, H5Aclose); }

// Whether JSON can hold `s` (nlohmann's own check: valid UTF-8, no overlong forms or surrogates).
bool valid_utf8(const std::string& s) {
  try {
    (void)json(s).dump();
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

void reclaim(hid_t mem, hid_t space, void* buf) {
#if H5_VERSION_GE(1, 12, 0)
  H5Treclaim(mem, space, H5P_DEFAULT, buf);
#else
  H5Dvlen_reclaim(mem, space, H5P_DEFAULT, buf);
#endif
}

const char* cset_name(H5T_cset_t c) { return c == H5T_CSET_UTF8 ? "utf-8" : "ascii"; }

json float_value(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

// IEEE half, single or double precision in `ft` (either byte order).
bool ieee_float(hid_t ft, size_t size) {
  size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
  if (H5Tget_fields(ft, &spos, &epos, &esize, &mpos, &msize) < 0) return false;
  const size_t ebias = H5Tget_ebias(ft);
  if (H5Tget_offset(ft) != 0 || H5Tget_precision(ft) != 8 * size) return false;
  if (size == 2) return spos == 15 && epos == 10 && esize == 5 && mpos == 0 && msize == 10 && ebias == 15;
  if (size == 4) return spos == 31 && epos == 23 && esize == 8 && mpos == 0 && msize == 23 && ebias == 127;
  if (size == 8) return spos == 63 && epos == 52 && esize == 11 && mpos == 0 && msize == 52 && ebias == 1023;
  return false;
}

// h5py's bool: an enum of one byte with exactly FALSE = 0 and TRUE = 1.
bool h5py_bool(hid_t ft) {
  if (H5Tget_size(ft) != 1 || H5Tget_nmembers(ft) != 2) return false;
  for (unsigned k = 0; k < 2; ++k) {
    char* name = H5Tget_member_name(ft, k);
    if (!name) return false;
    const std::string n = name;
    H5free_memory(name);
    int8_t v = -1;
    if (H5Tget_member_value(ft, k, &v) < 0) return false;
    if (!((n == "FALSE" && v == 0) || (n == "TRUE" && v == 1))) return false;
  }
  return true;
}

// One attribute as JSON; throws NotKept.
json read_one(hid_t obj, const std::string& name) {
  Hid a = attr_hid(H5Aopen(obj, name.c_str(), H5P_DEFAULT));
  if (!a.valid()) throw NotKept{with_detail("cannot be opened")};
  Hid ft = type_hid(H5Aget_type(a.get()));
  Hid sp = space_hid(H5Aget_space(a.get()));
  if (!ft.valid() || !sp.valid()) throw NotKept{with_detail("cannot be inspected")};
  json out = json::object();
  out["name"] = name;
  const H5S_class_t sc = H5Sget_simple_extent_type(sp.get());
  json shape = json::array();
  bool empty = false;
  if (sc == H5S_SIMPLE) {
    const int rank = H5Sget_simple_extent_ndims(sp.get());
    if (rank < 0 || rank > H5S_MAX_RANK) throw NotKept{"bad dataspace"};
    std::vector<hsize_t> dims(static_cast<size_t>(rank));
    if (rank > 0 && H5Sget_simple_extent_dims(sp.get(), dims.data(), nullptr) < 0) throw NotKept{"bad dataspace"};
    for (hsize_t d : dims) shape.push_back(static_cast<uint64_t>(d));
  } else if (sc == H5S_NULL) {
    empty = true;
  } else if (sc != H5S_SCALAR) {
    throw NotKept{"unknown dataspace class"};
  }
  const hssize_t points = empty ? 0 : H5Sget_simple_extent_npoints(sp.get());
  if (points < 0) throw NotKept{"bad dataspace"};
  const auto n = static_cast<size_t>(points);
  if (static_cast<unsigned long long>(points) > kMaxAttributeElements)
    throw NotKept{"too large (" + std::to_string(points) + " elements; at most " +
                  std::to_string(kMaxAttributeElements) + " are kept)"};
  const bool scalar = sc == H5S_SCALAR;
  // Values as a scalar or a flat list.
  auto put = [&](std::vector<json> vals) {
    if (empty) return;
    if (scalar) {
      out["value"] = vals.empty() ? json() : vals.front();
    } else {
      out["value"] = json::array();
      for (auto& v : vals) out["value"].push_back(std::move(v));
    }
  };
  const H5T_class_t tc = H5Tget_class(ft.get());
  const size_t size = H5Tget_size(ft.get());
  if (size > kMaxAttributeBytes || n * size > kMaxAttributeBytes)
    throw NotKept{"too large (" + std::to_string(n) + " x " + std::to_string(size) + " bytes; at most " +
                  std::to_string(kMaxAttributeBytes) + " bytes are kept)"};
  const bool be = H5Tget_order(ft.get()) == H5T_ORDER_BE;
  std::vector<json> vals;
  if (tc == H5T_INTEGER) {
    if ((size != 1 && size != 2 && size != 4 && size != 8) || H5Tget_precision(ft.get()) != 8 * size ||
        H5Tget_offset(ft.get()) != 0)
      throw NotKept{std::to_string(8 * size) + "-bit integers with padding bits are not kept"};
    const bool is_signed = H5Tget_sign(ft.get()) == H5T_SGN_2;
    out["dtype"] = std::string(size == 1 ? "|" : be ? ">" : "<") + (is_signed ? "i" : "u") + std::to_string(size);
    if (!empty) {
      if (is_signed) {
        std::vector<int64_t> v(n);
        if (n && H5Aread(a.get(), H5T_NATIVE_INT64, v.data()) < 0) throw NotKept{with_detail("cannot be read")};
        for (auto x : v) vals.emplace_back(x);
      } else {
        std::vector<uint64_t> v(n);
        if (n && H5Aread(a.get(), H5T_NATIVE_UINT64, v.data()) < 0) throw NotKept{with_detail("cannot be read")};
        for (auto x : v) vals.emplace_back(x);
      }
    }
  } else if (tc == H5T_FLOAT) {
    if (!ieee_float(ft.get(), size))
      throw NotKept{"floats other than IEEE half, single and double precision are not kept"};
    out["dtype"] = std::string(be ? ">" : "<") + "f" + std::to_string(size);
    if (!empty) {
      std::vector<double> v(n);
      if (n && H5Aread(a.get(), H5T_NATIVE_DOUBLE, v.data()) < 0) throw NotKept{with_detail("cannot be read")};
      for (double x : v) vals.push_back(float_value(x));
    }
  } else if (tc == H5T_ENUM && h5py_bool(ft.get())) {
    out["dtype"] = "|b1";
    if (!empty) {
      std::vector<uint8_t> v(n);
      if (n && H5Aread(a.get(), ft.get(), v.data()) < 0) throw NotKept{with_detail("cannot be read")};
      for (auto x : v) vals.emplace_back(x != 0);
    }
  } else if (tc == H5T_STRING) {
    const H5T_cset_t cset = H5Tget_cset(ft.get());
    const htri_t vlen = H5Tis_variable_str(ft.get());
    if (vlen < 0) throw NotKept{with_detail("cannot be inspected")};
    auto text = [&](std::string s) {
      if (!valid_utf8(s)) throw NotKept{"strings that are not valid UTF-8 are not kept"};
      vals.emplace_back(std::move(s));
    };
    if (vlen) {
      out["dtype"] = "str";
      out["cset"] = cset_name(cset);
      if (!empty && n) {
        Hid mem = copy_type(H5T_C_S1);
        if (H5Tset_size(mem.get(), H5T_VARIABLE) < 0 || H5Tset_cset(mem.get(), cset) < 0)
          throw NotKept{with_detail("cannot be read")};
        std::vector<char*> v(n, nullptr);
        if (H5Aread(a.get(), mem.get(), v.data()) < 0) throw NotKept{with_detail("cannot be read")};
        std::vector<std::string> copies;
        for (char* p : v) copies.emplace_back(p ? p : "");
        reclaim(mem.get(), sp.get(), v.data());
        for (auto& s : copies) text(std::move(s));
      }
    } else {
      const H5T_str_t pad = H5Tget_strpad(ft.get());
      out["dtype"] = "|S" + std::to_string(size);
      out["cset"] = cset_name(cset);
      out["strpad"] = pad == H5T_STR_NULLTERM ? "nullterm" : pad == H5T_STR_SPACEPAD ? "spacepad" : "nullpad";
      if (!empty && n) {
        std::vector<char> buf(n * size);
        if (H5Aread(a.get(), ft.get(), buf.data()) < 0) throw NotKept{with_detail("cannot be read")};
        for (size_t k = 0; k < n; ++k) {
          std::string s(buf.data() + k * size, size);
          while (!s.empty() && s.back() == '\0') s.pop_back();  // written back zero-filled
          if (s.find('\0') != std::string::npos) throw NotKept{"byte strings holding NUL bytes are not kept"};
          text(std::move(s));
        }
      }
    }
  } else {
    const char* what = tc == H5T_COMPOUND    ? "compound"
                       : tc == H5T_ENUM      ? "enum"
                       : tc == H5T_REFERENCE ? "reference"
                       : tc == H5T_VLEN      ? "variable-length sequence"
                       : tc == H5T_ARRAY     ? "array-typed"
                       : tc == H5T_OPAQUE    ? "opaque"
                       : tc == H5T_BITFIELD  ? "bitfield"
                                             : "other";
    throw NotKept{std::string(what) + " attributes are not kept (only numbers, booleans, strings and arrays of them)"};
  }
  out["shape"] = empty ? json() : shape;
  put(std::move(vals));
  return out;
}

struct IterState {
  std::vector<std::string> names;
};

herr_t collect(hid_t, const char* name, const H5A_info_t*, void* data) noexcept {
  try {
    static_cast<IterState*>(data)->names.emplace_back(name ? name : "");
    return 0;
  } catch (...) {
    return -1;
  }
}

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

struct Bad {
  std::string why;
};

// The value list of an attribute entry (one element for a scalar), checked against its shape.
std::vector<json> values_of(const json& a, size_t& count, std::vector<hsize_t>& dims, bool& empty) {
  const json& shape = a.at("shape");
  empty = shape.is_null();
  dims.clear();
  count = empty ? 0 : 1;
  if (!empty) {
    if (!shape.is_array() || shape.size() > H5S_MAX_RANK) throw Bad{"bad shape"};
    for (const auto& d : shape) {
      if (!d.is_number_unsigned()) throw Bad{"bad shape"};
      const uint64_t v = d.get<uint64_t>();
      if (v > kMaxAttributeElements || (v && count > kMaxAttributeElements / v)) throw Bad{"too many elements"};
      dims.push_back(v);
      count *= v;
    }
  }
  std::vector<json> vals;
  if (empty) return vals;
  const json& v = a.at("value");
  if (shape.empty()) {
    vals.push_back(v);
  } else {
    if (!v.is_array() || v.size() != count) throw Bad{"value does not match the shape"};
    for (const auto& x : v) vals.push_back(x);
  }
  return vals;
}

void write_one(hid_t obj, const json& a) {
  if (!a.is_object() || !a.contains("name") || !a["name"].is_string() || !a.contains("dtype") ||
      !a["dtype"].is_string() || !a.contains("shape"))
    throw Bad{"malformed entry"};
  const std::string name = a["name"].get<std::string>();
  const std::string dtype = a["dtype"].get<std::string>();
  size_t count = 0;
  std::vector<hsize_t> dims;
  bool empty = false;
  const std::vector<json> vals = values_of(a, count, dims, empty);
  Hid space = space_hid(empty ? H5Screate(H5S_NULL)
                        : a["shape"].empty() ? H5Screate(H5S_SCALAR)
                                             : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  if (!space.valid()) throw Bad{with_detail("cannot create the dataspace")};

  Hid file_type;
  hid_t mem = H5I_INVALID_HID;
  std::vector<int64_t> i64;
  std::vector<uint64_t> u64;
  std::vector<double> f64;
  std::vector<uint8_t> bytes;
  std::vector<std::string> strs;
  std::vector<const char*> ptrs;
  const void* buf = nullptr;

  const auto num = [&](size_t k) -> const json& { return vals[k]; };
  if (dtype.size() >= 3 && (dtype[1] == 'i' || dtype[1] == 'u') && std::string("<>|").find(dtype[0]) != std::string::npos) {
    const std::string digits = dtype.substr(2);
    const size_t size = digits == "1" ? 1 : digits == "2" ? 2 : digits == "4" ? 4 : digits == "8" ? 8 : 0;
    const bool is_signed = dtype[1] == 'i';
    const hid_t t = std_integer(size, is_signed, dtype[0] == '>');
    if (t == H5I_INVALID_HID) throw Bad{"bad dtype '" + dtype + "'"};
    file_type = copy_type(t);
    const unsigned bits = static_cast<unsigned>(8 * size);
    for (size_t k = 0; k < vals.size(); ++k) {
      const json& x = num(k);
      if (is_signed) {
        if (!x.is_number_integer()) throw Bad{"value is not an integer"};
        if (x.is_number_unsigned() && x.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
          throw Bad{"value out of range"};
        const int64_t v = x.get<int64_t>();
        if (bits < 64 && (v < -(int64_t{1} << (bits - 1)) || v >= (int64_t{1} << (bits - 1)))) throw Bad{"value out of range"};
        i64.push_back(v);
      } else {
        if (!x.is_number_unsigned()) throw Bad{"value is not a non-negative integer"};
        const uint64_t v = x.get<uint64_t>();
        if (bits < 64 && v >= (uint64_t{1} << bits)) throw Bad{"value out of range"};
        u64.push_back(v);
      }
    }
    mem = is_signed ? H5T_NATIVE_INT64 : H5T_NATIVE_UINT64;
    buf = is_signed ? static_cast<const void*>(i64.data()) : static_cast<const void*>(u64.data());
  } else if (dtype == "<f2" || dtype == ">f2" || dtype == "<f4" || dtype == ">f4" || dtype == "<f8" || dtype == ">f8") {
    const DType d = dtype[2] == '2' ? DType::F16 : dtype[2] == '4' ? DType::F32 : DType::F64;
    file_type = make_float(d, dtype[0] == '>');
    for (size_t k = 0; k < vals.size(); ++k) {
      const json& x = num(k);
      if (x.is_number()) {
        f64.push_back(x.get<double>());
      } else if (x == "nan") {
        f64.push_back(std::numeric_limits<double>::quiet_NaN());
      } else if (x == "inf" || x == "-inf") {
        f64.push_back(x == "inf" ? HUGE_VAL : -HUGE_VAL);
      } else {
        throw Bad{"value is not a number"};
      }
    }
    mem = H5T_NATIVE_DOUBLE;
    buf = f64.data();
  } else if (dtype == "|b1") {
    file_type = make_bool();
    for (size_t k = 0; k < vals.size(); ++k) {
      if (!num(k).is_boolean()) throw Bad{"value is not a boolean"};
      bytes.push_back(num(k).get<bool>() ? 1 : 0);
    }
    mem = file_type.get();
    buf = bytes.data();
  } else if (dtype == "str" || (dtype.size() > 2 && dtype.compare(0, 2, "|S") == 0)) {
    const std::string cs = a.contains("cset") && a["cset"].is_string() ? a["cset"].get<std::string>() : "utf-8";
    if (cs != "utf-8" && cs != "ascii") throw Bad{"bad cset"};
    for (size_t k = 0; k < vals.size(); ++k) {
      if (!num(k).is_string()) throw Bad{"value is not a string"};
      strs.push_back(num(k).get<std::string>());
    }
    file_type = copy_type(H5T_C_S1);
    if (H5Tset_cset(file_type.get(), cs == "ascii" ? H5T_CSET_ASCII : H5T_CSET_UTF8) < 0)
      throw Bad{with_detail("cannot build the string type")};
    if (dtype == "str") {
      if (H5Tset_size(file_type.get(), H5T_VARIABLE) < 0) throw Bad{with_detail("cannot build the string type")};
      for (const auto& s : strs) ptrs.push_back(s.c_str());
      buf = ptrs.data();
    } else {
      size_t size = 0;
      for (char c : dtype.substr(2)) {
        if (c < '0' || c > '9' || size > (size_t{1} << 20)) throw Bad{"bad dtype '" + dtype + "'"};
        size = size * 10 + static_cast<size_t>(c - '0');
      }
      if (size == 0 || size > kMaxAttributeBytes || strs.size() * size > kMaxAttributeBytes)
        throw Bad{"bad dtype '" + dtype + "' or too large"};
      const std::string pad = a.contains("strpad") && a["strpad"].is_string() ? a["strpad"].get<std::string>() : "nullpad";
      const H5T_str_t sp = pad == "nullterm" ? H5T_STR_NULLTERM : pad == "spacepad" ? H5T_STR_SPACEPAD : H5T_STR_NULLPAD;
      if (H5Tset_size(file_type.get(), size) < 0 || H5Tset_strpad(file_type.get(), sp) < 0)
        throw Bad{with_detail("cannot build the string type")};
      bytes.assign(strs.size() * size, 0);
      for (size_t k = 0; k < strs.size(); ++k) {
        if (strs[k].size() > size) throw Bad{"string longer than its dtype"};
        std::memcpy(bytes.data() + k * size, strs[k].data(), strs[k].size());
      }
      buf = bytes.data();
    }
    mem = file_type.get();
  } else {
    throw Bad{"unknown dtype '" + dtype + "'"};
  }
  if (H5Aexists(obj, name.c_str()) > 0) throw Bad{"already present"};
  Hid attr = attr_hid(H5Acreate2(obj, name.c_str(), file_type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (!attr.valid()) throw Bad{with_detail("cannot create it")};
  if (count > 0 && H5Awrite(attr.get(), mem, buf) < 0) throw Bad{with_detail("cannot write it")};
}

}  // namespace

std::string read_attributes(hid_t fid, const std::vector<AttrObject>& objects, std::vector<std::string>& notes) {
  json all = json::array();
  size_t json_bytes = 0;
  for (const auto& o : objects) {
    const std::string where = (o.tensor.empty() ? "group " : "dataset ") + printable(o.h5path);
    Hid obj = object_hid(H5Oopen(fid, o.h5path.c_str(), H5P_DEFAULT));
    if (!obj.valid()) {
      H5Eclear2(H5E_DEFAULT);
      notes.push_back(where + ": " + with_detail("its attributes cannot be listed, and are not kept"));
      continue;
    }
    IterState st;
    hsize_t idx = 0;
    if (H5Aiterate2(obj.get(), H5_INDEX_NAME, H5_ITER_INC, &idx, collect, &st) < 0) {
      notes.push_back(where + ": " + with_detail("its attributes cannot be listed, and are not kept"));
      H5Eclear2(H5E_DEFAULT);
      continue;
    }
    json attrs = json::array();
    for (const auto& name : st.names) {
      try {
        json one = read_one(obj.get(), name);
        const size_t bytes = one.dump().size();
        if (json_bytes + bytes > kMaxAttributesJson)
          throw NotKept{"the file's attributes exceed " + std::to_string(kMaxAttributesJson >> 20) +
                        " MiB of description, the most a container keeps"};
        json_bytes += bytes;
        attrs.push_back(std::move(one));
      } catch (const NotKept& k) {
        H5Eclear2(H5E_DEFAULT);
        notes.push_back(where + ": attribute '" + printable(name) + "' not kept: " + k.why);
      } catch (const TypeFailure& f) {
        H5Eclear2(H5E_DEFAULT);
        notes.push_back(where + ": attribute '" + printable(name) + "' not kept: " + f.what);
      }
    }
    if (attrs.empty()) continue;
    json entry = json::object();
    entry["object"] = o.h5path;
    if (!o.tensor.empty()) entry["tensor"] = o.tensor;
    entry["attrs"] = std::move(attrs);
    all.push_back(std::move(entry));
  }
  return all.empty() ? std::string() : all.dump();
}

std::vector<std::string> write_attributes(hid_t fid, hid_t lcpl, const std::string& text,
                                          const std::map<std::string, std::string>& tensor_paths) {
  std::vector<std::string> warnings;
  const json all = json::parse(text, nullptr, false);
  if (!all.is_array()) return {"HDF5 attributes not written: their description is malformed"};
  size_t missing = 0;
  std::string first_missing;
  for (const auto& e : all) {
    if (!e.is_object() || !e.contains("object") || !e["object"].is_string() || !e.contains("attrs") ||
        !e["attrs"].is_array()) {
      warnings.push_back("HDF5 attributes of an object not written: its description is malformed");
      continue;
    }
    std::string path = e["object"].get<std::string>();
    const bool dataset = e.contains("tensor") && e["tensor"].is_string();
    std::string where;
    Hid obj;
    if (dataset) {
      const std::string tensor = e["tensor"].get<std::string>();
      where = "dataset " + printable(path) + " (tensor '" + printable(tensor) + "')";
      auto it = tensor_paths.find(tensor);
      if (it == tensor_paths.end()) {
        if (missing++ == 0) first_missing = where;
        continue;
      }
      obj = object_hid(H5Oopen(fid, it->second.c_str(), H5P_DEFAULT));
    } else {
      where = "group " + printable(path);
      if (path.empty() || path[0] != '/' || path.find('\0') != std::string::npos) {
        warnings.push_back("HDF5 attributes of " + where + " not written: not an absolute HDF5 path");
        continue;
      }
      // The group as it was: created (with its parents) when no tensor needed it.
      bool exists = true;
      for (size_t k = 1; exists && k <= path.size(); ++k)
        if (k == path.size() || path[k] == '/') {
          const std::string prefix = path.substr(0, k);
          if (prefix.size() > 1 && prefix.back() != '/') exists = H5Lexists(fid, prefix.c_str(), H5P_DEFAULT) > 0;
        }
      H5Eclear2(H5E_DEFAULT);
      if (!exists) {
        Hid g(H5Gcreate2(fid, path.c_str(), lcpl, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
        if (!g.valid()) {
          H5Eclear2(H5E_DEFAULT);
          warnings.push_back("HDF5 attributes of " + where + " not written: " +
                             with_detail("the group cannot be created"));
          continue;
        }
      }
      obj = object_hid(H5Oopen(fid, path.c_str(), H5P_DEFAULT));
      if (obj.valid()) {
        H5O_type_t type = H5O_TYPE_UNKNOWN;
#if H5_VERSION_GE(1, 12, 0)
        H5O_info2_t info;
        if (H5Oget_info3(obj.get(), &info, H5O_INFO_BASIC) >= 0) type = info.type;
#else
        H5O_info_t info;
        if (H5Oget_info2(obj.get(), &info, H5O_INFO_BASIC) >= 0) type = info.type;
#endif
        if (type != H5O_TYPE_GROUP) {
          warnings.push_back("HDF5 attributes of " + where + " not written: a tensor's dataset has that path");
          continue;
        }
      }
    }
    if (!obj.valid()) {
      H5Eclear2(H5E_DEFAULT);
      warnings.push_back("HDF5 attributes of " + where + " not written: " + with_detail("cannot open it"));
      continue;
    }
    for (const auto& a : e["attrs"]) {
      try {
        write_one(obj.get(), a);
      } catch (const Bad& b) {
        H5Eclear2(H5E_DEFAULT);
        const std::string name = a.is_object() && a.contains("name") && a["name"].is_string() ? a["name"].get<std::string>() : "?";
        warnings.push_back("HDF5 attribute '" + printable(name) + "' of " + where + " not written: " + b.why);
      } catch (const TypeFailure& f) {
        H5Eclear2(H5E_DEFAULT);
        warnings.push_back("HDF5 attributes of " + where + " not written: " + f.what);
      } catch (const nlohmann::json::exception&) {
        warnings.push_back("HDF5 attributes of " + where + " not written: their description is malformed");
      }
    }
  }
  if (missing)
    warnings.push_back("HDF5 attributes of " + std::to_string(missing) + " dataset(s) not written, the output lacks them (first: " +
                       first_missing + ")");
  return warnings;
}

}  // namespace gradcodec::formats::h5
