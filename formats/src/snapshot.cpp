// SPDX-License-Identifier: BSD-3-Clause
// Format dispatch: by extension, by directory, or by magic bytes.
#include "npy.hpp"
#include "readers.hpp"
#include "zip_read.hpp"

#include <gradcodec/error.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <sys/stat.h>

namespace gradcodec::formats {

namespace {

std::string lower_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext;
}

// The snapshot format a file's first bytes name: NPY, zip and HDF5 magic numbers, and for
// safetensors a u64 header length then '{'. A zip is a torch.save file when its central directory
// lists ARCHIVE/data.pkl (only once the whole file is given: its first bytes alone say NPZ). The one table of magic numbers: opening by content,
// standard input and sniff_format all ask it.
std::optional<Format> format_by_magic(const uint8_t* d, uint64_t size) noexcept {
  auto starts = [&](const char* magic, size_t n) { return size >= n && std::memcmp(d, magic, n) == 0; };
  if (starts("\x93NUMPY", 6)) return Format::Npy;
  if (starts("PK\x03\x04", 4) || starts("PK\x05\x06", 4))
    return zip_has_torch_pickle(d, size) ? Format::Torch : Format::Npz;
  if (starts("\x89HDF\r\n\x1a\n", 8)) return Format::Hdf5;
  if (size >= 9 && d[8] == '{') return Format::Safetensors;
  return std::nullopt;
}

bool starts_with(const std::shared_ptr<const InputFile>& f, const char* magic, size_t n) {
  return f->size() >= n && std::memcmp(f->data(), magic, n) == 0;
}

std::unique_ptr<SnapshotReader> open_by_magic(std::shared_ptr<const InputFile> f) {
  if (auto format = format_by_magic(f->data(), f->size())) switch (*format) {
      case Format::Npy: return open_npy(f);
      case Format::Npz: return open_npz(f);
      case Format::Hdf5: return open_hdf5(f);
      case Format::Safetensors: return open_safetensors(f);
      case Format::Torch: return open_torch(f);
      case Format::NpyDir:
      case Format::Sharded: break;
    }
  // What users pass by mistake, said as such.
  if (f->size() == 0) fail(ErrorCode::Input, f->path() + ": empty input");
  if (starts_with(f, "\x89GCZ\r\n\x1a\n", 8))
    fail(ErrorCode::Input, f->path() + ": a gradcodec container, not gradients; gradcodec decode turns it back "
                                       "into tensors");
  // torch.save's legacy format: a pickle stream starting with the LONG1 magic number
  // 0x1950a86a20f9469cfc6c (torch/serialization.py, MAGIC_NUMBER).
  if (starts_with(f, "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 14))
    fail(ErrorCode::Input, f->path() + ": a PyTorch file in the legacy format (PyTorch < 1.6, or "
                                       "_use_new_zipfile_serialization=False), a bare pickle stream, which is "
                                       "never unpickled; re-save it with torch.save(obj, path) in the default zip "
                                       "format of PyTorch >= 1.6");
  if (f->size() >= 2 && f->data()[0] == 0x80 && f->data()[1] >= 2 && f->data()[1] <= 5)
    fail(ErrorCode::Input, f->path() + ": a Python pickle (torch.save's legacy format or pickle.dump), which "
                                       "is never unpickled; save the gradients with safetensors or np.savez");
  fail(ErrorCode::Input, f->path() + ": unknown file format (expected .npy, .npz, .h5, .safetensors, .pt)");
}

// Standard input: its format from the first bytes (an unknown one refused at once), then as many
// bytes as the format declares — an NPY header gives its data's size, a safetensors header its
// tensors' offsets — and no more; an NPZ, an HDF5 image or a pickled NPY array, whose size only
// their end shows, to the end (at most kStdinCap).
std::unique_ptr<SnapshotReader> open_stdin() {
  StdinReader in;
  in.fill(npy::kPreambleBytes);
  const auto& b = in.bytes();
  const std::optional<Format> format = format_by_magic(b.data(), b.size());
  constexpr uint64_t kUnknown = uint64_t{1} << 62;  // a size no stream reaches: "not yet known"
  if (format == Format::Npy) {
    const uint64_t end = npy::header_end(b.data(), b.size(), in.ended() ? b.size() : kUnknown, "<stdin>");
    if (in.fill(end)) {
      const npy::Header h = npy::parse_header(b.data(), end, kUnknown, "<stdin>");
      if (h.pickled)
        in.fill_to_end();
      else
        in.fill(end + h.data_bytes);
    }
    return open_npy(in.take());  // a short stream is refused by the reader, saying what is missing
  }
  if (format == Format::Npz || format == Format::Hdf5 || format == Format::Torch) {
    in.fill_to_end();
    return open_by_magic(in.take());
  }
  if (format == Format::Safetensors) {
    in.fill(safetensors_declared_size(b.data(), b.size()));  // the header
    in.fill(safetensors_declared_size(b.data(), b.size()));  // then the data it declares
    return open_safetensors(in.take());
  }
  return open_by_magic(in.take());  // unknown (or empty): refused on these few bytes
}

}  // namespace

const char* format_name(Format f) noexcept {
  switch (f) {
    case Format::Npy: return "npy";
    case Format::NpyDir: return "npy-dir";
    case Format::Npz: return "npz";
    case Format::Hdf5: return "hdf5";
    case Format::Safetensors: return "safetensors";
    case Format::Torch: return "torch";
    case Format::Sharded: return "sharded";
  }
  return "?";
}

const char* format_title(Format f) noexcept {
  switch (f) {
    case Format::Npy: return "NPY";
    case Format::NpyDir: return "directory of NPY";
    case Format::Npz: return "NPZ";
    case Format::Hdf5: return "HDF5";
    case Format::Safetensors: return "safetensors";
    case Format::Torch: return "PyTorch (torch.save)";
    case Format::Sharded: return "sharded checkpoint";
  }
  return "?";
}

std::optional<std::string> snapshot_not_container(const uint8_t* data, uint64_t size) {
  static const char kGcz[8] = {'\x89', 'G', 'C', 'Z', '\r', '\n', '\x1a', '\n'};
  if (size >= 8 && std::memcmp(data, kGcz, 8) == 0) return std::nullopt;
  const auto f = sniff_format(data, size);
  if (!f) {
    // A sharded checkpoint's index (read by name, never sniffed as a snapshot): a JSON object
    // whose first 1 MiB names "weight_map", as save_pretrained writes it.
    uint64_t at = 0;
    while (at < size && (data[at] == ' ' || data[at] == '\n' || data[at] == '\r' || data[at] == '\t')) ++at;
    static const char kKey[] = "\"weight_map\"";
    const uint64_t n = std::min<uint64_t>(size, uint64_t{1} << 20);
    if (at < n && data[at] == '{' &&
        std::search(data + at, data + n, kKey, kKey + sizeof kKey - 1) != data + n)
      return std::string("this is a sharded checkpoint's index, not a gradcodec container; `gradcodec encode` "
                         "compresses its shards (name it NAME.safetensors.index.json or NAME.bin.index.json)");
    return std::nullopt;
  }
  return std::string("this is ") + (*f == Format::Npz || *f == Format::Npy ? "an " : "a ") + format_title(*f) +
         " file, not a gradcodec container; `gradcodec encode` compresses it";
}

std::optional<Format> sniff_format(const uint8_t* d, uint64_t size) noexcept {
  const std::optional<Format> f = format_by_magic(d, size);
  if (f != Format::Safetensors) return f;
  // '{' at byte 8 alone is weak evidence: the header length must also fit in the file.
  uint64_t n = 0;
  for (int k = 7; k >= 0; --k) n = (n << 8) | d[k];
  if (size >= 10 && n >= 2 && n <= size - 8) return f;
  return std::nullopt;
}

std::unique_ptr<SnapshotReader> open_shard(std::shared_ptr<const InputFile> f) {
  const std::optional<Format> format = format_by_magic(f->data(), f->size());
  if (format == Format::Safetensors) return open_safetensors(f);
  if (format == Format::Torch) return open_torch(f);
  const std::string ext = lower_extension(f->path());
  if (format == Format::Npz && (ext == ".bin" || ext == ".pt" || ext == ".pth")) return open_torch(f);
  if (format) fail(ErrorCode::Input, f->path() + ": " + (*format == Format::Npz || *format == Format::Npy ? "an " : "a ") +
                                         format_title(*format) + " file, not a safetensors or torch.save shard");
  // What open_by_magic names (empty, a container, a legacy torch.save or a pickle) is refused
  // saying so; anything else here.
  if (f->size() == 0 || f->data()[0] == 0x80 || starts_with(f, "\x89GCZ", 4)) return open_by_magic(f);
  fail(ErrorCode::Input, f->path() + ": neither a safetensors file nor a torch.save zip");
}

std::unique_ptr<SnapshotReader> open_snapshot(const std::string& path) {
  if (path != "-" && is_directory(path)) return open_npy_dir(path);
  if (path != "-" && is_sharded_index_name(path)) return open_sharded(path);
  // An npz's members are read with pread (InputFile::read_at), so its descriptor stays open;
  // the other formats read the mapping and keep no descriptor (encode opens every input of a
  // sequence before it starts).
  const std::string ext = path == "-" ? std::string() : lower_extension(path);
  if (path == "-") return open_stdin();
  auto file = InputFile::open(path, ext == ".npz");
  if (ext == ".npy") return open_npy(file);
  if (ext == ".npz" && format_by_magic(file->data(), file->size()) == Format::Torch) return open_torch(file);
  if (ext == ".npz") return open_npz(file);
  if (ext == ".h5" || ext == ".hdf5") return open_hdf5(file);
  if (ext == ".safetensors") return open_safetensors(file);
  const std::optional<Format> by_magic = format_by_magic(file->data(), file->size());
  // .pt, .pth, .bin: a zip is read as torch.save's (a TorchScript or foreign zip is refused by the
  // reader, saying what it is); anything else by its content (the legacy format, a pickle).
  if ((ext == ".pt" || ext == ".pth" || ext == ".bin") && (by_magic == Format::Torch || by_magic == Format::Npz))
    return open_torch(file);
  if (by_magic == Format::Npz) return open_npz(InputFile::open(path, true));
  return open_by_magic(file);
}

Format format_for_output(const std::string& path) {
  if (path == "-") return Format::Npz;
  if (!path.empty() && path.back() == '/') return Format::NpyDir;
  if (is_directory(path)) return Format::NpyDir;
  std::string ext = lower_extension(path);
  if (ext == ".npy") return Format::Npy;
  if (ext == ".npz") return Format::Npz;
  if (ext == ".h5" || ext == ".hdf5") return Format::Hdf5;
  if (ext == ".safetensors") return Format::Safetensors;
  if (ext == ".pt" || ext == ".pth" || ext == ".bin") return Format::Torch;
  // A device or a FIFO with no format in its name (/dev/null, a named pipe): NPZ, as for "-".
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) return Format::Npz;
  fail(ErrorCode::Usage, path + ": cannot tell the output format (use .npz, .h5, .hdf5, "
                                ".safetensors, .pt, .npy or a directory ending in '/')");
}

std::unique_ptr<SnapshotWriter> create_snapshot(const std::string& path, bool overwrite) {
  switch (format_for_output(path)) {
    case Format::Npy: return create_npy(path, overwrite);
    case Format::NpyDir: return create_npy_dir(path, overwrite);
    case Format::Npz: return create_npz(path, overwrite);
    case Format::Hdf5: return create_hdf5(path, overwrite);
    case Format::Safetensors: return create_safetensors(path, overwrite);
    case Format::Torch: return create_torch(path, overwrite);
    case Format::Sharded: break;  // (never an output format)
  }
  fail(ErrorCode::Internal, "unreachable output format");
}

}  // namespace gradcodec::formats
