// SPDX-License-Identifier: BSD-3-Clause
#include <gradcodec/error.hpp>
#include <gradcodec/file_io.hpp>
#include <gradcodec/input_changes.hpp>

#include "base/mapped_inputs.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>
#include <algorithm>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gradcodec {

namespace fs = std::filesystem;

bool path_exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(path, ec)) && !ec;
}

bool is_directory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

namespace {

// The temporaries of the AtomicOutputs and the ScratchFiles alive now, for
// remove_temporary_outputs(): a slot holds the path's characters (owned by its AtomicOutput or
// ScratchFile, unchanged while listed) or null.
constexpr int kTempSlots = 4096;
std::atomic<const char*> g_temps[kTempSlots];

int list_temporary(const char* path) noexcept {
  for (int i = 0; i < kTempSlots; ++i) {
    const char* expected = nullptr;
    if (g_temps[i].compare_exchange_strong(expected, path)) return i;
  }
  return -1;  // full: only the destructor removes this one
}

// The directories listed by CreatedDirectory objects alive now (same scheme as g_temps).
constexpr int kDirSlots = 4096;
std::atomic<const char*> g_dirs[kDirSlots];

}  // namespace

std::string not_regular(unsigned mode) {
  if (S_ISDIR(mode)) return "is a directory, not a regular file";
  const char* what = S_ISFIFO(mode)   ? "a FIFO (named pipe)"
                     : S_ISCHR(mode)  ? "a character device"
                     : S_ISBLK(mode)  ? "a block device"
                     : S_ISSOCK(mode) ? "a socket"
                                      : "a special file";
  return std::string("is ") + what + ", not a regular file; read it through standard input ('-') instead";
}

void remove_temporary_outputs() noexcept {
  for (auto& slot : g_temps)
    if (const char* p = slot.exchange(nullptr)) ::unlink(p);
  // Then the directories made for the outputs, now empty unless they hold something else (which
  // keeps them). Listed in no particular order: each pass removes the deepest ones left, so a
  // nest as deep as the number of listed directories goes in as many passes.
  for (bool progress = true; progress;) {
    progress = false;
    for (auto& slot : g_dirs) {
      const char* p = slot.load();
      if (p && ::rmdir(p) == 0) {
        slot.store(nullptr);
        progress = true;
      }
    }
  }
}

CreatedDirectory::CreatedDirectory(std::string path) : path_(std::move(path)) {
  for (int i = 0; i < kDirSlots && slot_ < 0; ++i) {
    const char* expected = nullptr;
    if (g_dirs[i].compare_exchange_strong(expected, path_.c_str())) slot_ = i;
  }
}

CreatedDirectory::~CreatedDirectory() { release(); }

void CreatedDirectory::release() noexcept {
  if (slot_ >= 0) g_dirs[slot_].store(nullptr);
  slot_ = -1;
}

std::vector<std::unique_ptr<CreatedDirectory>> create_missing_directories(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::unique_ptr<CreatedDirectory>> created;
  for (fs::path p = fs::path(dir).lexically_normal(); !p.empty() && !path_exists(p.string()); p = p.parent_path()) {
    if (p.filename().empty()) p = p.parent_path();  // "DIR/" → "DIR"
    if (p.empty() || path_exists(p.string())) break;
    created.push_back(std::make_unique<CreatedDirectory>(p.string()));
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(ErrorCode::Input, dir + ": cannot create directory: " + ec.message());
  return created;
}

ScratchFile::ScratchFile(std::string path) : path_(std::move(path)), slot_(list_temporary(path_.c_str())) {}

ScratchFile::~ScratchFile() {
  if (slot_ >= 0) g_temps[slot_].store(nullptr);
  ::unlink(path_.c_str());
}

AtomicOutput::AtomicOutput(const std::string& target, bool overwrite)
    : target_(target), overwrite_(overwrite) {
  if (target == "-") {
    is_stdout_ = true;
    f_ = stdout;
    return;
  }
  if (target.empty()) fail(ErrorCode::Usage, "the output path is empty");
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    direct_ = true;  // a device or a FIFO: written in place (see the header)
    f_ = std::fopen(target.c_str(), "wb");
    if (!f_) fail(ErrorCode::Input, target + ": cannot open output: " + std::strerror(errno));
    return;
  }
  if (!overwrite && path_exists(target))
    fail(ErrorCode::Usage, target + ": already exists (use --force to replace it)");
  fs::path t(target);
  fs::path dir = t.parent_path().empty() ? fs::path(".") : t.parent_path();
  std::string name = ".";  // built by appends: GCC 12 warns falsely (-Wrestrict) on "." + str + "..."
  name += t.filename().string();
  name += ".tmp-XXXXXX";
  // Listed before it exists: a signal between mkstemp's creating the file and a later listing
  // left the file behind (the likely cause of cli_errors' interrupt test failing under load).
  // mkstemp fills in the X's in place; until then remove_temporary_outputs() unlinks a name no
  // file has.
  temp_ = (dir / name).string();
  slot_ = list_temporary(temp_.c_str());
  const int fd = ::mkstemp(temp_.data());
  if (fd < 0) {
    const int err = errno;
    unlist();
    temp_.clear();
    fail(ErrorCode::Input, target + ": cannot create output: " + std::strerror(err));
  }
  ::fchmod(fd, 0644);
  f_ = ::fdopen(fd, "wb");
  if (!f_) {
    ::close(fd);
    unlist();
    ::unlink(temp_.c_str());
    fail(ErrorCode::Input, target + ": cannot open output: " + std::strerror(errno));
  }
}

AtomicOutput::~AtomicOutput() {
  if (is_stdout_) return;
  if (f_) std::fclose(f_);
  unlist();
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

void AtomicOutput::unlist() noexcept {
  if (slot_ >= 0) g_temps[slot_].store(nullptr);
  slot_ = -1;
}

void AtomicOutput::write(const void* data, size_t n) {
  if (n == 0) return;
  if (!f_) fail(ErrorCode::Internal, "AtomicOutput::write after release_handle");
  if (std::fwrite(data, 1, n, f_) != n) {
    // EFAULT: the bytes came from an input's mapping, truncated meanwhile (the kernel does not
    // raise SIGBUS for its own reads): that is the error to report.
    if (errno == EFAULT) check_range_readable(data, n);
    fail(ErrorCode::Input, (is_stdout_ ? std::string("<stdout>") : target_) +
                               ": write failed: " + std::strerror(errno));
  }
  written_ += n;
}

void AtomicOutput::release_handle() {
  if (is_stdout_) fail(ErrorCode::Internal, "AtomicOutput::release_handle on stdout");
  if (direct_) fail(ErrorCode::Usage, target_ + ": is a device or a FIFO; this format is written to a regular file");
  if (f_) std::fclose(f_);
  f_ = nullptr;
}

void AtomicOutput::seal() {
  if (sealed_) return;
  check_inputs_unchanged();  // nothing made from an input that changed while it was read
  if (is_stdout_) {
    if (std::fflush(stdout) != 0) fail(ErrorCode::Input, "<stdout>: write failed");
    sealed_ = committed_ = true;
    return;
  }
  if (f_) {
    // fsync of a device or a FIFO may fail (EINVAL) for want of anything to sync: not an error.
    bool bad = std::fflush(f_) != 0 || (!direct_ && ::fsync(::fileno(f_)) != 0);
    bad = (std::fclose(f_) != 0) || bad;
    f_ = nullptr;
    if (bad) fail(ErrorCode::Input, target_ + ": write failed: " + std::strerror(errno));
  }
  sealed_ = true;
  if (direct_) committed_ = true;
}

void AtomicOutput::publish() {
  if (committed_) return;
  if (!sealed_) fail(ErrorCode::Internal, target_ + ": publish() before seal()");
  if (!overwrite_ && path_exists(target_))
    fail(ErrorCode::Usage, target_ + ": already exists (use --force to replace it)");
  if (::rename(temp_.c_str(), target_.c_str()) != 0)
    fail(ErrorCode::Input, target_ + ": cannot rename output into place: " + std::strerror(errno));
  committed_ = true;
  unlist();
}

std::shared_ptr<const InputFile> InputFile::open(const std::string& path, bool readable, ErrorCode changed) {
  std::shared_ptr<InputFile> f(new InputFile());
  f->path_ = path;
  f->changed_ = changed;
  if (path == "-") {
    StdinReader in;
    in.fill_to_end();
    return in.take(changed);
  }
  // Checked before the open, which would wait for a writer on a FIFO (forever, if none comes)
  // or act on a device; opened with O_NONBLOCK so that a path swapped for a FIFO between the
  // stat and the open cannot block either, then checked again on the descriptor.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(ErrorCode::Input, path + ": cannot open: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(ErrorCode::Input, path + ": " + not_regular(st.st_mode));
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(ErrorCode::Input, path + ": cannot open: " + std::strerror(errno));
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(ErrorCode::Input, path + ": " + not_regular(st.st_mode));
  }
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ > 0) {
    void* m = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      fail(ErrorCode::Input, path + ": cannot map: " + std::strerror(errno));
    }
    f->map_ = m;
    f->data_ = static_cast<const uint8_t*>(m);
    f->slot_ = list_mapping(m, f->size_, f->path_.c_str(), changed);
    if (readable) {
      f->fd_ = fd;
      return f;
    }
  }
  ::close(fd);
  return f;
}

bool StdinReader::fill(uint64_t n) {
  if (n > kStdinCap)
    fail(ErrorCode::Input, "<stdin>: its header declares " + std::to_string(n) + " bytes, more than the " +
                               std::to_string(kStdinCap >> 30) +
                               " GiB read through standard input; give the file's name instead");
  return read_until(n);
}

bool StdinReader::read_until(uint64_t n) {
  uint8_t buf[1 << 16];
  while (!ended_ && bytes_.size() < n) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(sizeof buf, n - bytes_.size()));
    const ssize_t got = ::read(STDIN_FILENO, buf, want);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(ErrorCode::Input, std::string("<stdin>: read failed: ") + std::strerror(errno));
    if (got == 0) ended_ = true;
    bytes_.insert(bytes_.end(), buf, buf + got);  // grows as bytes come, not as a header claims
  }
  return bytes_.size() >= n;
}

void StdinReader::fill_to_end() {
  if (read_until(kStdinCap + 1))
    fail(ErrorCode::Input, "<stdin>: more than " + std::to_string(kStdinCap >> 30) +
                               " GiB through standard input, and the format declares no size; give the file's "
                               "name instead");
}

std::shared_ptr<const InputFile> StdinReader::take(ErrorCode changed) {
  std::shared_ptr<InputFile> f(new InputFile());
  f->path_ = "<stdin>";
  f->owned_ = std::exchange(bytes_, {});
  f->data_ = f->owned_.data();
  f->size_ = f->owned_.size();
  f->changed_ = changed;
  return f;
}

std::shared_ptr<const InputFile> InputFile::from_bytes(std::vector<uint8_t> bytes, const std::string& name) {
  std::shared_ptr<InputFile> f(new InputFile());
  f->path_ = name;
  f->owned_ = std::move(bytes);
  f->data_ = f->owned_.data();
  f->size_ = f->owned_.size();
  return f;
}

InputFile::~InputFile() {
  unlist_mapping(slot_);
  if (map_) ::munmap(map_, size_);
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_at(uint64_t offset, uint8_t* dst, size_t n) const {
  if (offset > size_ || n > size_ - offset) fail(ErrorCode::Input, path_ + ": range beyond the end of the file");
  if (fd_ < 0) {
    if (n) std::memcpy(dst, data_ + offset, n);
    return;
  }
  while (n) {
    const ssize_t got = ::pread(fd_, dst, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(changed_, path_ + ": read failed: " + std::strerror(errno));
    if (got == 0) fail(changed_, path_ + ": the file shrank (or could not be read) while it was being read");
    dst += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<size_t>(got);
  }
}

namespace {
// Owner of a slice of a memory-mapped file: when the last Buffer viewing the slice goes, the
// pages under it leave the process (MADV_DONTNEED). The mapping is private and never written,
// so a later read of those pages (another slice sharing an edge page, a second load of the
// same tensor) simply faults them in again from the page cache. Without this, every page of
// an input read once would stay in the resident set until the file is closed: encoding a 2 GB
// snapshot would hold 2 GB.
struct MappedSlice {
  std::shared_ptr<const InputFile> file;
  const uint8_t* begin;
  uint64_t size;
  ~MappedSlice() {
    static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    if (size < 4 * page) return;  // small slices: not worth a system call
    const uintptr_t a = reinterpret_cast<uintptr_t>(begin) & ~(page - 1);
    const uintptr_t e = (reinterpret_cast<uintptr_t>(begin) + size + page - 1) & ~(page - 1);
    ::madvise(reinterpret_cast<void*>(a), e - a, MADV_DONTNEED);  // advice only: failure is harmless
  }
};
}  // namespace

Buffer InputFile::slice(uint64_t offset, uint64_t n) const {
  if (offset > size_ || n > size_ - offset)
    fail(ErrorCode::Input, path_ + ": range beyond the end of the file");
  if (!map_) return Buffer::view(shared_from_this(), data_ + offset, n);
  auto owner = std::make_shared<const MappedSlice>(MappedSlice{shared_from_this(), data_ + offset, n});
  return Buffer::view(std::move(owner), data_ + offset, n);
}

}  // namespace gradcodec
