// SPDX-License-Identifier: BSD-3-Clause
// Sharded checkpoints: an index (MODEL.safetensors.index.json, MODEL.bin.index.json, the layout
// Hugging Face's save_pretrained writes) read as one snapshot made of all its shards.
//
// Layout: a JSON object {"metadata": {...}, "weight_map": {"tensor name": "shard file", ...}}.
// Each shard is a safetensors file or a torch.save zip (.bin), named relative to the index's
// directory. docs/formats.md, "Sharded checkpoints", says what is read and what is refused.
//
// Contract:
//  * arrays() lists the tensors in the order of weight_map's keys as written in the file (a
//    JSON object is unordered, but the index's order is what a user sees; Hugging Face writes
//    the keys sorted). Each TensorInfo is the shard's own (dtype, shape, descr).
//  * The index is parsed with a SAX handler: no DOM, and a key written twice (which a DOM parser
//    silently collapses to one) is seen and refused — in weight_map as "listed twice", elsewhere
//    as a duplicate key. Nesting is capped (DepthCappedSax).
//  * Refused (ErrorCode::Input, one line naming the index and the entry): malformed JSON, no
//    weight_map, weight_map not an object, a value that is not a string; a shard path that is
//    empty, absolute or has a '..' part (the shards lie in the index's directory or below it;
//    the check is lexical: a symbolic link in that directory is followed, as the directory is
//    the user's own); a shard missing or unreadable or not a safetensors / torch.save file; a
//    tensor the index maps to a shard that does not hold it; a tensor a shard holds that the
//    index does not map to that shard (an "extra" tensor: the index and the shards must agree
//    exactly, or the snapshot would silently lose or double a tensor).
//  * Lazy opening. open() opens every shard once, to check its tensors against the index (the
//    refusals above must come before anything is encoded), keeps only their TensorInfo, and
//    releases each shard (its mapping and, for a torch shard, the parsed pickle) before the next
//    is opened. read(i) opens tensor i's shard when it is not the one open, releasing the one
//    that was: at most one shard is mapped at a time (plus the mappings of tensors a caller still
//    holds, InputFile::slice), so peak memory is that of the largest shard read as a single
//    file. A shard reopened must still hold the tensor as open() saw it (name, dtype, shape),
//    else the read is refused (the file changed). Reopening costs a header parse (safetensors)
//    or a pickle interpretation (torch) each time the read order moves to another shard; a
//    sorted index interleaves shards (layers.10 before layers.2), which this accepts rather
//    than hold every shard mapped.
//  * metadata(): the safetensors shards' "__metadata__" when they all have the same one
//    (save_pretrained writes {"format": "pt"} into each), else none, with a note. The index's own
//    "metadata" ({"total_size": N}) is not checked or kept: writers differ on what it counts.
//  * notes(): a torch shard's notes (values that are not tensors), prefixed with the shard.
#include "readers.hpp"
#include "safetensors_common.hpp"

#include <gradcodec/error.hpp>

#include <gradcodec/detail/json_capped.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace gradcodec::formats {

namespace {

using safetensors::printable;

// The largest index read: the safetensors header cap (an index of a model with a million tensors
// is about 100 bytes a tensor).
constexpr uint64_t kMaxIndexSize = safetensors::kMaxHeaderSize;

// SAX handler for the index: weight_map's entries in file order, duplicate keys refused at every
// level, anything but an object of strings under weight_map refused naming the entry.
class IndexSax {
 public:
  using json = nlohmann::json;

  std::vector<std::pair<std::string, std::string>> entries;  // tensor name, shard file
  bool have_map = false;
  std::string error;  // first error, without the path

  bool null() { return scalar("null"); }
  bool boolean(bool) { return scalar("a boolean"); }
  bool number_integer(json::number_integer_t) { return scalar("a number"); }
  bool number_unsigned(json::number_unsigned_t) { return scalar("a number"); }
  bool number_float(json::number_float_t, const std::string&) { return scalar("a number"); }
  bool binary(json::binary_t&) { return scalar("binary data"); }
  bool string(std::string& s) {
    Frame* f = top();
    if (f && f->role == Role::Map) {
      entries.emplace_back(f->field, s);
      return true;
    }
    return scalar("a string");
  }

  bool start_object(std::size_t) {
    Frame* f = top();
    if (!f) {
      stack_.push_back(Frame{Role::Root});
      return true;
    }
    if (f->role == Role::Root && f->field == "weight_map") {
      have_map = true;
      stack_.push_back(Frame{Role::Map});
      return true;
    }
    if (f->role == Role::Map) return fail_(not_a_file("an object"));
    stack_.push_back(Frame{Role::Skip});
    return true;
  }
  bool start_array(std::size_t) {
    Frame* f = top();
    if (!f) return fail_("the index is not a JSON object");
    if (f->role == Role::Root && f->field == "weight_map") return fail_("weight_map is not an object (an array)");
    if (f->role == Role::Map) return fail_(not_a_file("an array"));
    stack_.push_back(Frame{Role::Skip});
    return true;
  }
  bool key(std::string& k) {
    Frame& f = stack_.back();
    if (!f.keys.insert(k).second) {
      if (f.role == Role::Map) return fail_("weight_map lists tensor " + printable(k) + " twice");
      return fail_("duplicate key " + printable(k) + (f.role == Role::Root ? std::string() : " in " + printable(outer_field())));
    }
    f.field = k;
    return true;
  }
  bool end_object() {
    stack_.pop_back();
    return true;
  }
  bool end_array() {
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) {
    if (error.empty()) error = std::string("invalid JSON: ") + ex.what();
    return false;
  }

 private:
  enum class Role { Root, Map, Skip };
  struct Frame {
    Role role;
    std::unordered_set<std::string> keys = {};  // (arrays have none)
    std::string field = {};                     // the last key
  };
  std::vector<Frame> stack_;

  Frame* top() { return stack_.empty() ? nullptr : &stack_.back(); }
  bool fail_(const std::string& what) {
    if (error.empty()) error = what;
    return false;
  }
  std::string not_a_file(const char* what) const {
    return "weight_map maps tensor " + printable(stack_.back().field) + " to " + what + ", not a shard file name";
  }
  // The key under which the innermost skipped value lies at the root (for a duplicate's message).
  std::string outer_field() const { return stack_.size() >= 2 ? stack_.front().field : std::string(); }
  bool scalar(const char* what) {
    Frame* f = top();
    if (!f) return fail_("the index is not a JSON object");
    if (f->role == Role::Root && f->field == "weight_map")
      return fail_(std::string("weight_map is not an object (") + what + ")");
    if (f->role == Role::Map) return fail_(not_a_file(what));
    return true;
  }
};

// Why a shard path taken from the index is refused, or "" when it names a file in the index's
// directory or below it. Lexical: "a/../b" is refused although it stays inside.
std::string bad_shard_path(const std::string& s) {
  if (s.empty()) return "is empty";
  if (s.find('\0') != std::string::npos) return "holds a NUL character";
  const std::filesystem::path p(s);
  if (p.is_absolute() || p.has_root_directory() || p.has_root_name())
    return "is an absolute path; shards must lie in the index's directory";
  for (const auto& part : p)
    if (part == "..") return "has a '..' part; shards must lie in the index's directory";
  return {};
}

class ShardedReader final : public SnapshotReader {
 public:
  explicit ShardedReader(const std::string& path) : path_(path) {
    auto bad = [&](const std::string& what) { fail(ErrorCode::Input, path_ + ": " + what); };
    {
      const std::shared_ptr<const InputFile> file = InputFile::open(path_);
      if (file->size() > kMaxIndexSize)
        bad("index of " + std::to_string(file->size()) + " bytes exceeds the " + std::to_string(kMaxIndexSize) +
            "-byte cap of a sharded checkpoint index");
      IndexSax sax;
      DepthCappedSax<nlohmann::json, IndexSax> capped(sax);
      bool ok = false;
      try {
        ok = nlohmann::json::sax_parse(file->data(), file->data() + file->size(), &capped,
                                       nlohmann::json::input_format_t::json, true);
      } catch (const nlohmann::json::exception& e) {
        if (sax.error.empty()) sax.error = std::string("invalid JSON: ") + e.what();
      }
      if (!capped.error().empty()) bad("index has " + capped.error());
      if (!ok || !sax.error.empty()) bad(sax.error.empty() ? std::string("index is not valid JSON") : sax.error);
      if (!sax.have_map)
        bad("no \"weight_map\": not a sharded checkpoint index ({\"weight_map\": {\"tensor\": \"shard file\", ...}})");
      entries_ = std::move(sax.entries);
    }
    dir_ = std::filesystem::path(path_).parent_path();

    // The shards, in the order of their first tensor; one per lexically normal path, so that
    // "a.safetensors" and "./a.safetensors" are the same shard.
    std::unordered_map<std::string, size_t> shard_of_path;
    std::vector<std::unordered_map<std::string, size_t>> listed;  // per shard: tensor name -> index in entries_
    where_.resize(entries_.size());
    for (size_t i = 0; i < entries_.size(); ++i) {
      const auto& [name, file] = entries_[i];
      if (std::string why = bad_shard_path(file); !why.empty())
        bad("weight_map maps tensor " + printable(name) + " to shard " + printable(file) + ", which " + why);
      const std::string key = std::filesystem::path(file).lexically_normal().string();
      auto [it, added] = shard_of_path.emplace(key, shards_.size());
      if (added) {
        shards_.push_back(Shard{file, (dir_ / file).string()});
        listed.emplace_back();
      }
      where_[i].shard = it->second;
      listed[it->second].emplace(name, i);
    }

    // Every shard opened once, checked against the index, and released (see the contract above).
    infos_.resize(entries_.size());
    bool metadata_agrees = true, have_metadata = false;
    for (size_t s = 0; s < shards_.size(); ++s) {
      std::unique_ptr<SnapshotReader> r = open_shard_file(s);
      const std::vector<TensorInfo>& arrays = r->arrays();
      std::vector<bool> seen(arrays.size(), false);
      for (size_t k = 0; k < arrays.size(); ++k) {
        const std::string& name = arrays[k].name;
        auto it = listed[s].find(name);
        if (it == listed[s].end()) {
          std::string elsewhere;
          for (size_t i = 0; i < entries_.size() && elsewhere.empty(); ++i)
            if (entries_[i].first == name) elsewhere = ", which maps it to shard " + printable(entries_[i].second);
          bad("shard " + printable(shards_[s].file) + " holds tensor " + printable(name) +
              (elsewhere.empty() ? ", which the index does not list" : " not listed for it in the index" + elsewhere));
        }
        infos_[it->second] = arrays[k];
        where_[it->second].local = k;
        seen[k] = true;
        listed[s].erase(it);
      }
      if (!listed[s].empty()) {
        // the first, in the index's order, of the tensors the shard lacks
        size_t first = entries_.size();
        for (const auto& kv : listed[s]) first = std::min(first, kv.second);
        bad("weight_map maps tensor " + printable(entries_[first].first) + " to shard " +
            printable(shards_[s].file) + ", which does not hold it");
      }
      for (const std::string& note : r->notes()) notes_.push_back("shard " + printable(shards_[s].file) + ": " + note);
      if (r->format() == Format::Safetensors) {
        auto m = r->metadata();
        if (!have_metadata) {
          metadata_ = std::move(m);
          have_metadata = true;
        } else if (m != metadata_) {
          metadata_agrees = false;
        }
      }
    }
    if (!metadata_agrees) {
      metadata_.clear();
      notes_.push_back("the safetensors shards' __metadata__ differ: none is kept");
    }
  }

  Format format() const override { return Format::Sharded; }
  const std::string& path() const override { return path_; }
  const std::vector<TensorInfo>& arrays() const override { return infos_; }
  std::vector<std::pair<std::string, std::string>> metadata() const override { return metadata_; }
  std::vector<std::string> notes() const override { return notes_; }

  Tensor read(size_t i) override {
    if (i >= infos_.size()) fail(ErrorCode::Internal, path_ + ": array index " + std::to_string(i) + " out of range");
    std::lock_guard<std::mutex> lock(mu_);
    const Where& w = where_[i];
    if (!open_ || open_index_ != w.shard) {
      open_.reset();  // released first: never two shards mapped by this reader
      open_ = open_shard_file(w.shard);
      open_index_ = w.shard;
      ++opens_;
    }
    const std::vector<TensorInfo>& now = open_->arrays();
    const TensorInfo& want = infos_[i];
    if (w.local >= now.size() || now[w.local].name != want.name || now[w.local].dtype != want.dtype ||
        now[w.local].descr != want.descr || now[w.local].shape != want.shape)
      fail(ErrorCode::Input, path_ + ": shard " + printable(shards_[w.shard].file) +
                                 " changed since it was opened: tensor " + printable(want.name) +
                                 " is no longer there as it was");
    return open_->read(w.local);
  }

  size_t shard_opens() const {
    std::lock_guard<std::mutex> lock(mu_);
    return opens_;
  }

 private:
  struct Shard {
    std::string file;  // as the index writes it
    std::string path;  // the index's directory / file
  };
  struct Where {
    size_t shard = 0;
    size_t local = 0;  // the tensor's index in its shard's arrays()
  };

  // Shard s opened as a reader; a failure names the index and the shard, then says what is wrong.
  std::unique_ptr<SnapshotReader> open_shard_file(size_t s) const {
    try {
      return open_shard(InputFile::open(shards_[s].path));
    } catch (const Error& e) {
      fail(e.code(), path_ + ": shard " + printable(shards_[s].file) + ": " + e.what());
    }
  }

  std::string path_;
  std::filesystem::path dir_;
  std::vector<std::pair<std::string, std::string>> entries_;  // weight_map, in file order
  std::vector<Shard> shards_;
  std::vector<Where> where_;  // per tensor
  std::vector<TensorInfo> infos_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  std::vector<std::string> notes_;

  mutable std::mutex mu_;  // read() and the open shard
  std::unique_ptr<SnapshotReader> open_;
  size_t open_index_ = 0;
  size_t opens_ = 0;
};

}  // namespace

bool is_sharded_index_name(const std::string& path) {
  std::string lower = std::filesystem::path(path).filename().string();
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto ends = [&](const std::string& tail) {
    return lower.size() > tail.size() && lower.compare(lower.size() - tail.size(), tail.size(), tail) == 0;
  };
  return ends(".safetensors.index.json") || ends(".bin.index.json");
}

std::unique_ptr<SnapshotReader> open_sharded(const std::string& index_path) {
  return std::make_unique<ShardedReader>(index_path);
}

size_t sharded_shard_opens(const SnapshotReader& r) {
  const auto* s = dynamic_cast<const ShardedReader*>(&r);
  if (!s) fail(ErrorCode::Internal, r.path() + ": not a sharded checkpoint reader");
  return s->shard_opens();
}

}  // namespace gradcodec::formats
