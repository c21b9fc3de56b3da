// SPDX-License-Identifier: BSD-3-Clause
// A directory of .npy files: one array per file, named by the file stem, in file-name order.
#include "npy.hpp"
#include "readers.hpp"

#include <gradcodec/error.hpp>

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

namespace gradcodec::formats {

namespace fs = std::filesystem;

namespace {

bool has_npy_extension(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".npy";
}

class NpyDirReader final : public SnapshotReader {
 public:
  explicit NpyDirReader(const std::string& dir) : dir_(dir) {
    std::vector<std::pair<std::string, fs::path>> files;  // (file name, path)
    std::error_code ec;
    fs::directory_iterator it(dir, ec), end;
    if (ec) fail(ErrorCode::Input, dir + ": cannot list directory: " + ec.message());
    for (; it != end; it.increment(ec)) {
      const fs::path& p = it->path();
      std::error_code ec2;
      if (has_npy_extension(p) && fs::is_regular_file(p, ec2))  // follows symlinks
        files.emplace_back(p.filename().string(), p);
    }
    if (ec) fail(ErrorCode::Input, dir + ": cannot list directory: " + ec.message());
    if (files.empty()) fail(ErrorCode::Input, dir + ": no .npy files in the directory");
    std::sort(files.begin(), files.end());  // by file name, byte-wise
    for (const auto& [name, p] : files) {
      Entry e;
      e.file = InputFile::open(p.string());
      e.header = npy::parse_stream(e.file->data(), e.file->size(), e.file->path());
      e.header.info.name = p.stem().string();
      infos_.push_back(e.header.info);
      entries_.push_back(std::move(e));
    }
  }
  Format format() const override { return Format::NpyDir; }
  const std::string& path() const override { return dir_; }
  const std::vector<TensorInfo>& arrays() const override { return infos_; }
  Tensor read(size_t i) override {
    if (i >= entries_.size()) fail(ErrorCode::Internal, dir_ + ": array index out of range");
    const Entry& e = entries_[i];
    Buffer raw = e.file->slice(e.header.data_offset, e.header.data_bytes);
    return Tensor{e.header.info, npy::to_tensor_data(e.header, std::move(raw), e.file->path())};
  }

 private:
  struct Entry {
    std::shared_ptr<const InputFile> file;
    npy::Header header;
  };
  std::string dir_;
  std::vector<Entry> entries_;
  std::vector<TensorInfo> infos_;
};

// Every tensor goes to a temporary beside DIR/NAME.npy; finish() renames them all into place, so
// a failed run leaves the directory as it was (apart from creating it when it was missing).
class NpyDirWriter final : public SnapshotWriter {
 public:
  NpyDirWriter(const std::string& dir, bool overwrite) : dir_(dir), overwrite_(overwrite) {
    if (!is_directory(dir)) {
      if (path_exists(dir)) fail(ErrorCode::Usage, dir + ": exists and is not a directory");
      // The directories that do not exist yet, deepest first (DIR/frame000/ may create DIR too).
      created_ = create_missing_directories(dir);
    }
  }
  ~NpyDirWriter() override {
    if (finished_) return;
    outputs_.clear();  // removes the temporaries
    std::error_code ec;
    for (const auto& d : created_) fs::remove(d->path(), ec);  // only succeeds when we left it empty
  }

  void add(const Tensor& t) override {
    npy::check_file_name(t.name(), dir_);
    if (!names_.insert(t.name()).second)
      fail(ErrorCode::Usage, dir_ + ": two tensors named '" + t.name() + "'");
    std::string target = (fs::path(dir_) / (t.name() + ".npy")).string();
    auto out = std::make_unique<AtomicOutput>(target, overwrite_);
    npy::write_array(t, [&](const void* p, size_t n) { out->write(p, n); }, warnings_);
    // Keep the temporary but not its descriptor (a snapshot may have thousands of tensors);
    // release_handle() does not sync and commit() then only renames, so sync here.
    out->release_handle();
    npy::sync_file(out->temp_path(), target);
    outputs_.push_back(std::move(out));
  }

  void complete() override {
    if (outputs_.empty()) fail(ErrorCode::Usage, dir_ + ": no tensor to write");
    for (auto& out : outputs_) out->seal();  // each was synced by add()
  }
  void publish() override {
    for (auto& out : outputs_) out->publish();
    finished_ = true;
    for (auto& d : created_) d->release();
  }
  std::vector<std::string> take_warnings() override { return std::exchange(warnings_, {}); }

 private:
  std::string dir_;
  bool overwrite_;
  std::vector<std::unique_ptr<CreatedDirectory>> created_;  // directories this writer made, deepest first
  bool finished_ = false;
  std::set<std::string> names_;
  std::vector<std::unique_ptr<AtomicOutput>> outputs_;
  std::vector<std::string> warnings_;
};

}  // namespace

std::unique_ptr<SnapshotReader> open_npy_dir(const std::string& dir) {
  return std::make_unique<NpyDirReader>(dir);
}

std::unique_ptr<SnapshotWriter> create_npy_dir(const std::string& dir, bool overwrite) {
  return std::make_unique<NpyDirWriter>(dir, overwrite);
}

}  // namespace gradcodec::formats
