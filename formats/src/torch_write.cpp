// SPDX-License-Identifier: BSD-3-Clause
// decode -o OUT.pt (.pth): a torch.save file of a dict name -> tensor, as PyTorch >= 1.6 writes
// it by default, that torch.load(OUT, weights_only=True) reads.
//
// Layout: archive/data/0, archive/data/1, ... (one storage per tensor, in the order added, its
// elements little-endian, the member's data 64-byte aligned as PyTorch aligns it), then
// archive/data.pkl (pickle_restricted.hpp: write_torch_pickle), archive/byteorder ("little") and
// archive/version ("3", what PyTorch 1.6 to 2.x write). PyTorch's reader finds members by name
// (the archive's directory from the first member), so the storages go first and each is written
// as it is added: nothing is held but the names and shapes for the pickle.
// dtypes: float32/16/64 and bfloat16 as Float/Half/Double/BFloat16Storage; other arrays whose
// numpy descr torch has (bool, int8..int64, uint8, complex64/128; big-endian ones swapped) as
// theirs; any other dtype is refused (Usage) naming the tensor, before the archive has its bytes.
#include "pickle_restricted.hpp"
#include "readers.hpp"
#include "safetensors_common.hpp"
#include "zip_write.hpp"

#include <gradcodec/error.hpp>

#include <zlib.h>

#include <set>

namespace gradcodec::formats {

namespace {

using safetensors::printable;

constexpr uint64_t kAlign = 64;
const std::string kArchive = "archive/";

class TorchWriter final : public SnapshotWriter {
 public:
  TorchWriter(const std::string& path, bool overwrite)
      : path_(path), out_(path, overwrite), zip_([this](const void* p, size_t n) { out_.write(p, n); }, path) {}

  void add(const Tensor& t) override {
    if (finished_) fail(ErrorCode::Internal, path_ + ": add() after finish()");
    if (failed_) fail(ErrorCode::Internal, path_ + ": add() after a failed add()");
    size_t swap = 0;
    const pickle::StorageType* type = storage_type(t.info, &swap);
    const uint64_t bytes = shape_elements(t.shape()) * type->size;
    if (bytes != t.data.size())
      fail(ErrorCode::Internal, path_ + ": tensor " + printable(t.name()) + " holds " + std::to_string(t.data.size()) +
                                    " bytes, its shape needs " + std::to_string(bytes));
    if (!names_.insert(t.name()).second)
      fail(ErrorCode::Usage, path_ + ": two tensors named " + printable(t.name()));
    try {
      const std::string member = kArchive + "data/" + std::to_string(tensors_.size());
      if (swap == 0) {
        zip_.begin(member, bytes, crc(t.data.data(), bytes), kAlign);
        zip_.data(t.data.data(), bytes);
      } else {  // a big-endian source descr: torch's storages hold little-endian elements
        std::vector<uint8_t> le(t.data.data(), t.data.data() + bytes);
        safetensors::byteswap_in_place(le.data(), le.size(), swap);
        zip_.begin(member, bytes, crc(le.data(), bytes), kAlign);
        zip_.data(le.data(), bytes);
      }
    } catch (...) {
      failed_ = true;  // the archive may hold part of this member: complete() refuses
      throw;
    }
    tensors_.push_back(pickle::TensorToWrite{t.name(), type->torch_name, t.shape()});
  }

  void complete() override {
    if (finished_) fail(ErrorCode::Internal, path_ + ": complete() called twice");
    if (failed_) fail(ErrorCode::Internal, path_ + ": complete() after a failed add()");
    const std::vector<uint8_t> pkl = pickle::write_torch_pickle(tensors_);
    put(kArchive + "data.pkl", pkl.data(), pkl.size());
    put(kArchive + "byteorder", "little", 6);
    put(kArchive + "version", "3\n", 2);
    zip_.finish();
    out_.seal();
    finished_ = true;
  }
  void publish() override {
    if (!finished_) fail(ErrorCode::Internal, path_ + ": publish() before complete()");
    out_.publish();
  }

 private:
  static uint32_t crc(const void* p, uint64_t n) {
    uLong c = crc32_z(0, nullptr, 0);
    if (n) c = crc32_z(c, static_cast<const Bytef*>(p), static_cast<z_size_t>(n));
    return static_cast<uint32_t>(c);
  }

  void put(const std::string& name, const void* p, uint64_t n) {
    zip_.begin(name, n, crc(p, n), kAlign);
    zip_.data(p, static_cast<size_t>(n));
  }

  // The storage class of a tensor; *swap_unit > 0 when its bytes are big-endian (descr '>').
  const pickle::StorageType* storage_type(const TensorInfo& info, size_t* swap_unit) const {
    *swap_unit = 0;
    const char* name = nullptr;
    switch (info.dtype) {
      case DType::F32: name = "FloatStorage"; break;
      case DType::F16: name = "HalfStorage"; break;
      case DType::BF16: name = "BFloat16Storage"; break;
      case DType::F64: name = "DoubleStorage"; break;
      case DType::Other: break;
    }
    if (name) return pickle::storage_type_by_name(name);
    std::string descr = info.descr;
    const bool big = descr.size() > 1 && descr[0] == '>';
    if (big || (descr.size() > 1 && descr[0] == '=')) descr[0] = '<';
    const pickle::StorageType* t = pickle::storage_type_by_descr(descr);
    if (!t && descr.size() > 1 && descr[0] == '<') {  // '<u1' or '<b1' for '|u1', '|b1'
      std::string one_byte = descr;
      one_byte[0] = '|';
      t = pickle::storage_type_by_descr(one_byte);
    }
    if (!t)
      fail(ErrorCode::Usage, path_ + ": tensor " + printable(info.name) + ": dtype " + printable(info.descr) +
                                 " has no torch storage type (torch holds bool, int8-int64, uint8, "
                                 "float16/32/64, bfloat16, complex64/128)");
    if (big && t->size > 1) *swap_unit = t->descr[1] == 'c' ? t->size / 2 : t->size;
    return t;
  }

  std::string path_;
  AtomicOutput out_;
  ZipStoredWriter zip_;
  std::set<std::string> names_;
  std::vector<pickle::TensorToWrite> tensors_;
  bool finished_ = false, failed_ = false;
};

}  // namespace

std::unique_ptr<SnapshotWriter> create_torch(const std::string& path, bool overwrite) {
  return std::make_unique<TorchWriter>(path, overwrite);
}

}  // namespace gradcodec::formats
