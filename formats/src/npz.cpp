// SPDX-License-Identifier: BSD-3-Clause
// NPZ: a zip archive of NAME.npy members, as np.savez (stored) and np.savez_compressed (deflated)
// write it, read and written through libzip.
//
// Reading. libzip reads the archive through the InputFile (FileSource: pread for a file). open()
// reads only the NPY header of each member (a few hundred bytes inflated), read(i) inflates one
// member.
// Decisions:
// - Members are listed in archive order, tensor NAME for member NAME.npy (as numpy's NpzFile).
// - A member whose name does not end in ".npy" is an error naming it, not silently skipped:
//   numpy only loads .npy members as arrays, and dropping data unannounced is worse than refusing.
//   Directory entries (names ending in '/', no data) are skipped.
// - Duplicate member names are an error (libzip would let the first one shadow the other).
// - Only stored and deflated members are accepted (the two methods numpy writes). A deflated
//   member's declared size must be reachable from its compressed size (deflate expands at most
//   1032:1), so no allocation exceeds about a thousand times the file size; inflation stops at the
//   declared size plus one probe byte, and more data than declared is refused (decompression bomb).
// - A few bytes after the array's data inside a member are ignored, as numpy ignores them; a
//   member declaring more than kTrailingSlack bytes beyond its array is refused at open, so read()
//   never inflates more than the header's promise plus that slack (plus one probe byte).
//
// Writing (zip_write.hpp). Each add() writes its member (stored, like np.savez, dated 1980-01-01
// like numpy's, with numpy's ZIP64 local header) straight into the AtomicOutput's temporary, so
// memory stays at one chunk whatever the snapshot size and the archive's bytes are written once;
// finish() writes the central directory and renames the file into place. "-" writes the archive
// into an unlinked spool file and copies it to standard output once it is complete.
#include "npy.hpp"
#include "readers.hpp"
#include "zip_write.hpp"

#include <gradcodec/error.hpp>

#include <zip.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <utility>

#include <fcntl.h>
#include <unistd.h>

namespace gradcodec::formats {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kDeflateMaxRatio = 1032;  // deflate's largest possible expansion
constexpr uint64_t kDeflateSlack = 1024;     // headroom for tiny streams
constexpr uint64_t kTrailingSlack = 4096;    // bytes tolerated after an array inside a member

struct ZipDiscard {
  void operator()(zip_t* z) const noexcept { zip_discard(z); }
};
struct ZipFileClose {
  void operator()(zip_file_t* f) const noexcept { zip_fclose(f); }
};
using ZipPtr = std::unique_ptr<zip_t, ZipDiscard>;
using ZipFilePtr = std::unique_ptr<zip_file_t, ZipFileClose>;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// ---------------------------------------------------------------------------------------------
// Reading.

// The archive as libzip sees it: the InputFile's bytes through read_at(), which a file opened
// `readable` serves with pread. The members' bytes are then copied from the page cache into the
// tensors' buffers and never mapped into the process, so reading a member neither faults in its
// pages nor leaves them in the resident set (as when libzip read the mapping: docs/performance.md,
// "Figures behind design choices").
struct FileSource {
  std::shared_ptr<const InputFile> file;
  uint64_t pos = 0;
  zip_error_t error;
  explicit FileSource(std::shared_ptr<const InputFile> f) : file(std::move(f)) { zip_error_init(&error); }
  ~FileSource() { zip_error_fini(&error); }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;
};

zip_int64_t file_source_callback(void* user, void* data, zip_uint64_t len, zip_source_cmd_t cmd) {
  auto* s = static_cast<FileSource*>(user);
  const uint64_t size = s->file->size();
  switch (cmd) {
    case ZIP_SOURCE_OPEN: s->pos = 0; return 0;
    case ZIP_SOURCE_READ: {
      const uint64_t n = std::min<uint64_t>(len, size - std::min(s->pos, size));
      errno = 0;
      try {
        s->file->read_at(s->pos, static_cast<uint8_t*>(data), n);
      } catch (const Error&) {  // no exception through libzip: a read error it reports
        zip_error_set(&s->error, ZIP_ER_READ, errno ? errno : EIO);  // (EIO: the file ended early)
        return -1;
      }
      s->pos += n;
      return static_cast<zip_int64_t>(n);
    }
    case ZIP_SOURCE_CLOSE: return 0;
    case ZIP_SOURCE_SEEK: {
      const zip_int64_t to = zip_source_seek_compute_offset(s->pos, size, data, len, &s->error);
      if (to < 0) return -1;
      s->pos = static_cast<uint64_t>(to);
      return 0;
    }
    case ZIP_SOURCE_TELL: return static_cast<zip_int64_t>(s->pos);
    case ZIP_SOURCE_STAT: {
      zip_stat_t* st = ZIP_SOURCE_GET_ARGS(zip_stat_t, data, len, &s->error);
      if (!st) return -1;
      zip_stat_init(st);
      st->size = size;
      st->valid |= ZIP_STAT_SIZE;
      return sizeof(zip_stat_t);
    }
    case ZIP_SOURCE_ERROR: return zip_error_to_data(&s->error, data, len);
    case ZIP_SOURCE_FREE: delete s; return 0;
    case ZIP_SOURCE_SUPPORTS:
      return zip_source_make_command_bitmap(ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE, ZIP_SOURCE_SEEK,
                                            ZIP_SOURCE_TELL, ZIP_SOURCE_STAT, ZIP_SOURCE_ERROR, ZIP_SOURCE_FREE,
                                            -1);
    default: zip_error_set(&s->error, ZIP_ER_OPNOTSUPP, 0); return -1;
  }
}

class NpzReader final : public SnapshotReader {
 public:
  explicit NpzReader(std::shared_ptr<const InputFile> file) : file_(std::move(file)) {
    const std::string& path = file_->path();
    if (file_->size() < 22) fail(ErrorCode::Input, path + ": not a zip archive (too short)");
    zip_error_t err;
    zip_error_init(&err);
    auto* fs = new FileSource(file_);
    zip_source_t* src = zip_source_function_create(file_source_callback, fs, &err);
    if (!src) delete fs;  // (else the source owns it: ZIP_SOURCE_FREE)
    zip_t* za = src ? zip_open_from_source(src, ZIP_RDONLY, &err) : nullptr;
    if (!za) {
      if (src) zip_source_free(src);
      std::string msg = zip_error_strerror(&err);
      zip_error_fini(&err);
      fail(ErrorCode::Input, path + ": not a valid zip archive (" + msg + ")");
    }
    zip_error_fini(&err);
    za_.reset(za);

    zip_int64_t n = zip_get_num_entries(za, 0);
    std::set<std::string> seen;
    for (zip_int64_t i = 0; i < n; ++i) {
      zip_stat_t st;
      zip_stat_init(&st);
      if (zip_stat_index(za, static_cast<zip_uint64_t>(i), 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME))
        fail(ErrorCode::Input, path + ": cannot read zip entry " + std::to_string(i) + " (" +
                                   zip_strerror(za) + ")");
      std::string name = st.name;
      if (!seen.insert(name).second)
        fail(ErrorCode::Input, path + ": duplicate member '" + name + "'");
      if (ends_with(name, "/") && st.size == 0) continue;  // a directory entry
      if (name == "data.pkl" || ends_with(name, "/data.pkl"))  // torch.save's zip format
        fail(ErrorCode::Input, path + ": member '" + name + "' is a pickle, which is never unpickled: not an "
                                      "NPZ (a torch.save file, read as such, has it as ARCHIVE/data.pkl)");
      if (!ends_with(name, ".npy"))
        fail(ErrorCode::Input, path + ": member '" + name +
                                   "' is not an .npy array (an .npz holds NAME.npy members)");
      members_.push_back(open_member(static_cast<zip_uint64_t>(i), name, st));
      infos_.push_back(members_.back().header.info);
    }
  }

  Format format() const override { return Format::Npz; }
  const std::string& path() const override { return file_->path(); }
  const std::vector<TensorInfo>& arrays() const override { return infos_; }

  Tensor read(size_t i) override {
    if (i >= members_.size()) fail(ErrorCode::Internal, file_->path() + ": array index out of range");
    const Member& m = members_[i];
    std::shared_ptr<uint8_t[]> data = npy::allocate(m.header.data_bytes, m.where);
    read_into(i, data.get());
    uint8_t* p = data.get();
    Buffer raw = Buffer::view(std::move(data), p, m.header.data_bytes);
    return Tensor{m.header.info, npy::to_tensor_data(m.header, std::move(raw), m.where)};
  }

  uint64_t array_bytes(size_t i) const {
    if (i >= members_.size()) fail(ErrorCode::Internal, file_->path() + ": array index out of range");
    return members_[i].header.data_bytes;
  }

  // The array's bytes of member i, as stored (before any transpose or byte swap), into dst.
  void read_into(size_t i, uint8_t* dst) {
    if (i >= members_.size()) fail(ErrorCode::Internal, file_->path() + ": array index out of range");
    std::lock_guard<std::mutex> lock(mu_);  // one libzip archive: one reader at a time
    const Member& m = members_[i];
    ZipFilePtr f = open_file(m.index, m.where);
    uint8_t scratch[1 << 14];
    skip(f.get(), m.header.data_offset, scratch, sizeof scratch, m.where);
    read_exact(f.get(), dst, m.header.data_bytes, m.where);
    // Ignore what follows the array in the member (as numpy does), then read to the end so libzip
    // checks the CRC; one more byte than declared is refused.
    skip(f.get(), m.size - m.header.data_offset - m.header.data_bytes, scratch, sizeof scratch, m.where);
    zip_int64_t extra = zip_fread(f.get(), scratch, 1);
    if (extra < 0) fail(ErrorCode::Input, m.where + ": " + zip_file_strerror(f.get()));
    if (extra > 0)
      fail(ErrorCode::Input, m.where + ": inflates to more than its declared " +
                                 std::to_string(m.size) + " bytes");
  }

 private:
  struct Member {
    zip_uint64_t index = 0;
    std::string where;  // "<path>: member 'NAME.npy'", the prefix of its error messages
    uint64_t size = 0;  // uncompressed size the archive declares
    npy::Header header;
  };

  Member open_member(zip_uint64_t index, const std::string& name, const zip_stat_t& st) {
    Member m;
    m.index = index;
    m.where = file_->path() + ": member '" + name + "'";
    const zip_uint64_t need = ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD;
    if ((st.valid & need) != need) fail(ErrorCode::Input, m.where + ": sizes unknown");
    if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE)
      fail(ErrorCode::Input, m.where + ": encrypted members are not supported");
    if (st.comp_size > file_->size())
      fail(ErrorCode::Input, m.where + ": compressed size " + std::to_string(st.comp_size) +
                                 " goes beyond the end of the file");
    if (st.comp_method == ZIP_CM_STORE) {
      if (st.size != st.comp_size)
        fail(ErrorCode::Input, m.where + ": stored member declares " + std::to_string(st.size) +
                                   " bytes but holds " + std::to_string(st.comp_size));
    } else if (st.comp_method == ZIP_CM_DEFLATE) {
      if (st.size > st.comp_size * kDeflateMaxRatio + kDeflateSlack)
        fail(ErrorCode::Input, m.where + ": declared size " + std::to_string(st.size) +
                                   " cannot come from " + std::to_string(st.comp_size) +
                                   " deflated bytes");
    } else {
      fail(ErrorCode::Input, m.where + ": compression method " + std::to_string(st.comp_method) +
                                 " is not supported (numpy writes stored or deflated members)");
    }
    m.size = st.size;

    // Inflate just the NPY header.
    ZipFilePtr f = open_file(index, m.where);
    uint8_t pre[npy::kPreambleBytes];
    size_t avail = static_cast<size_t>(std::min<uint64_t>(m.size, sizeof pre));
    read_exact(f.get(), pre, avail, m.where);
    uint64_t end = npy::header_end(pre, avail, m.size, m.where);
    std::vector<uint8_t> header(end);
    size_t have = static_cast<size_t>(std::min<uint64_t>(avail, end));  // a 1.0 header may be tiny
    std::memcpy(header.data(), pre, have);
    read_exact(f.get(), header.data() + have, end - have, m.where);
    m.header = npy::parse_header(header.data(), end, m.size, m.where);
    // The member may not declare much more than its array needs: read() inflates the declared size.
    uint64_t needed = m.header.data_offset + m.header.data_bytes;
    if (m.size - needed > kTrailingSlack)
      fail(ErrorCode::Input, m.where + ": declares " + std::to_string(m.size) +
                                 " bytes but its array needs only " + std::to_string(needed));
    m.header.info.name = name.substr(0, name.size() - 4);
    return m;
  }

  ZipFilePtr open_file(zip_uint64_t index, const std::string& where) {
    ZipFilePtr f(zip_fopen_index(za_.get(), index, 0));
    if (!f) fail(ErrorCode::Input, where + ": " + zip_strerror(za_.get()));
    return f;
  }

  // libzip 1.7 asked for 4 GiB or more in one zip_fread of a deflated member returns the whole
  // count but leaves bytes of it uninflated (they come out of the next call): a member of more
  // than 4 GiB then seemed to inflate to more than its declared size. Never ask for more than
  // kMaxFread bytes at once.
  static constexpr uint64_t kMaxFread = uint64_t{1} << 30;

  static void read_exact(zip_file_t* f, uint8_t* p, uint64_t n, const std::string& where) {
    while (n > 0) {
      zip_int64_t got = zip_fread(f, p, std::min(n, kMaxFread));
      if (got < 0) fail(ErrorCode::Input, where + ": " + zip_file_strerror(f));
      if (got == 0) fail(ErrorCode::Input, where + ": truncated (data ends early)");
      p += got;
      n -= static_cast<uint64_t>(got);
    }
  }

  static void skip(zip_file_t* f, uint64_t n, uint8_t* scratch, size_t cap, const std::string& where) {
    while (n > 0) {
      uint64_t step = std::min<uint64_t>(n, cap);
      read_exact(f, scratch, step, where);
      n -= step;
    }
  }

  std::shared_ptr<const InputFile> file_;
  ZipPtr za_;
  std::mutex mu_;
  std::vector<Member> members_;
  std::vector<TensorInfo> infos_;
};

// ---------------------------------------------------------------------------------------------
// Writing.

fs::path temp_dir() {
  std::error_code ec;
  fs::path p = fs::temp_directory_path(ec);
  return ec ? fs::path("/tmp") : p;
}

// An empty file DIR/.STEM.KIND-XXXXXX, already unlinked: it lives as long as the descriptor.
int make_spool(const fs::path& dir, const std::string& stem, const std::string& target) {
  std::string templ = (dir / ("." + stem + ".spool-XXXXXX")).string();
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  int fd = ::mkstemp(buf.data());
  if (fd < 0)
    fail(ErrorCode::Input, target + ": cannot create a temporary file in " + dir.string() + ": " +
                               std::strerror(errno));
  ::unlink(buf.data());
  return fd;
}

class NpzWriter final : public SnapshotWriter {
 public:
  NpzWriter(const std::string& path, bool overwrite)
      : path_(path), zip_([this](const void* p, size_t n) { emit(p, n); }, target()) {
    if (path == "-")
      spool_fd_ = make_spool(temp_dir(), "gradcodec-stdout", target());
    else
      out_ = std::make_unique<AtomicOutput>(path, overwrite);
  }
  ~NpzWriter() override {
    if (spool_fd_ >= 0) ::close(spool_fd_);
  }

  void add(const Tensor& t) override {
    const std::string& name = t.name();
    // '' is member ".npy", as np.savez(**{'': x}) writes it and np.load reads it back.
    if (name.find('\0') != std::string::npos)
      fail(ErrorCode::Usage, target() + ": tensor name '" + name + "' cannot be an npz member name (it holds a NUL byte)");
    if ((!name.empty() && name.front() == '/') || name == ".." || name.rfind("../", 0) == 0 || ends_with(name, "/..") ||
        name.find("/../") != std::string::npos)
      fail(ErrorCode::Usage, target() + ": tensor name '" + name +
                                 "' cannot be an npz member name (absolute or with '..')");
    if (finished_) fail(ErrorCode::Internal, target() + ": add() after finish()");
    if (!names_.insert(name).second) fail(ErrorCode::Usage, target() + ": two tensors named '" + name + "'");
    // The member's local header carries its size and CRC-32, so the NPY stream is made twice:
    // once to count and checksum it, once to write it (no byte of the archive is rewritten).
    // write_array validates the tensor before its first byte, so a tensor NPY cannot hold is
    // refused here with the archive untouched.
    uint64_t size = 0;
    uLong crc = crc32_z(0, nullptr, 0);
    try {
      std::vector<std::string> unused;
      npy::write_array(t, [&](const void* p, size_t n) {
        size += n;
        if (n) crc = crc32_z(crc, static_cast<const Bytef*>(p), n);  // (a null buffer restarts the CRC)
      }, unused);
    } catch (...) {
      names_.erase(name);
      throw;
    }
    try {
      zip_.begin(name + ".npy", size, static_cast<uint32_t>(crc));
      npy::write_array(t, [&](const void* p, size_t n) { zip_.data(p, n); }, warnings_);
    } catch (...) {
      failed_ = true;  // the archive may hold part of this member: finish() refuses
      throw;
    }
  }

  void complete() override {
    if (finished_) fail(ErrorCode::Internal, target() + ": complete() called twice");
    if (failed_) fail(ErrorCode::Internal, target() + ": complete() after a failed add()");
    zip_.finish();
    if (path_ == "-") {
      copy_spool_to_stdout();  // standard output gets the archive once it is whole
    } else {
      out_->seal();
    }
    finished_ = true;
  }
  void publish() override {
    if (!finished_) fail(ErrorCode::Internal, target() + ": publish() before complete()");
    if (out_) out_->publish();
  }

  std::vector<std::string> take_warnings() override { return std::exchange(warnings_, {}); }

 private:
  std::string target() const { return path_ == "-" ? std::string("<stdout>") : path_; }

  // The archive's bytes: into the output's temporary, or for "-" into the spool, which reaches
  // standard output only once the archive is complete.
  void emit(const void* data, size_t n) {
    if (out_) return out_->write(data, n);
    auto* p = static_cast<const uint8_t*>(data);
    while (n > 0) {
      ssize_t w = ::pwrite(spool_fd_, p, n, static_cast<off_t>(spool_size_));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0)
        fail(ErrorCode::Input, target() + ": cannot write temporary data: " + std::strerror(w < 0 ? errno : ENOSPC));
      p += w;
      n -= static_cast<size_t>(w);
      spool_size_ += static_cast<uint64_t>(w);
    }
  }

  void copy_spool_to_stdout() {
    AtomicOutput out("-", true);
    std::vector<uint8_t> buf(1 << 20);
    for (uint64_t pos = 0; pos < spool_size_;) {
      ssize_t r = ::pread(spool_fd_, buf.data(), std::min<uint64_t>(buf.size(), spool_size_ - pos),
                          static_cast<off_t>(pos));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) fail(ErrorCode::Input, "<stdout>: cannot read the temporary archive");
      out.write(buf.data(), static_cast<size_t>(r));
      pos += static_cast<uint64_t>(r);
    }
    out.commit();
  }

  std::string path_;
  std::unique_ptr<AtomicOutput> out_;  // null for "-"
  ZipStoredWriter zip_;
  int spool_fd_ = -1;  // "-" only
  uint64_t spool_size_ = 0;
  std::set<std::string> names_;
  std::vector<std::string> warnings_;
  bool finished_ = false, failed_ = false;
};

}  // namespace

uint64_t npz_array_bytes(const SnapshotReader& npz, size_t i) {
  const auto* r = dynamic_cast<const NpzReader*>(&npz);
  if (!r) fail(ErrorCode::Internal, npz.path() + ": not an npz reader");
  return r->array_bytes(i);
}

void read_npz_array_into(SnapshotReader& npz, size_t i, uint8_t* dst) {
  auto* r = dynamic_cast<NpzReader*>(&npz);
  if (!r) fail(ErrorCode::Internal, npz.path() + ": not an npz reader");
  r->read_into(i, dst);
}

std::unique_ptr<SnapshotReader> open_npz(std::shared_ptr<const InputFile> file) {
  return std::make_unique<NpzReader>(std::move(file));
}

std::unique_ptr<SnapshotWriter> create_npz(const std::string& path, bool overwrite) {
  return std::make_unique<NpzWriter>(path, overwrite);
}

}  // namespace gradcodec::formats
