// NPZ: a zip archive of NAME.npy members, as np.savez (stored) and np.savez_compressed (deflated)
// write it, read and written through libzip.
//
// Reading. The archive is opened on the InputFile's memory (no second copy). open() reads only the
// NPY header of each member (a few hundred bytes inflated), read(i) inflates one member.
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
// Writing. Each add() streams its NPY member into an unlinked spool file, so memory stays at one
// chunk whatever the snapshot size; finish() has libzip build the archive (stored members, like
// np.savez, dated 1980-01-01 like numpy's) from the spool into the AtomicOutput's temporary, then
// renames it into place. "-" builds the zip in a temporary file and copies it to standard output.
#include "npy.hpp"
#include "readers.hpp"

#include <gradcodec/error.hpp>

#include <zip.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
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

class NpzReader final : public SnapshotReader {
 public:
  explicit NpzReader(std::shared_ptr<const InputFile> file) : file_(std::move(file)) {
    const std::string& path = file_->path();
    if (file_->size() < 22) fail(ErrorCode::Input, path + ": not a zip archive (too short)");
    zip_error_t err;
    zip_error_init(&err);
    zip_source_t* src = zip_source_buffer_create(file_->data(), file_->size(), 0, &err);
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
    std::lock_guard<std::mutex> lock(mu_);  // one libzip archive: one reader at a time
    const Member& m = members_[i];
    ZipFilePtr f = open_file(m.index, m.where);
    uint8_t scratch[1 << 14];
    skip(f.get(), m.header.data_offset, scratch, sizeof scratch, m.where);
    std::shared_ptr<uint8_t[]> data = npy::allocate(m.header.data_bytes, m.where);
    read_exact(f.get(), data.get(), m.header.data_bytes, m.where);
    // Ignore what follows the array in the member (as numpy does), then read to the end so libzip
    // checks the CRC; one more byte than declared is refused.
    skip(f.get(), m.size - m.header.data_offset - m.header.data_bytes, scratch, sizeof scratch, m.where);
    zip_int64_t extra = zip_fread(f.get(), scratch, 1);
    if (extra < 0) fail(ErrorCode::Input, m.where + ": " + zip_file_strerror(f.get()));
    if (extra > 0)
      fail(ErrorCode::Input, m.where + ": inflates to more than its declared " +
                                 std::to_string(m.size) + " bytes");
    uint8_t* p = data.get();
    Buffer raw = Buffer::view(std::move(data), p, m.header.data_bytes);
    return Tensor{m.header.info, npy::to_tensor_data(m.header, std::move(raw), m.where)};
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

  static void read_exact(zip_file_t* f, uint8_t* p, uint64_t n, const std::string& where) {
    while (n > 0) {
      zip_int64_t got = zip_fread(f, p, n);
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

  std::shared_ptr<const InputFile> file_;  // libzip reads its memory: keep it alive
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

// An empty file DIR/.STEM.KIND-XXXXXX; returns its descriptor and sets `name`.
int make_temp(const fs::path& dir, const std::string& stem, const char* kind, std::string& name,
              const std::string& target) {
  std::string templ = (dir / ("." + stem + "." + kind + "-XXXXXX")).string();
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  int fd = ::mkstemp(buf.data());
  if (fd < 0)
    fail(ErrorCode::Input, target + ": cannot create a temporary file in " + dir.string() + ": " +
                               std::strerror(errno));
  name = buf.data();
  return fd;
}

// Removes a temporary file by name when it goes out of scope.
struct TempName {
  std::string name;
  ~TempName() {
    if (!name.empty()) ::unlink(name.c_str());
  }
};

// One member's bytes inside the spool file, served to libzip by a source callback.
struct SpoolSlice {
  int fd = -1;
  uint64_t offset = 0, size = 0, pos = 0;
  zip_error_t error;
  SpoolSlice() { zip_error_init(&error); }
  ~SpoolSlice() { zip_error_fini(&error); }
  SpoolSlice(const SpoolSlice&) = delete;
  SpoolSlice& operator=(const SpoolSlice&) = delete;
};

zip_int64_t spool_callback(void* user, void* data, zip_uint64_t len, zip_source_cmd_t cmd) {
  auto* s = static_cast<SpoolSlice*>(user);
  switch (cmd) {
    case ZIP_SOURCE_OPEN: s->pos = 0; return 0;
    case ZIP_SOURCE_READ: {
      uint64_t n = std::min<uint64_t>(len, s->size - s->pos);
      auto* p = static_cast<uint8_t*>(data);
      for (uint64_t got = 0; got < n;) {
        ssize_t r = ::pread(s->fd, p + got, n - got, static_cast<off_t>(s->offset + s->pos + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
          zip_error_set(&s->error, r < 0 ? ZIP_ER_READ : ZIP_ER_EOF, r < 0 ? errno : 0);
          return -1;
        }
        got += static_cast<uint64_t>(r);
      }
      s->pos += n;
      return static_cast<zip_int64_t>(n);
    }
    case ZIP_SOURCE_CLOSE: return 0;
    case ZIP_SOURCE_STAT: {
      zip_stat_t* st = ZIP_SOURCE_GET_ARGS(zip_stat_t, data, len, &s->error);
      if (!st) return -1;
      zip_stat_init(st);
      st->size = s->size;
      st->valid |= ZIP_STAT_SIZE;
      return sizeof(zip_stat_t);
    }
    case ZIP_SOURCE_ERROR: return zip_error_to_data(&s->error, data, len);
    case ZIP_SOURCE_FREE: return 0;  // the slice belongs to the writer
    case ZIP_SOURCE_SUPPORTS:
      return zip_source_make_command_bitmap(ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE,
                                            ZIP_SOURCE_STAT, ZIP_SOURCE_ERROR, ZIP_SOURCE_FREE, -1);
    default: zip_error_set(&s->error, ZIP_ER_OPNOTSUPP, 0); return -1;
  }
}

// numpy's zip members carry the date 1980-01-01 00:00 (zipfile's default); libzip converts a
// time_t through localtime, so ask for local midnight.
time_t numpy_member_time() {
  std::tm tm{};
  tm.tm_year = 80;
  tm.tm_mon = 0;
  tm.tm_mday = 1;
  tm.tm_isdst = -1;
  return std::mktime(&tm);
}

class NpzWriter final : public SnapshotWriter {
 public:
  NpzWriter(const std::string& path, bool overwrite) : path_(path) {
    fs::path dir;
    if (path == "-") {
      dir = temp_dir();
    } else {
      out_ = std::make_unique<AtomicOutput>(path, overwrite);
      dir = fs::path(path).parent_path();
      if (dir.empty()) dir = ".";
    }
    std::string spool_name;
    spool_fd_ = make_temp(dir, path == "-" ? "gradcodec-stdout" : fs::path(path).filename().string(),
                          "spool", spool_name, target());
    ::unlink(spool_name.c_str());  // lives as long as the descriptor
  }
  ~NpzWriter() override {
    if (spool_fd_ >= 0) ::close(spool_fd_);
  }

  void add(const Tensor& t) override {
    const std::string& name = t.name();
    if (name.empty() || name.find('\0') != std::string::npos || name.front() == '/' ||
        name == ".." || name.rfind("../", 0) == 0 || ends_with(name, "/..") ||
        name.find("/../") != std::string::npos)
      fail(ErrorCode::Usage, target() + ": tensor name '" + name +
                                 "' cannot be an npz member name (empty, absolute or with '..')");
    if (!names_.insert(name).second) fail(ErrorCode::Usage, target() + ": two tensors named '" + name + "'");
    uint64_t start = spool_size_, pos = start;
    try {
      npy::write_array(t, [&](const void* p, size_t n) { spool_write(p, n, pos); }, warnings_);
    } catch (...) {
      names_.erase(name);
      throw;
    }
    auto slice = std::make_unique<SpoolSlice>();
    slice->fd = spool_fd_;
    slice->offset = start;
    slice->size = pos - start;
    members_.push_back({name + ".npy", std::move(slice)});
    spool_size_ = pos;
  }

  void finish() override {
    if (finished_) fail(ErrorCode::Internal, target() + ": finish() called twice");
    if (path_ == "-") {
      TempName zip_file;
      ::close(make_temp(temp_dir(), "gradcodec-stdout", "zip", zip_file.name, target()));
      build_zip(zip_file.name);
      copy_to_stdout(zip_file.name);
    } else {
      out_->release_handle();
      build_zip(out_->temp_path());
      npy::sync_file(out_->temp_path(), path_);
      out_->commit();
    }
    finished_ = true;
  }

  std::vector<std::string> take_warnings() override { return std::exchange(warnings_, {}); }

 private:
  struct Member {
    std::string name;
    std::unique_ptr<SpoolSlice> slice;
  };

  std::string target() const { return path_ == "-" ? std::string("<stdout>") : path_; }

  void spool_write(const void* data, size_t n, uint64_t& pos) {
    auto* p = static_cast<const uint8_t*>(data);
    while (n > 0) {
      ssize_t w = ::pwrite(spool_fd_, p, n, static_cast<off_t>(pos));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0)
        fail(ErrorCode::Input, target() + ": cannot write temporary data: " +
                                   std::strerror(w < 0 ? errno : ENOSPC));
      p += w;
      n -= static_cast<size_t>(w);
      pos += static_cast<uint64_t>(w);
    }
  }

  // Writes the archive to the file `name` (which exists and is empty).
  void build_zip(const std::string& name) {
    if (members_.empty()) {  // libzip deletes an archive left empty; numpy writes the bare EOCD
      static const uint8_t eocd[22] = {'P', 'K', 5, 6};
      FILE* f = std::fopen(name.c_str(), "wb");
      bool ok = f && std::fwrite(eocd, 1, sizeof eocd, f) == sizeof eocd;
      ok = (f && std::fclose(f) == 0) && ok;
      if (!ok) fail(ErrorCode::Input, target() + ": write failed: " + std::strerror(errno));
      return;
    }
    int code = 0;
    zip_t* raw = zip_open(name.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
    if (!raw) {
      zip_error_t err;
      zip_error_init_with_code(&err, code);
      std::string msg = zip_error_strerror(&err);
      zip_error_fini(&err);
      fail(ErrorCode::Input, target() + ": cannot create zip archive: " + msg);
    }
    ZipPtr za(raw);
    const time_t mtime = numpy_member_time();
    for (Member& m : members_) {
      zip_source_t* src = zip_source_function(za.get(), spool_callback, m.slice.get());
      zip_int64_t idx = src ? zip_file_add(za.get(), m.name.c_str(), src, ZIP_FL_ENC_GUESS) : -1;
      if (idx < 0) {
        if (src) zip_source_free(src);
        fail(ErrorCode::Input, target() + ": cannot add member '" + m.name + "': " + zip_strerror(za.get()));
      }
      auto i = static_cast<zip_uint64_t>(idx);
      if (zip_set_file_compression(za.get(), i, ZIP_CM_STORE, 0) != 0 ||
          zip_file_set_mtime(za.get(), i, mtime, 0) != 0)
        fail(ErrorCode::Input, target() + ": cannot add member '" + m.name + "': " + zip_strerror(za.get()));
    }
    if (zip_close(za.get()) != 0)
      fail(ErrorCode::Input, target() + ": cannot write zip archive: " + zip_strerror(za.get()));
    za.release();  // zip_close freed it
  }

  void copy_to_stdout(const std::string& name) {
    FILE* f = std::fopen(name.c_str(), "rb");
    if (!f) fail(ErrorCode::Input, "<stdout>: cannot reopen the temporary archive: " + std::string(std::strerror(errno)));
    std::unique_ptr<FILE, int (*)(FILE*)> guard(f, std::fclose);
    AtomicOutput out("-", true);
    std::vector<uint8_t> buf(1 << 16);
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) out.write(buf.data(), n);
    if (std::ferror(f)) fail(ErrorCode::Input, "<stdout>: cannot read the temporary archive");
    out.commit();
  }

  std::string path_;
  std::unique_ptr<AtomicOutput> out_;  // null for "-"
  int spool_fd_ = -1;
  uint64_t spool_size_ = 0;
  std::set<std::string> names_;
  std::vector<Member> members_;
  std::vector<std::string> warnings_;
  bool finished_ = false;
};

}  // namespace

std::unique_ptr<SnapshotReader> open_npz(std::shared_ptr<const InputFile> file) {
  return std::make_unique<NpzReader>(std::move(file));
}

std::unique_ptr<SnapshotWriter> create_npz(const std::string& path, bool overwrite) {
  return std::make_unique<NpzWriter>(path, overwrite);
}

}  // namespace gradcodec::formats
