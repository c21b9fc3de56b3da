// SPDX-License-Identifier: BSD-3-Clause
// safetensors writer (https://github.com/huggingface/safetensors, format README; the layout is
// described in safetensors_read.cpp).
//
// Writer decisions: entries in the order tensors were added with contiguous offsets in that order,
// "__metadata__" first: the input's (set_metadata) or {"format": "pt"} as the reference PyTorch
// writer does, header padded with spaces to a multiple of 8 bytes, through an AtomicOutput. With the tensors announced
// (SnapshotWriter::expect) the header is written first and each tensor as it is added; otherwise
// the tensors are held and everything is written in finish().
// TensorInfo::big_endian is dropped (the bytes in memory are little-endian already); Other tensors
// whose descr is big-endian (">i4") are byte-swapped to the little-endian safetensors dtype.
#include "readers.hpp"
#include "safetensors_common.hpp"
#include "text.hpp"

#include <gradcodec/error.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace gradcodec::formats {

namespace {

using namespace safetensors;

// ---------------------------------------------------------------------------------------------
// Writer

class SafetensorsWriter final : public SnapshotWriter {
 public:
  SafetensorsWriter(const std::string& path, bool overwrite) : path_(path), out_(path, overwrite) {}

  // The header names every tensor's offset, so it is written first: with the tensors announced
  // it is written now and each tensor's bytes go out as it is added (nothing is held); without,
  // the tensors are held until finish().
  void set_metadata(std::vector<std::pair<std::string, std::string>> metadata) override {
    if (finished_ || streaming_ || !items_.empty())
      fail(ErrorCode::Internal, path_ + ": set_metadata() after expect() or add()");
    for (const auto& [k, v] : metadata)
      if (!valid_utf8(reinterpret_cast<const uint8_t*>(k.data()), k.size()) ||
          !valid_utf8(reinterpret_cast<const uint8_t*>(v.data()), v.size()))
        fail(ErrorCode::Usage, path_ + ": __metadata__ entry " + printable(k) + " is not valid UTF-8");
    metadata_ = std::move(metadata);
  }

  void expect(const std::vector<TensorInfo>& infos) override {
    if (finished_ || streaming_ || !items_.empty()) fail(ErrorCode::Internal, path_ + ": expect() after add()");
    for (const TensorInfo& info : infos) items_.push_back(item_for(info.name, info, nullptr));
    write_header();
    streaming_ = true;
  }

  void add(const Tensor& t) override {
    if (finished_) fail(ErrorCode::Internal, path_ + ": add() after finish()");
    if (!streaming_) {
      items_.push_back(item_for(t.name(), t.info, &t));
      items_.back().data = t.data;
      return;
    }
    if (next_ >= items_.size())
      fail(ErrorCode::Internal, path_ + ": tensor " + printable(t.name()) + " was not announced");
    const Item& it = items_[next_];
    const Item got = item_for_announced(t);
    if (got.name != it.name || got.shape != it.shape || got.dtype != it.dtype || got.nbytes != it.nbytes)
      fail(ErrorCode::Internal, path_ + ": tensor " + printable(t.name()) + " differs from the one announced (" +
                                    printable(it.name) + ")");
    write_data(it, t.data);
    ++next_;
  }

  void complete() override {
    if (finished_) fail(ErrorCode::Internal, path_ + ": complete() called twice");
    if (streaming_) {
      if (next_ != items_.size())
        fail(ErrorCode::Internal, path_ + ": " + std::to_string(items_.size() - next_) + " announced tensor(s) not added");
    } else {
      write_header();
      for (const Item& it : items_) write_data(it, it.data);
    }
    out_.seal();
    finished_ = true;
    items_.clear();
  }
  void publish() override {
    if (!finished_) fail(ErrorCode::Internal, path_ + ": publish() before complete()");
    out_.publish();
  }

 private:
  struct Item {
    std::string name;
    const StDtype* dtype = nullptr;
    size_t swap_unit = 0;  // big-endian Other source: swap per this many bytes
    std::vector<uint64_t> shape;
    uint64_t nbytes = 0;
    Buffer data;  // held until finish() when the tensors were not announced
  };

  // The entry for a tensor (its data given as `t`, or announced by its info), checked for what
  // safetensors can hold; the name is taken (a second tensor of that name is refused).
  Item item_for(const std::string& name, const TensorInfo& info, const Tensor* t) {
    Item item = describe(name, info, t);
    if (!names_.insert(name).second)
      fail(ErrorCode::Usage, path_ + ": tensor " + printable(name) + ": a tensor of that name was already written");
    return item;
  }
  Item item_for_announced(const Tensor& t) const { return describe(t.name(), t.info, &t); }

  Item describe(const std::string& name, const TensorInfo& info, const Tensor* t) const {
    auto bad = [&](const std::string& what) {
      fail(ErrorCode::Usage, path_ + ": tensor " + printable(name) + ": " + what);
    };
    if (!valid_utf8(reinterpret_cast<const uint8_t*>(name.data()), name.size()))
      bad("name is not valid UTF-8, which safetensors requires");
    if (name == "__metadata__") bad("the name __metadata__ is reserved in safetensors");
    Item item;
    item.name = name;
    item.shape = info.shape;
    if (info.dtype == DType::Other) {
      item.dtype = find_dtype_by_descr(info.descr, &item.swap_unit);
      if (!item.dtype) bad("dtype " + printable(info.descr) + " cannot be stored in safetensors");
    } else {
      item.dtype = find_float_dtype(info.dtype);
      if (!item.dtype) bad(std::string("dtype ") + dtype_name(info.dtype) + " cannot be stored in safetensors");
    }
    uint64_t n = 1;
    for (uint64_t d : item.shape) {
      if (d != 0 && n > kMaxElements / d) bad("shape " + shape_string(item.shape) + " has too many elements");
      n *= d;
    }
    if (item.dtype->size > 1 && n > ~uint64_t{0} / item.dtype->size)
      bad("shape " + shape_string(item.shape) + " has too many bytes");
    item.nbytes = n * item.dtype->size;
    if (t && item.nbytes != t->data.size())
      fail(ErrorCode::Internal, path_ + ": tensor " + printable(name) + " holds " + std::to_string(t->data.size()) +
                                    " bytes, its shape " + shape_string(item.shape) + " of " + item.dtype->name +
                                    " needs " + std::to_string(item.nbytes));
    return item;
  }

  // The header is built entry by entry: an nlohmann::ordered_json object finds each new key by a
  // linear search, which made a header of n tensors (or n metadata keys) cost O(n^2) (see
  // docs/performance.md, "Figures behind design choices"). Each key and entry is dumped on its own
  // and appended, the same bytes as dumping the whole object (no indent: no whitespace between
  // tokens), in O(total size).
  void write_header() {
    // The input's own metadata when it had some (set_metadata), else what PyTorch writes; a key
    // given twice keeps its first place and its last value (as assigning into an ordered object).
    std::vector<std::pair<std::string, std::string>> meta;
    std::unordered_map<std::string, size_t> place;
    for (const auto& [k, v] : metadata_) {
      auto [it, fresh] = place.emplace(k, meta.size());
      if (fresh) meta.emplace_back(k, v);
      else meta[it->second].second = v;
    }
    if (meta.empty()) meta.emplace_back("format", "pt");
    std::string text = "{\"__metadata__\":{";
    for (size_t i = 0; i < meta.size(); ++i) {
      if (i) text += ',';
      text += nlohmann::json(meta[i].first).dump();
      text += ':';
      text += nlohmann::json(meta[i].second).dump();
    }
    text += '}';
    uint64_t offset = 0;
    for (const Item& it : items_) {
      nlohmann::ordered_json e = nlohmann::ordered_json::object();
      e["dtype"] = it.dtype->name;
      e["shape"] = it.shape;
      e["data_offsets"] = {offset, offset + it.nbytes};
      offset += it.nbytes;
      text += ',';
      text += nlohmann::json(it.name).dump();
      text += ':';
      text += e.dump();
    }
    text += '}';
    text.append((8 - text.size() % 8) % 8, ' ');
    uint8_t len[8];
    uint64_t n = text.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
    out_.write(len, 8);
    out_.write(text.data(), text.size());
  }

  void write_data(const Item& it, const Buffer& data) {
    if (it.swap_unit == 0) {
      out_.write(data.data(), data.size());
      return;
    }
    constexpr size_t kChunk = size_t{1} << 16;  // a multiple of every swap unit
    std::vector<uint8_t> chunk;
    for (size_t off = 0; off < data.size(); off += kChunk) {
      size_t m = std::min(kChunk, data.size() - off);
      chunk.assign(data.data() + off, data.data() + off + m);
      byteswap_in_place(chunk.data(), m, it.swap_unit);
      out_.write(chunk.data(), m);
    }
  }

  std::string path_;
  AtomicOutput out_;
  std::vector<Item> items_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  std::unordered_set<std::string> names_;
  bool streaming_ = false;  // tensors announced, header written
  size_t next_ = 0;         // announced tensors added so far
  bool finished_ = false;
};

}  // namespace

std::unique_ptr<SnapshotWriter> create_safetensors(const std::string& path, bool overwrite) {
  return std::make_unique<SafetensorsWriter>(path, overwrite);
}

}  // namespace gradcodec::formats
