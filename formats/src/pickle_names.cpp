// SPDX-License-Identifier: BSD-3-Clause
// The names the restricted pickle reader and the .pt writer share (contract in
// pickle_restricted.hpp): torch's storage classes with their element types, and the pickle
// opcodes' names for error messages.
#include "pickle_restricted.hpp"

#include <array>
#include <cstring>

namespace gradcodec::formats::pickle {

namespace {

constexpr std::array<StorageType, 13> kStorageTypes{{
    {"FloatStorage", "<f4", 4, true},
    {"HalfStorage", "<f2", 2, true},
    {"BFloat16Storage", "", 2, true},
    {"DoubleStorage", "<f8", 8, true},
    {"LongStorage", "<i8", 8, false},
    {"IntStorage", "<i4", 4, false},
    {"ShortStorage", "<i2", 2, false},
    {"CharStorage", "|i1", 1, false},
    {"ByteStorage", "|u1", 1, false},
    {"BoolStorage", "|b1", 1, false},
    {"ComplexFloatStorage", "<c8", 8, false},
    {"ComplexDoubleStorage", "<c16", 16, false},
    {"UntypedStorage", "|u1", 1, false},  // torch >= 2.0 for a storage saved on its own: bytes
}};

}  // namespace

std::span<const StorageType> storage_types() { return kStorageTypes; }

const StorageType* storage_type_by_name(const std::string& name) {
  for (const StorageType& t : kStorageTypes)
    if (name == t.torch_name) return &t;
  return nullptr;
}

const StorageType* storage_type_by_descr(const std::string& descr) {
  for (const StorageType& t : kStorageTypes)
    if (descr == t.descr && std::strcmp(t.torch_name, "UntypedStorage") != 0) return &t;
  return nullptr;
}

// The pickle opcodes by byte, for error messages (Python's pickletools names).
const char* opcode_name(uint8_t op) {
  switch (op) {
    case '(': return "MARK";
    case '.': return "STOP";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 'F': return "FLOAT";
    case 'I': return "INT";
    case 'J': return "BININT";
    case 'K': return "BININT1";
    case 'L': return "LONG";
    case 'M': return "BININT2";
    case 'N': return "NONE";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 'R': return "REDUCE";
    case 'S': return "STRING";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";
    case 'X': return "BINUNICODE";
    case 'a': return "APPEND";
    case 'b': return "BUILD";
    case 'c': return "GLOBAL";
    case 'd': return "DICT";
    case '}': return "EMPTY_DICT";
    case 'e': return "APPENDS";
    case 'g': return "GET";
    case 'h': return "BINGET";
    case 'i': return "INST";
    case 'j': return "LONG_BINGET";
    case 'l': return "LIST";
    case ']': return "EMPTY_LIST";
    case 'o': return "OBJ";
    case 'p': return "PUT";
    case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT";
    case 's': return "SETITEM";
    case 't': return "TUPLE";
    case ')': return "EMPTY_TUPLE";
    case 'u': return "SETITEMS";
    case 'G': return "BINFLOAT";
    case 0x80: return "PROTO";
    case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 0x8a: return "LONG1";
    case 0x8b: return "LONG4";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 0x8c: return "SHORT_BINUNICODE";
    case 0x8d: return "BINUNICODE8";
    case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX";
    case 0x93: return "STACK_GLOBAL";
    case 0x94: return "MEMOIZE";
    case 0x95: return "FRAME";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return nullptr;
  }
}

}  // namespace gradcodec::formats::pickle
