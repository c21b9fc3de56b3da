// SPDX-License-Identifier: BSD-3-Clause
// Restricted pickle reading (contract in pickle_restricted.hpp; the .pt writer is pickle_write.cpp;
// the names it knows, torch's storage classes and the opcodes', are in pickle_names.cpp).
//
// The interpreter follows CPython's _pickle.c for the opcodes it knows: one value stack with
// MARK positions on a second stack, a memo from indices to values. Every value is an entry of an
// arena (objs_); containers, strings and tensors hold indices, never pointers, so a container
// holding itself or a chain of a million nested lists is just data, freed at once with the arena.
#include "pickle_restricted.hpp"

#include "safetensors_common.hpp"
#include "text.hpp"

#include <gradcodec/error.hpp>

#include <unordered_map>
#include <unordered_set>

namespace gradcodec::formats::pickle {

namespace {

using safetensors::printable;

constexpr uint64_t kMaxElements = uint64_t{1} << 62;  // as shape_elements()

// BigInt: an int of more than 64 bits (a step counter, a hash in a checkpoint); its value is not
// kept, since no tensor's metadata can hold one.
enum class Kind : uint8_t { None, Bool, Int, BigInt, Float, Str, Tuple, List, Dict, Global, Storage, Tensor };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::None: return "None";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::BigInt: return "int of more than 64 bits";
    case Kind::Float: return "float";
    case Kind::Str: return "str";
    case Kind::Tuple: return "tuple";
    case Kind::List: return "list";
    case Kind::Dict: return "dict";
    case Kind::Global: return "global";
    case Kind::Storage: return "storage";
    case Kind::Tensor: return "tensor";
  }
  return "?";
}

enum class Global : uint8_t { OrderedDict, RebuildTensorV2, RebuildTensor, RebuildParameter, RebuildParameterState, StorageClass };

// One value. `aux` indexes strs_ (Str, and Global: its name), conts_ (Tuple, List, Dict: a dict
// holds key, value, key, value, ...), tensors_ (Tensor), storages (Storage); `v` is an Int's or a
// Bool's value, a Float's bits, a storage class's index in storage_types().
struct Obj {
  Kind kind;
  Global global = Global::OrderedDict;
  uint32_t aux = 0;
  int64_t v = 0;
};

struct TensorObj {
  size_t storage;
  uint64_t offset;
  std::vector<uint64_t> shape, stride;
};

class Interpreter {
 public:
  Interpreter(const uint8_t* p, size_t n, std::string where) : p_(p), n_(n), where_(std::move(where)) {}

  Result run(const std::string& root_name) {
    const uint32_t root = execute();
    std::string name;
    walk(root, name, 0, true, root_name);
    std::unordered_set<std::string> names;
    for (const TensorRef& t : result_.tensors)
      if (!names.insert(t.name).second)
        fail(ErrorCode::Input, where_ + ": two tensors are named " + printable(t.name) +
                                   " (tensor names are the '.'-joined keys and indices leading to them)");
    return std::move(result_);
  }

 private:
  // ---------------------------------------------------------------------------------------------
  // Errors and bounds

  [[noreturn]] void bad(const std::string& what) const {
    fail(ErrorCode::Input, where_ + ": " + what + " (opcode at byte " + std::to_string(op_pos_) + ")");
  }

  const uint8_t* take(uint64_t k) {
    if (k > n_ - pos_) bad("the pickle ends inside an opcode's argument (truncated)");
    const uint8_t* at = p_ + pos_;
    pos_ += static_cast<size_t>(k);
    return at;
  }
  uint64_t le(size_t bytes) {
    const uint8_t* b = take(bytes);
    uint64_t v = 0;
    for (size_t i = bytes; i-- > 0;) v = (v << 8) | b[i];
    return v;
  }

  uint32_t make(Kind kind, uint32_t aux = 0, int64_t v = 0, Global g = Global::OrderedDict) {
    if (objs_.size() >= kMaxObjects)
      bad("the pickle makes more than " + std::to_string(kMaxObjects) + " values, more than any torch.save "
          "of tensors needs");
    objs_.push_back(Obj{kind, g, aux, v});
    return static_cast<uint32_t>(objs_.size() - 1);
  }
  uint32_t make_str(std::string s) {
    strs_.push_back(std::move(s));
    return make(Kind::Str, static_cast<uint32_t>(strs_.size() - 1));
  }
  uint32_t make_container(Kind kind, std::vector<uint32_t> items) {
    conts_.push_back(std::move(items));
    return make(kind, static_cast<uint32_t>(conts_.size() - 1));
  }

  size_t base() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(uint32_t v) {
    if (stack_.size() >= kMaxStack) bad("more than " + std::to_string(kMaxStack) + " values on the pickle's stack");
    stack_.push_back(v);
  }
  uint32_t pop() {
    if (stack_.size() <= base()) bad("the pickle pops a value from an empty stack");
    const uint32_t v = stack_.back();
    stack_.pop_back();
    return v;
  }
  uint32_t top() const {
    if (stack_.size() <= base()) bad("the pickle uses a value of an empty stack");
    return stack_.back();
  }
  std::vector<uint32_t> pop_mark() {
    if (marks_.empty()) bad("the pickle closes a MARK it never opened");
    const size_t b = marks_.back();
    marks_.pop_back();
    std::vector<uint32_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(b), stack_.end());
    stack_.resize(b);
    return items;
  }

  const Obj& obj(uint32_t i) const { return objs_[i]; }
  std::vector<uint32_t>& items_of(uint32_t i, Kind want, const char* op) {
    if (obj(i).kind != want)
      bad(std::string(op) + " on a " + kind_name(obj(i).kind) + ", not a " + kind_name(want));
    return conts_[obj(i).aux];
  }

  std::string line() {  // GLOBAL's module and name: at most 256 bytes, ending in '\n'
    for (size_t k = pos_; k < n_ && k - pos_ <= 256; ++k)
      if (p_[k] == '\n') {
        std::string s(reinterpret_cast<const char*>(p_ + pos_), k - pos_);
        pos_ = k + 1;
        return s;
      }
    bad("GLOBAL's name is longer than 256 bytes or not ended by a newline");
  }

  uint32_t string_value(uint64_t len, bool unicode) {
    const uint8_t* s = take(len);
    if (unicode && !valid_utf8(s, static_cast<size_t>(len))) bad("a string is not valid UTF-8");
    return make_str(std::string(reinterpret_cast<const char*>(s), static_cast<size_t>(len)));
  }

  void memo_put(uint64_t i) {
    const uint32_t v = top();
    auto it = memo_.find(i);
    if (it != memo_.end()) {
      it->second = v;
      return;
    }
    if (memo_.size() >= kMaxMemo)
      bad("the pickle's memo grows beyond " + std::to_string(kMaxMemo) + " entries, more than any torch.save "
          "of tensors needs");
    memo_.emplace(i, v);
  }
  void memo_get(uint64_t i) {
    auto it = memo_.find(i);
    if (it == memo_.end()) bad("memo entry " + std::to_string(i) + " is read but was never stored");
    push(it->second);
  }

  // ---------------------------------------------------------------------------------------------
  // The interpreter: the opcodes torch.save's pickles use; anything else is refused.

  uint32_t execute() {
    while (true) {
      op_pos_ = pos_;
      if (pos_ >= n_) bad("the pickle ends without STOP (truncated)");
      const uint8_t op = p_[pos_++];
      switch (op) {
        case 0x80: {  // PROTO
          const uint64_t v = le(1);
          if (v < 2 || v > 5) bad("pickle protocol " + std::to_string(v) + " (torch.save writes 2 to 5)");
          break;
        }
        case 0x95: {  // FRAME: a length hint, nothing to do
          const uint64_t len = le(8);
          if (len > n_ - pos_) bad("a FRAME declares more bytes than the pickle holds");
          break;
        }
        case '.': return pop();  // STOP
        case '(':
          if (marks_.size() >= kMaxMarks)
            bad("more than " + std::to_string(kMaxMarks) + " MARKs open at once (nesting too deep)");
          marks_.push_back(stack_.size());
          break;
        case '}': push(make_container(Kind::Dict, {})); break;
        case ']': push(make_container(Kind::List, {})); break;
        case ')': push(make_container(Kind::Tuple, {})); break;
        case 't': push(make_container(Kind::Tuple, pop_mark())); break;
        case 'l': push(make_container(Kind::List, pop_mark())); break;
        case 'd': {
          std::vector<uint32_t> items = pop_mark();
          if (items.size() % 2) bad("DICT of an odd number of values");
          push(make_container(Kind::Dict, std::move(items)));
          break;
        }
        case 0x85:
        case 0x86:
        case 0x87: {  // TUPLE1..3
          const size_t k = op - 0x84u;
          std::vector<uint32_t> items(k);
          for (size_t j = k; j-- > 0;) items[j] = pop();
          push(make_container(Kind::Tuple, std::move(items)));
          break;
        }
        case 's': {  // SETITEM
          const uint32_t v = pop(), k = pop();
          auto& d = items_of(top(), Kind::Dict, "SETITEM");
          d.push_back(k);
          d.push_back(v);
          break;
        }
        case 'u': {  // SETITEMS
          std::vector<uint32_t> items = pop_mark();
          if (items.size() % 2) bad("SETITEMS of an odd number of values");
          auto& d = items_of(top(), Kind::Dict, "SETITEMS");
          d.insert(d.end(), items.begin(), items.end());
          break;
        }
        case 'a': {  // APPEND
          const uint32_t v = pop();
          items_of(top(), Kind::List, "APPEND").push_back(v);
          break;
        }
        case 'e': {  // APPENDS
          std::vector<uint32_t> items = pop_mark();
          auto& l = items_of(top(), Kind::List, "APPENDS");
          l.insert(l.end(), items.begin(), items.end());
          break;
        }
        case 'X': push(string_value(le(4), true)); break;     // BINUNICODE
        case 0x8c: push(string_value(le(1), true)); break;    // SHORT_BINUNICODE
        case 0x8d: push(string_value(le(8), true)); break;    // BINUNICODE8
        case 'U':                                             // SHORT_BINSTRING
        case 'C': push(string_value(le(1), false)); break;    // SHORT_BINBYTES
        case 'B': push(string_value(le(4), false)); break;    // BINBYTES
        case 'J': push(make(Kind::Int, 0, static_cast<int32_t>(static_cast<uint32_t>(le(4))))); break;
        case 'K': push(make(Kind::Int, 0, static_cast<int64_t>(le(1)))); break;
        case 'M': push(make(Kind::Int, 0, static_cast<int64_t>(le(2)))); break;
        case 0x8a: {  // LONG1: little-endian two's complement of n bytes
          const uint64_t k = le(1);
          if (k > 8) {
            take(k);
            push(make(Kind::BigInt));
            break;
          }
          uint64_t v = k ? le(static_cast<size_t>(k)) : 0;
          if (k && k < 8 && (v >> (8 * k - 1)) & 1) v |= ~uint64_t{0} << (8 * k);  // sign-extend
          push(make(Kind::Int, 0, static_cast<int64_t>(v)));
          break;
        }
        case 0x8b:  // LONG4: the same with a 4-byte length (ints of more than 255 bytes)
          take(le(4));
          push(make(Kind::BigInt));
          break;
        case 'G': {  // BINFLOAT: big-endian IEEE double
          const uint8_t* b = take(8);
          uint64_t bits = 0;
          for (int i = 0; i < 8; ++i) bits = (bits << 8) | b[i];
          push(make(Kind::Float, 0, static_cast<int64_t>(bits)));
          break;
        }
        case 'N': push(make(Kind::None)); break;
        case 0x88: push(make(Kind::Bool, 0, 1)); break;
        case 0x89: push(make(Kind::Bool, 0, 0)); break;
        case 'q': memo_put(le(1)); break;
        case 'r': memo_put(le(4)); break;
        case 0x94: memo_put(memo_.size()); break;  // MEMOIZE
        case 'h': memo_get(le(1)); break;
        case 'j': memo_get(le(4)); break;
        case 'c': {  // GLOBAL
          std::string module = line();
          std::string name = line();
          push(global(module + "." + name));
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          const uint32_t name = pop(), module = pop();
          if (obj(name).kind != Kind::Str || obj(module).kind != Kind::Str) bad("STACK_GLOBAL of a non-string");
          push(global(strs_[obj(module).aux] + "." + strs_[obj(name).aux]));
          break;
        }
        case 'R': {  // REDUCE
          const uint32_t args = pop(), f = pop();
          push(reduce(f, args));
          break;
        }
        case 'Q': push(persistent(pop())); break;  // BINPERSID
        case 'b': {  // BUILD: a dict's attributes (state_dict()'s _metadata), dropped
          pop();
          if (obj(top()).kind != Kind::Dict)
            bad(std::string("BUILD of a ") + kind_name(obj(top()).kind) + " (only a dict's attributes are accepted)");
          break;
        }
        case '0':  // POP: a value, or the MARK when the stack above it is empty (as CPython)
          if (stack_.size() > base())
            stack_.pop_back();
          else
            pop_mark();
          break;
        case '1': pop_mark(); break;  // POP_MARK
        case '2': push(top()); break;  // DUP
        default: {
          const char* name = opcode_name(op);
          static const char* hex = "0123456789abcdef";
          const std::string code = std::string("0x") + hex[op >> 4] + hex[op & 15];
          bad(std::string("opcode ") + (name ? std::string(name) + " (" + code + ")" : "byte " + code) +
              " is not read: torch.save's tensors need only dicts, lists, tuples, strings, numbers and the "
              "tensor globals; nothing in the file is executed");
        }
      }
    }
  }

  uint32_t global(const std::string& full) {
    const uint32_t name = static_cast<uint32_t>(strs_.size());
    strs_.push_back(full);
    auto make_global = [&](Global g, int64_t v = 0) { return make(Kind::Global, name, v, g); };
    if (full == "collections.OrderedDict") return make_global(Global::OrderedDict);
    if (full == "torch._utils._rebuild_tensor_v2") return make_global(Global::RebuildTensorV2);
    if (full == "torch._utils._rebuild_tensor") return make_global(Global::RebuildTensor);
    if (full == "torch._utils._rebuild_parameter") return make_global(Global::RebuildParameter);
    if (full == "torch._utils._rebuild_parameter_with_state") return make_global(Global::RebuildParameterState);
    const std::string cls = full.rfind("torch.", 0) == 0 ? full.substr(6) : std::string();
    if (const StorageType* t = storage_type_by_name(cls == "storage.UntypedStorage" ? "UntypedStorage" : cls))
      return make_global(Global::StorageClass, t - storage_types().data());
    bad("the pickle names the global " + printable(full) +
        ", which is not read: only collections.OrderedDict, torch._utils._rebuild_tensor_v2 (and "
        "_rebuild_tensor, _rebuild_parameter) and torch's storage types are (nothing in the file is "
        "imported or executed)");
  }

  int64_t int_arg(uint32_t i, const char* what) {
    if (obj(i).kind != Kind::Int && obj(i).kind != Kind::Bool)
      bad(std::string(what) + " is a " + kind_name(obj(i).kind) + ", not an int");
    return obj(i).v;
  }
  std::vector<uint64_t> dims_arg(uint32_t i, const char* what) {
    if (obj(i).kind != Kind::Tuple && obj(i).kind != Kind::List)
      bad(std::string("a tensor's ") + what + " is a " + kind_name(obj(i).kind) + ", not a tuple");
    const std::vector<uint32_t>& items = conts_[obj(i).aux];
    if (items.size() > kMaxRank)
      bad("a tensor's " + std::string(what) + " has more than " + std::to_string(kMaxRank) + " dimensions");
    std::vector<uint64_t> out;
    for (uint32_t d : items) {
      const int64_t v = int_arg(d, what);
      if (v < 0) bad(std::string("a tensor's ") + what + " holds the negative value " + std::to_string(v));
      out.push_back(static_cast<uint64_t>(v));
    }
    return out;
  }

  uint32_t reduce(uint32_t f, uint32_t args_i) {
    const Obj& fo = obj(f);
    if (fo.kind != Kind::Global) bad(std::string("REDUCE of a ") + kind_name(fo.kind) + ", which is not callable");
    const std::string& fname = strs_[fo.aux];
    if (obj(args_i).kind != Kind::Tuple) bad("REDUCE of " + printable(fname) + " with arguments that are no tuple");
    const std::vector<uint32_t> args = conts_[obj(args_i).aux];
    auto want = [&](size_t lo, size_t hi) {
      if (args.size() < lo || args.size() > hi)
        bad("REDUCE of " + printable(fname) + " with " + std::to_string(args.size()) + " arguments");
    };
    switch (fo.global) {
      case Global::OrderedDict:
        want(0, 0);
        return make_container(Kind::Dict, {});
      case Global::RebuildParameter:
      case Global::RebuildParameterState:
        if (fo.global == Global::RebuildParameter) want(3, 3);
        else want(4, 4);
        if (obj(args[0]).kind != Kind::Tensor) bad("_rebuild_parameter of a " + std::string(kind_name(obj(args[0]).kind)));
        return args[0];  // the parameter's data: the tensor itself
      case Global::RebuildTensorV2:
      case Global::RebuildTensor: {
        if (fo.global == Global::RebuildTensorV2) want(6, 7);
        else want(4, 4);
        if (obj(args[0]).kind != Kind::Storage)
          bad("a tensor rebuilt from a " + std::string(kind_name(obj(args[0]).kind)) + ", not a storage");
        TensorObj t;
        t.storage = obj(args[0]).aux;
        const int64_t offset = int_arg(args[1], "a tensor's storage offset");
        if (offset < 0) bad("a tensor's storage offset is negative");
        t.offset = static_cast<uint64_t>(offset);
        t.shape = dims_arg(args[2], "shape");
        t.stride = dims_arg(args[3], "strides");
        if (t.shape.size() != t.stride.size())
          bad("a tensor of " + std::to_string(t.shape.size()) + " dimensions with " +
              std::to_string(t.stride.size()) + " strides");
        check_view(t);
        tensors_.push_back(std::move(t));
        return make(Kind::Tensor, static_cast<uint32_t>(tensors_.size() - 1));
      }
      case Global::StorageClass: break;
    }
    bad("REDUCE of " + printable(fname) + ", which is read only as a storage's type, never called");
  }

  // The view lies within its storage: offset + sum((size - 1) * stride) < numel, all without
  // overflow (a zero-size view touches nothing).
  void check_view(const TensorObj& t) const {
    const Storage& s = result_.storages[t.storage];
    uint64_t n = 1;
    for (uint64_t d : t.shape) {
      if (d != 0 && n > kMaxElements / d) bad("a tensor of shape " + shape_string(t.shape) + " has too many elements");
      n *= d;
    }
    if (n == 0) return;
    uint64_t last = t.offset;
    for (size_t k = 0; k < t.shape.size(); ++k) {
      const uint64_t d = t.shape[k] - 1, st = t.stride[k];
      if (st != 0 && d > (kMaxElements - last) / st) last = kMaxElements;
      else last += d * st;
      if (last >= kMaxElements) break;
    }
    if (last >= s.numel)
      bad("a tensor of shape " + shape_string(t.shape) + ", strides " + shape_string(t.stride) + " at offset " +
          std::to_string(t.offset) + " reaches beyond storage " + printable(s.key) + " of " +
          std::to_string(s.numel) + " elements");
  }

  // ('storage', StorageClass, key, location, numel): the storage; the same key twice is the same
  // storage (tensors sharing it are views of it) and must say the same.
  uint32_t persistent(uint32_t pid) {
    if (obj(pid).kind != Kind::Tuple) bad(std::string("a persistent id that is a ") + kind_name(obj(pid).kind) + ", not a tuple");
    const std::vector<uint32_t> f = conts_[obj(pid).aux];
    if (f.size() != 5 || obj(f[0]).kind != Kind::Str || strs_[obj(f[0]).aux] != "storage")
      bad("a persistent id that is not ('storage', type, key, location, size): only storages are read");
    if (obj(f[1]).kind != Kind::Global || obj(f[1]).global != Global::StorageClass)
      bad("a storage whose type is a " + std::string(kind_name(obj(f[1]).kind)) + ", not a torch storage class");
    if (obj(f[2]).kind != Kind::Str) bad("a storage whose key is not a string");
    if (obj(f[3]).kind != Kind::Str) bad("a storage whose location is not a string");
    const StorageType* type = &storage_types()[static_cast<size_t>(obj(f[1]).v)];
    const int64_t numel = int_arg(f[4], "a storage's size");
    if (numel < 0 || static_cast<uint64_t>(numel) > kMaxElements / type->size)
      bad("a storage of " + std::to_string(numel) + " elements");
    const std::string& key = strs_[obj(f[2]).aux];
    auto [it, fresh] = storage_index_.emplace(key, result_.storages.size());
    if (fresh) {
      result_.storages.push_back(Storage{key, type, static_cast<uint64_t>(numel)});
    } else {
      const Storage& s = result_.storages[it->second];
      if (s.type != type || s.numel != static_cast<uint64_t>(numel))
        bad("storage " + printable(key) + " is declared twice, as " + std::to_string(s.numel) + " " + s.type->torch_name +
            " and as " + std::to_string(numel) + " " + type->torch_name);
    }
    return make(Kind::Storage, static_cast<uint32_t>(it->second));
  }

  // ---------------------------------------------------------------------------------------------
  // The walk: tensors named by their path in the object.

  void walk(uint32_t i, std::string& name, size_t depth, bool is_root, const std::string& root_name) {
    if (++visits_ > 4 * objs_.size() + 4096)
      fail(ErrorCode::Input, where_ + ": the object refers to its parts more than " +
                                 std::to_string(4 * objs_.size() + 4096) +
                                 " times (containers shared over and over, a 'billion laughs'): refused");
    if (depth > kMaxDepth)
      fail(ErrorCode::Input, where_ + ": containers nested more than " + std::to_string(kMaxDepth) +
                                 " deep (or a container that holds itself), at " +
                                 printable(name.size() > 60 ? name.substr(0, 60) + "..." : name));
    const Obj& o = obj(i);
    switch (o.kind) {
      case Kind::Tensor: {
        const TensorObj& t = tensors_[o.aux];
        result_.tensors.push_back(TensorRef{is_root ? root_name : name, t.storage, t.offset, t.shape, t.stride});
        return;
      }
      case Kind::Dict:
      case Kind::List:
      case Kind::Tuple: {
        const size_t n = conts_[o.aux].size(), step = o.kind == Kind::Dict ? 2 : 1;
        for (size_t k = 0; k < n; k += step) {
          const std::vector<uint32_t>& items = conts_[o.aux];  // (a reference per step: walk may not grow conts_)
          const uint32_t value = items[k + step - 1];
          std::string part;
          if (o.kind != Kind::Dict) {
            part = std::to_string(k);
          } else {
            const Obj& key = obj(items[k]);
            if (key.kind == Kind::Str) part = strs_[key.aux];
            else if (key.kind == Kind::Int) part = std::to_string(key.v);
            else if (key.kind == Kind::Bool) part = key.v ? "True" : "False";
            else if (key.kind == Kind::None) part = "None";
            else if (!holds_data(value)) part = "?";
            else
              fail(ErrorCode::Input, where_ + ": a dict key of type " + kind_name(key.kind) + " under " +
                                         printable(name) + " (tensor names are made of str and int keys)");
          }
          const size_t keep = name.size();
          if (!is_root) name += '.';
          name += part;
          if (name.size() > kMaxNameBytes)
            fail(ErrorCode::Input, where_ + ": a tensor name of more than " + std::to_string(kMaxNameBytes) +
                                       " bytes, " + printable(name.substr(0, 200)) + "...");
          walk(value, name, depth + 1, false, root_name);
          name.resize(keep);
        }
        return;
      }
      default:
        if (result_.skipped++ == 0) result_.first_skipped = is_root ? std::string("the whole object") : name;
        return;
    }
  }

  bool holds_data(uint32_t i) const {
    const Kind k = obj(i).kind;
    return k == Kind::Tensor || k == Kind::Dict || k == Kind::List || k == Kind::Tuple;
  }

  const uint8_t* p_;
  size_t n_;
  std::string where_;
  size_t pos_ = 0, op_pos_ = 0;
  std::vector<Obj> objs_;
  std::vector<std::string> strs_;
  std::vector<std::vector<uint32_t>> conts_;
  std::vector<TensorObj> tensors_;
  std::unordered_map<uint64_t, uint32_t> memo_;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<std::string, size_t> storage_index_;
  uint64_t visits_ = 0;
  Result result_;
};

}  // namespace

Result read_torch_pickle(const uint8_t* p, size_t n, const std::string& where, const std::string& root_name) {
  return Interpreter(p, n, where).run(root_name);
}

}  // namespace gradcodec::formats::pickle
