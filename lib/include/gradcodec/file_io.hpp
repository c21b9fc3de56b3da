// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — small file utilities shared by the container and the format adapters.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <gradcodec/error.hpp>
#include <gradcodec/tensor.hpp>

namespace gradcodec {

// Output written to a temporary file in the target's directory and renamed onto the target by
// commit(). Until commit() the target is untouched; destroying an uncommitted AtomicOutput removes
// the temporary. With `overwrite` false, commit() refuses (Error Usage) when the target exists
// (checked at construction too, so nothing is computed in vain). Path "-" writes to standard
// output directly (no temporary, no rename), and so does a target that exists and is neither a
// regular file nor a directory — a device such as /dev/null, or a FIFO: there is nothing there
// to replace, and a rename would replace the device node itself (temp_path() is then empty, so
// a writer that needs a named file refuses it).
//
// Every temporary not yet renamed is also listed for remove_temporary_outputs(), which a signal
// handler may call: an interrupted run (SIGINT, SIGTERM) then leaves none behind.
class AtomicOutput {
 public:
  AtomicOutput(const std::string& target, bool overwrite);
  ~AtomicOutput();
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;

  void write(const void* data, size_t n);  // throws Error(Input) on a failed write (disk full)
  uint64_t position() const noexcept { return written_; }
  // The temporary's path (for libraries that must write by name, e.g. HDF5, libzip); empty for "-".
  const std::string& temp_path() const noexcept { return temp_; }
  // Closes our handle so a library can write temp_path() by name; write() is unusable after.
  void release_handle();
  // seal(): the temporary complete on disk (flushed, synced, closed); publish(): renamed into
  // place (refused if the target appeared meanwhile and overwrite is off). commit() does both; a
  // caller with several outputs seals them all before it publishes any, so that a failure on
  // one leaves none. For "-", seal() flushes standard output and publish() does nothing.
  void seal();
  void publish();
  void commit() {
    seal();
    publish();
  }

 private:
  void unlist() noexcept;

  std::string target_;
  std::string temp_;
  FILE* f_ = nullptr;
  bool overwrite_;
  bool sealed_ = false, committed_ = false;
  bool is_stdout_ = false;
  bool direct_ = false;  // a device or FIFO, written in place
  int slot_ = -1;        // in the list remove_temporary_outputs() reads
  uint64_t written_ = 0;
};

// A scratch file the program writes and reads back and that must not outlive it (bench's
// container): listed for remove_temporary_outputs() while this object lives, removed (if there)
// by the destructor.
class ScratchFile {
 public:
  explicit ScratchFile(std::string path);
  ~ScratchFile();
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
  int slot_ = -1;
};

// A directory made for outputs (decode's DIR/ and DIR/frameNNN/), listed for
// remove_temporary_outputs() from before it is created until release() — once the outputs in it
// are in place — or until this object goes: an interrupted run removes it again. Only
// directories the program creates are listed, so one that existed before is never removed.
// The owner removes it itself on a failure (the list is for signal handlers; the first 4096
// alive at once are listed).
class CreatedDirectory {
 public:
  explicit CreatedDirectory(std::string path);
  ~CreatedDirectory();  // unlists; does not remove
  CreatedDirectory(const CreatedDirectory&) = delete;
  CreatedDirectory& operator=(const CreatedDirectory&) = delete;
  const std::string& path() const noexcept { return path_; }
  void release() noexcept;

 private:
  std::string path_;
  int slot_ = -1;
};

// Creates `dir` and its missing parents, listing each one it creates (deepest first, listed before
// it exists, for remove_temporary_outputs). Error(Input) naming `dir` when it cannot. The caller
// removes them, when left empty, on a failure (std::filesystem::remove, deepest first), or
// releases them once its output is complete.
std::vector<std::unique_ptr<CreatedDirectory>> create_missing_directories(const std::string& dir);

// Unlinks every AtomicOutput temporary not yet renamed into place and every ScratchFile (those of
// the first 4096 alive at once; more are removed by their destructors only), then every listed
// CreatedDirectory that is empty. Async-signal-safe: only reads fixed tables and calls unlink(2)
// and rmdir(2). For the CLI's handlers of SIGINT/SIGTERM/SIGHUP.
void remove_temporary_outputs() noexcept;

// A read-only view of a whole file: memory-mapped where possible, else read into memory ("-" reads
// standard input). Throws Error(Input) naming the path when it cannot be opened.
class InputFile : public std::enable_shared_from_this<InputFile> {
 public:
  // With `readable`, a mapped file stays open for read_at() (one descriptor per InputFile).
  // `changed`: the code of the error when the file shrinks while it is read (a short read_at, or
  // a fault on the mapping: <gradcodec/input_changes.hpp>) — Corrupt for a container.
  // A path that is not a regular file (a FIFO, a device) is refused before it is opened.
  static std::shared_ptr<const InputFile> open(const std::string& path, bool readable = false,
                                               ErrorCode changed = ErrorCode::Input);
  // Bytes already in memory, named `name` in error messages (tests, fuzzers, stdin images).
  static std::shared_ptr<const InputFile> from_bytes(std::vector<uint8_t> bytes, const std::string& name);
  const uint8_t* data() const noexcept { return data_; }
  uint64_t size() const noexcept { return size_; }
  const std::string& path() const noexcept { return path_; }
  // A Buffer viewing [offset, offset+n) that keeps the file alive; bounds are checked (Error Input).
  Buffer slice(uint64_t offset, uint64_t n) const;
  // Whether read_at() reads from the file (opened `readable` and mapped), not from data().
  bool reads_file() const noexcept { return fd_ >= 0; }
  // Copies [offset, offset+n) into dst. A file opened `readable` is read with pread, so the
  // mapping's pages are never touched (on some virtual machines the first touch of each mapped
  // page costs more than copying it); else the bytes are copied from data(). Bounds are checked;
  // a failed or short read (the file shrank) is an Error (code `changed`) naming the path.
  void read_at(uint64_t offset, uint8_t* dst, size_t n) const;
  ~InputFile();

 private:
  friend class StdinReader;
  InputFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  void* map_ = nullptr;
  int fd_ = -1;  // open when mapped and `readable` (read_at)
  int slot_ = -1;  // the mapping's in the list of <gradcodec/input_changes.hpp>
  ErrorCode changed_ = ErrorCode::Input;
  std::vector<uint8_t> owned_;
};

// Standard input read only as far as asked (it may be endless: `< /dev/zero`). A reader learns
// from a stream's first bytes what it is and, for most formats, how long: it reads that much and
// no more, and reads to the end only what declares no size — never more than kStdinCap.
inline constexpr uint64_t kStdinCap = uint64_t{16} << 30;  // 16 GiB
class StdinReader {
 public:
  // Reads until `n` bytes are held in all or the stream ends; true when n are held. Error(Input)
  // when n (a size a header declares) is over kStdinCap.
  bool fill(uint64_t n);
  // Reads to the end of the stream; Error(Input) when it holds more than kStdinCap bytes.
  void fill_to_end();
  const std::vector<uint8_t>& bytes() const noexcept { return bytes_; }
  bool ended() const noexcept { return ended_; }
  // The bytes read, as the InputFile "<stdin>" (the reader is empty after).
  std::shared_ptr<const InputFile> take(ErrorCode changed = ErrorCode::Input);

 private:
  bool read_until(uint64_t n);
  std::vector<uint8_t> bytes_;
  bool ended_ = false;
};

// Why an input of this st_mode is refused ("is a FIFO (named pipe), not a regular file (...)"):
// a FIFO or a device is read only through standard input ("-"), never opened by name — opening
// a FIFO waits for a writer, forever if none comes.
std::string not_regular(unsigned mode);

bool path_exists(const std::string& path);
bool is_directory(const std::string& path);

}  // namespace gradcodec
