// SPDX-License-Identifier: BSD-3-Clause
// The only pickle code of gradcodec: a restricted reader for the data.pkl of a torch.save zip
// archive, and the writer of the one pickle layout decode's .pt output needs.
//
// The reader is not an unpickler. It interprets a fixed set of opcodes as pure data construction
// (no import, no call, no evaluation of anything named in the file) and accepts only the globals
// torch.load(..., weights_only=True) needs for tensors in containers:
//   collections.OrderedDict                      REDUCE with () makes an empty dict
//   torch._utils._rebuild_tensor_v2 / _rebuild_tensor / _rebuild_parameter
//                                                REDUCE records a tensor (storage, offset, shape,
//                                                strides); nothing is rebuilt
//   torch.<Type>Storage, torch.UntypedStorage    only as the type in a ('storage', type, key,
//                                                location, numel) persistent id (BINPERSID)
// Any other global is refused when the GLOBAL opcode names it, any other opcode (INST, OBJ,
// NEWOBJ, EXT1/2/4, PERSID, the text protocol's opcodes, ...) when it is met, REDUCE of anything
// but the callables above, BUILD on anything but a dict: Error(Input) naming the global or the
// opcode and its offset.
//
// Bounded whatever the bytes: at most kMaxObjects values, kMaxMemo memo entries, kMaxStack values
// on the stack, kMaxMarks nested MARKs, strings within the pickle; the walk that names the
// tensors goes at most kMaxDepth containers deep (a container holding itself is refused, not
// followed) and visits at most a few times the number of values (a "billion laughs" of shared
// lists is refused). Values live in one arena owned by the call, so nothing is freed recursively.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gradcodec::formats::pickle {

inline constexpr size_t kMaxObjects = size_t{1} << 22;  // values made (each opcode makes at most one)
inline constexpr size_t kMaxMemo = size_t{1} << 20;     // memo entries
inline constexpr size_t kMaxStack = size_t{1} << 20;    // values on the stack, all MARK levels together
inline constexpr size_t kMaxMarks = 1000;               // MARKs open at once (Python's recursion limit)
inline constexpr size_t kMaxDepth = 512;                // containers nested on the way to a tensor
inline constexpr size_t kMaxRank = 64;                  // dimensions of a tensor
inline constexpr size_t kMaxNameBytes = 65535;          // a tensor name, as the container's limit

// The element type a storage class names (torch.FloatStorage -> "Float", 4 bytes, "<f4").
struct StorageType {
  const char* torch_name;  // "FloatStorage", "BFloat16Storage", "UntypedStorage"
  const char* descr;       // numpy descr, little-endian ("<f4", "|b1"); "" for bfloat16
  size_t size;             // bytes per element
  bool is_float;           // float16, bfloat16, float32, float64
};
// By the storage class name without "torch." ("FloatStorage"); nullptr when not a plain
// (non-quantized) storage type.
const StorageType* storage_type_by_name(const std::string& name);
// The typed storage class holding elements of this little-endian numpy descr ("<f4", "|b1"; ""
// is bfloat16); nullptr when torch has none (unsigned integers wider than a byte, structured).
const StorageType* storage_type_by_descr(const std::string& descr);
// Every storage class the reader knows; a storage class is kept as its index here.
std::span<const StorageType> storage_types();
// Python's pickletools name of opcode `op` ("BINUNICODE"), for error messages; nullptr for a
// byte that is no opcode.
const char* opcode_name(uint8_t op);

struct Storage {
  std::string key;          // the member ARCHIVE/data/KEY
  const StorageType* type;  // element type
  uint64_t numel = 0;       // elements, as the persistent id declares
};

struct TensorRef {
  std::string name;              // the path in the pickled object, parts joined with '.'
  size_t storage = 0;            // index into Result::storages
  uint64_t offset = 0;           // storage offset, in elements
  std::vector<uint64_t> shape;   // C order
  std::vector<uint64_t> stride;  // in elements, one per dimension
};

struct Result {
  std::vector<Storage> storages;  // one per distinct key, in order of first mention
  std::vector<TensorRef> tensors; // in the object's order: dicts by insertion, lists by index
  // Values in the object that are not tensors (int, float, str, bool, None, a bare storage),
  // counted, with the name of the first, for a note to the user.
  size_t skipped = 0;
  std::string first_skipped;
};

// Interprets the pickle `p` of `n` bytes (data.pkl). Tensor names are paths in the object: dict
// keys (str, or int and bool in decimal / True / False), list and tuple indices, joined with '.';
// a tensor that is the whole object is named `root_name`. A storage key mentioned twice must
// declare the same type and numel. `where` prefixes every error message ("<path>: data.pkl").
// Checks only what the pickle says: the caller checks the storages against the archive.
Result read_torch_pickle(const uint8_t* p, size_t n, const std::string& where, const std::string& root_name);

// Writes the pickle torch.save (protocol 2) writes for a dict of tensors {name: tensor}, each on
// its own storage key "0", "1", ... of `storage_class` ("FloatStorage", ...) holding exactly its
// elements, contiguous: EMPTY_DICT, MARK, then per tensor its name, the GLOBAL
// torch._utils._rebuild_tensor_v2, the ('storage', class, key, 'cpu', numel) persistent id,
// offset 0, shape, C strides, False, an empty collections.OrderedDict, REDUCE; SETITEMS, STOP.
// Only opcodes torch 1.13's weights_only unpickler knows are written.
struct TensorToWrite {
  std::string name;
  const char* storage_class;
  std::vector<uint64_t> shape;
};
std::vector<uint8_t> write_torch_pickle(const std::vector<TensorToWrite>& tensors);

}  // namespace gradcodec::formats::pickle
