// SPDX-License-Identifier: BSD-3-Clause
// The .pt pickle writer (contract in pickle_restricted.hpp): protocol 2, the tensors of a
// state_dict as torch.save writes them (torch._utils._rebuild_tensor_v2 of a persistent storage
// id), each storage a file of the zip beside the pickle.
#include "pickle_restricted.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace gradcodec::formats::pickle {

namespace {

struct PickleOut {
  std::vector<uint8_t> b;
  void op(uint8_t c) { b.push_back(c); }
  void raw(const std::string& s) { b.insert(b.end(), s.begin(), s.end()); }
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void str(const std::string& s) {  // BINUNICODE
    op('X');
    le(s.size(), 4);
    raw(s);
  }
  void integer(uint64_t v) {
    if (v < 0x100) {
      op('K');
      le(v, 1);
    } else if (v < 0x10000) {
      op('M');
      le(v, 2);
    } else if (v < 0x80000000u) {
      op('J');
      le(v, 4);
    } else {  // LONG1: the fewest bytes whose two's complement is v (a 0x00 when the top bit is set)
      int n = 0;
      for (uint64_t x = v; x; x >>= 8) ++n;
      const bool pad = (v >> (8 * n - 1)) & 1;
      op(0x8a);
      le(static_cast<uint64_t>(n + pad), 1);
      le(v, n);
      if (pad) op(0);
    }
  }
  void tuple_of(const std::vector<uint64_t>& v) {
    if (v.empty()) return op(')');
    if (v.size() > 3) op('(');
    for (uint64_t x : v) integer(x);
    op(v.size() == 1 ? 0x85 : v.size() == 2 ? 0x86 : v.size() == 3 ? 0x87 : 't');
  }
  void global(const char* module, const char* name) {
    op('c');
    raw(module);
    op('\n');
    raw(name);
    op('\n');
  }
};

}  // namespace

std::vector<uint8_t> write_torch_pickle(const std::vector<TensorToWrite>& tensors) {
  PickleOut o;
  o.op(0x80);
  o.op(2);
  o.op('}');
  if (!tensors.empty()) o.op('(');
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorToWrite& t = tensors[i];
    std::vector<uint64_t> stride(t.shape.size());
    uint64_t numel = 1;
    for (size_t k = t.shape.size(); k-- > 0;) {
      stride[k] = numel;
      numel *= t.shape[k];
    }
    o.str(t.name);
    o.global("torch._utils", "_rebuild_tensor_v2");
    o.op('(');
    o.op('(');  // the persistent id
    o.str("storage");
    o.global("torch", t.storage_class);
    o.str(std::to_string(i));
    o.str("cpu");
    o.integer(numel);
    o.op('t');
    o.op('Q');
    o.integer(0);
    o.tuple_of(t.shape);
    o.tuple_of(stride);
    o.op(0x89);  // requires_grad False
    o.global("collections", "OrderedDict");
    o.op(')');
    o.op('R');  // backward hooks: OrderedDict()
    o.op('t');
    o.op('R');
  }
  if (!tensors.empty()) o.op('u');
  o.op('.');
  return std::move(o.b);
}

}  // namespace gradcodec::formats::pickle
