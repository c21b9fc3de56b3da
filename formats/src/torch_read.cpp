// SPDX-License-Identifier: BSD-3-Clause
// torch.save files (.pt, .pth, .bin): the zip archive PyTorch writes since 1.6.
//
// Layout: members ARCHIVE/data.pkl (the pickled object, protocol 2 by default), ARCHIVE/data/KEY
// (one per storage: its elements, stored, 64-byte aligned), ARCHIVE/version, and since PyTorch
// 2.1 ARCHIVE/byteorder ("little" or "big": the byte order of every storage; absent means
// little). ARCHIVE is any directory name (the file's stem when torch.save wrote it).
//
// Reading. open() lists the central directory (zip_read.hpp, on the mapping), checks data.pkl's
// CRC-32 and interprets it with the restricted pickle reader (pickle_restricted.hpp: nothing is
// imported, called or executed), then checks every storage the pickle names against its member:
// stored (torch never compresses), exactly numel x element size bytes. read(i) checks a
// storage's CRC-32 the first time one of its tensors is read, then returns a view into the
// mapping when the tensor is contiguous, little-endian and aligned (torch aligns storages to 64
// bytes), else a copy: strided views are gathered into C order, big-endian floats swapped.
// Decisions:
// - Tensor names are paths in the pickled object ('.'-joined dict keys and list/tuple indices:
//   {"layer": [g0, g1]} gives layer.0, layer.1); a tensor saved on its own is named after the
//   file's stem, as an .npy. Values that are not tensors (a step counter, a learning rate) are
//   named in one note and not read.
// - Several tensors may share a storage (views, tied weights): each is read on its own.
// - Integer, bool and complex tensors are DType::Other with their numpy descr, like the other
//   readers' non-floating arrays (skipped, or --pass-through).
// - A view with more elements than its storage (stride 0, as expand() makes) is read when it
//   needs at most kMaxRepeatBytes; more is refused before anything is allocated.
// - TorchScript archives (torch.jit.save: code/ and constants.pkl beside data.pkl) and the
//   legacy format (a bare pickle stream, PyTorch < 1.6 or _use_new_zipfile_serialization=False)
//   are refused, saying how to re-save them.
#include "pickle_restricted.hpp"
#include "readers.hpp"
#include "safetensors_common.hpp"
#include "zip_read.hpp"

#include <gradcodec/error.hpp>

#include <zlib.h>

#include <atomic>
#include <bit>
#include <cstring>
#include <filesystem>
#include <unordered_map>

namespace gradcodec::formats {

namespace {

using safetensors::printable;

constexpr uint64_t kMaxRepeatBytes = uint64_t{256} << 20;  // a view larger than its storage

std::string stem_of(const std::string& path) {
  if (path == "-" || path == "<stdin>") return "tensor";
  std::string s = std::filesystem::path(path).stem().string();
  return s.empty() ? std::string("tensor") : s;
}

DType dtype_of(const pickle::StorageType& t) {
  const std::string n = t.torch_name;
  if (n == "FloatStorage") return DType::F32;
  if (n == "HalfStorage") return DType::F16;
  if (n == "BFloat16Storage") return DType::BF16;
  if (n == "DoubleStorage") return DType::F64;
  return DType::Other;
}

uint32_t crc_of(const uint8_t* p, uint64_t n) {
  uLong crc = crc32_z(0, nullptr, 0);
  return static_cast<uint32_t>(crc32_z(crc, p, static_cast<z_size_t>(n)));
}

class TorchReader final : public SnapshotReader {
 public:
  explicit TorchReader(std::shared_ptr<const InputFile> file) : file_(std::move(file)) {
    const std::string& path = file_->path();
    auto bad = [&](const std::string& what) { fail(ErrorCode::Input, path + ": " + what); };
    const std::vector<ZipMember> members = list_zip(file_->data(), file_->size(), path);
    if (members.empty()) bad("an empty zip archive, not a torch.save file");
    const std::string& first = members.front().name;
    const std::string prefix = first.substr(0, first.find('/') + 1);  // "ARCHIVE/"
    std::unordered_map<std::string, const ZipMember*> by_name;
    for (const ZipMember& m : members) {
      by_name.emplace(m.name, &m);
      if (prefix.size() > 1 && (m.name == prefix + "constants.pkl" || m.name.rfind(prefix + "code/", 0) == 0))
        bad("a TorchScript archive (torch.jit.save), which holds code and is not read; save the tensors "
            "with torch.save(model.state_dict(), path) (or the gradients as a dict of tensors)");
    }
    auto member = [&](const std::string& name) -> const ZipMember* {
      auto it = by_name.find(prefix + name);
      return it == by_name.end() ? nullptr : it->second;
    };
    const ZipMember* pkl = prefix.size() > 1 ? member("data.pkl") : nullptr;
    if (!pkl) bad("a zip archive without ARCHIVE/data.pkl: neither a torch.save file nor an NPZ");
    stored_member(*pkl);
    if (crc_of(file_->data() + pkl->data_offset, pkl->size) != pkl->crc) bad("member '" + pkl->name + "': CRC-32 mismatch");
    if (const ZipMember* order = member("byteorder")) {
      stored_member(*order);
      const std::string text(reinterpret_cast<const char*>(file_->data() + order->data_offset), order->size);
      if (text == "big") big_endian_ = true;
      else if (text != "little") bad("member '" + order->name + "' says " + printable(text) + ", not little or big");
    }

    pickle::Result r = pickle::read_torch_pickle(file_->data() + pkl->data_offset, pkl->size,
                                                 path + ": data.pkl", stem_of(path));
    for (const pickle::Storage& s : r.storages) {
      const ZipMember* m = member("data/" + s.key);
      if (!m) bad("storage " + printable(s.key) + " has no member " + printable(prefix + "data/" + s.key));
      stored_member(*m);
      const uint64_t need = s.numel * s.type->size;
      if (m->size != need)
        bad("member '" + m->name + "' holds " + std::to_string(m->size) + " bytes, but its storage of " +
            std::to_string(s.numel) + " " + s.type->torch_name + " elements needs " + std::to_string(need));
      storages_.push_back(Store{m->data_offset, m->crc, s.numel * s.type->size, s.type});
    }
    verified_ = std::make_unique<std::atomic<bool>[]>(storages_.size());
    for (pickle::TensorRef& t : r.tensors) {
      const Store& s = storages_[t.storage];
      uint64_t n = 1;
      for (uint64_t d : t.shape) n *= d;  // (at most 2^62: checked by the pickle reader)
      if (n > s.bytes / s.type->size && n > kMaxRepeatBytes / s.type->size)
        bad("tensor " + printable(t.name) + " of shape " + shape_string(t.shape) + " repeats the " +
            std::to_string(s.bytes / s.type->size) + " elements of its storage into " + std::to_string(n) +
            " (strides " + shape_string(t.stride) + "), more than " + std::to_string(kMaxRepeatBytes >> 20) + " MiB");
      TensorInfo info;
      info.name = std::move(t.name);
      info.dtype = dtype_of(*s.type);
      info.descr = s.type->descr;
      if (big_endian_ && s.type->size > 1) {
        if (!info.descr.empty()) info.descr[0] = '>';
        info.big_endian = is_float(info.dtype);
      }
      info.shape = std::move(t.shape);
      infos_.push_back(std::move(info));
      views_.push_back(View{t.storage, t.offset, std::move(t.stride)});
    }
    if (r.skipped)
      notes_.push_back(std::to_string(r.skipped) + " value(s) that are not tensors (the first: " +
                       printable(r.first_skipped) + ") are not read");
  }

  Format format() const override { return Format::Torch; }
  const std::string& path() const override { return file_->path(); }
  const std::vector<TensorInfo>& arrays() const override { return infos_; }
  std::vector<std::string> notes() const override { return notes_; }

  Tensor read(size_t i) override {
    if (i >= infos_.size()) fail(ErrorCode::Internal, path() + ": array index " + std::to_string(i) + " out of range");
    const View& v = views_[i];
    const Store& s = storages_[v.storage];
    if (!verified_[v.storage].load(std::memory_order_acquire)) {
      if (crc_of(file_->data() + s.offset, s.bytes) != s.crc)
        fail(ErrorCode::Input, path() + ": storage of tensor " + printable(infos_[i].name) + ": CRC-32 mismatch");
      verified_[v.storage].store(true, std::memory_order_release);
    }
    Tensor t;
    t.info = infos_[i];
    const std::vector<uint64_t>& shape = t.info.shape;
    const size_t elem = s.type->size;
    const uint64_t n = shape_elements(shape);
    if (n == 0) {
      t.data = Buffer(std::vector<uint8_t>());
      return t;
    }
    const bool swap = (big_endian_ != (std::endian::native == std::endian::big)) && is_float(t.info.dtype);
    bool contiguous = true;
    for (size_t k = shape.size(), expect = 1; k-- > 0;) {
      if (shape[k] != 1 && v.stride[k] != expect) contiguous = false;
      expect *= shape[k];
    }
    const uint8_t* base = file_->data() + s.offset;
    if (contiguous && !swap && reinterpret_cast<uintptr_t>(base + v.offset * elem) % elem == 0) {
      t.data = file_->slice(s.offset + v.offset * elem, n * elem);
      return t;
    }
    std::vector<uint8_t> out(n * elem);
    if (contiguous) {
      std::memcpy(out.data(), base + v.offset * elem, out.size());
    } else {  // gather in C order: an odometer over the indices, the innermost dimension a loop
      const size_t rank = shape.size();
      std::vector<uint64_t> idx(rank, 0);
      const uint64_t inner = shape[rank - 1], inner_stride = v.stride[rank - 1] * elem;
      uint8_t* dst = out.data();
      uint64_t at = v.offset * elem;  // byte offset of idx (innermost index 0) in the storage
      for (uint64_t done = 0; done < n; done += inner) {
        const uint8_t* src = base + at;
        for (uint64_t j = 0; j < inner; ++j, dst += elem) std::memcpy(dst, src + j * inner_stride, elem);
        for (size_t k = rank - 1; k-- > 0;) {  // next index of the outer dimensions
          if (++idx[k] < shape[k]) {
            at += v.stride[k] * elem;
            break;
          }
          at -= (shape[k] - 1) * v.stride[k] * elem;
          idx[k] = 0;
        }
      }
    }
    if (swap) safetensors::byteswap_in_place(out.data(), out.size(), elem);
    t.data = Buffer(std::move(out));
    return t;
  }

 private:
  struct Store {
    uint64_t offset, crc, bytes;
    const pickle::StorageType* type;
  };
  struct View {
    size_t storage;
    uint64_t offset;
    std::vector<uint64_t> stride;
  };

  void stored_member(const ZipMember& m) const {
    if (m.method != 0 || m.comp_size != m.size)
      fail(ErrorCode::Input, file_->path() + ": member '" + m.name + "' is compressed (method " + std::to_string(m.method) +
                                 "); torch.save stores its members uncompressed");
  }

  std::shared_ptr<const InputFile> file_;
  bool big_endian_ = false;
  std::vector<Store> storages_;
  std::unique_ptr<std::atomic<bool>[]> verified_;  // storage CRC checked (once, whichever thread)
  std::vector<TensorInfo> infos_;
  std::vector<View> views_;
  std::vector<std::string> notes_;
};

}  // namespace

std::unique_ptr<SnapshotReader> open_torch(std::shared_ptr<const InputFile> file) {
  return std::make_unique<TorchReader>(std::move(file));
}

}  // namespace gradcodec::formats
