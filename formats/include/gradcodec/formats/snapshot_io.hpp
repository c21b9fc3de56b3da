// SPDX-License-Identifier: BSD-3-Clause
// gradcodec formats — read and write gradient snapshots (NPY, directory of NPY, NPZ, HDF5,
// safetensors, torch.save's zip format; sharded checkpoints, read only). A format never includes a stage; the library never includes a format.
//
// Every failure throws gradcodec::Error: ErrorCode::Input for unreadable, unsupported, corrupt or
// lying input files (one line naming the file and what is wrong), ErrorCode::Usage for an output
// path whose format cannot be told or cannot hold the data.
#pragma once

#include <gradcodec/tensor.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gradcodec::formats {

// Sharded: a sharded checkpoint's index (NAME.safetensors.index.json, NAME.bin.index.json), read
// as one snapshot of all its shards; told by its name only, and never written.
enum class Format { Npy, NpyDir, Npz, Hdf5, Safetensors, Torch, Sharded };
const char* format_name(Format f) noexcept;

// The snapshot format whose signature the first bytes of a file carry (NPY's "\x93NUMPY", a zip
// archive as NPZ — as torch.save's when its central directory, within `size`, lists data.pkl —, HDF5's "\x89HDF\r\n\x1a\n", safetensors' u64 header length followed by '{'
// and within the file), or nullopt. Lets a caller expecting something else (a container) say
// what the file is.
std::optional<Format> sniff_format(const uint8_t* data, uint64_t size) noexcept;
// "NPY", "NPZ", "directory of NPY", "HDF5", "safetensors", "PyTorch (torch.save)", "sharded
// checkpoint": the format as a user calls it.
const char* format_title(Format f) noexcept;
// For bytes given where a .gcz container is expected: when they are not one but a snapshot
// (sniff_format), what to tell the user ("this is an NPZ file, not a gradcodec container;
// `gradcodec encode` compresses it"; the same for a sharded checkpoint's index, a JSON object
// naming "weight_map"); else nullopt (a container, or bytes the container's own checks will
// refuse).
std::optional<std::string> snapshot_not_container(const uint8_t* data, uint64_t size);

// A lazily read snapshot: open() validates the container structure and lists every array
// (floating or not) in file order; read(i) loads one array's data. Lengths and offsets are
// checked against the file size before anything is allocated.
class SnapshotReader {
 public:
  virtual ~SnapshotReader() = default;
  virtual Format format() const = 0;
  virtual const std::string& path() const = 0;
  // Every array of the file, in file order. Non-floating arrays have dtype Other and a descr.
  virtual const std::vector<TensorInfo>& arrays() const = 0;
  // Loads array i (C order, little-endian). Throws Error(Input) when the data is truncated or
  // corrupt. Arrays whose data cannot be represented even as bytes (e.g. HDF5 variable-length)
  // throw Error(Input) naming the array.
  virtual Tensor read(size_t i) = 0;
  // The file's own key/value metadata (safetensors "__metadata__"), in file order; empty for
  // formats without one. encode keeps it in the container and decode to safetensors restores it.
  virtual std::vector<std::pair<std::string, std::string>> metadata() const { return {}; }
  // The attributes of an HDF5 file's groups and datasets as JSON text (the layout of
  // docs/formats.md, "HDF5 attributes"), or "" when there are none or the format has none.
  // Attributes that cannot be kept are named in notes().
  virtual std::string attributes_json() const { return {}; }
  // What open() saw in the file but will not read (HDF5 soft and external links), one line
  // each, for the caller to show: nothing is left out without a word.
  virtual std::vector<std::string> notes() const { return {}; }
  // Why read(i) will fail, when open() already knows it (HDF5 variable-length data, references,
  // data in other files, a missing filter); empty otherwise. Lets a caller refuse at once, before
  // it has read anything else.
  virtual std::string unreadable(size_t i) const {
    (void)i;
    return {};
  }
};

// Opens PATH by its extension (.npy, .npz, .h5, .hdf5, .safetensors, .pt/.pth/.bin when a zip, a
// sharded checkpoint's .safetensors.index.json / .bin.index.json) or as a directory of .npy
// files (sorted by name; each array named by its file stem). When the extension is unknown the
// first bytes decide. "-" reads standard input fully into memory and detects the format by magic.
std::unique_ptr<SnapshotReader> open_snapshot(const std::string& path);

// Writes tensors to PATH in the format its extension names (.npy for exactly one tensor, .npz,
// .h5/.hdf5, .safetensors, .pt/.pth/.bin (torch.save's zip format, a dict name -> tensor), or a path ending in '/' or an existing directory for one .npy per
// tensor). Tensor names become member/dataset names (HDF5: '.'-joined names become nested groups).
// Writes to a temporary file beside PATH and renames it on success; refuses to replace an existing
// PATH unless `overwrite`. "-" writes NPZ to standard output.
class SnapshotWriter {
 public:
  virtual ~SnapshotWriter() = default;
  // Optional, before any add(): the tensors that will be added, in order (name, dtype, shape).
  // A writer whose format puts an index first (safetensors) can then write each tensor as it
  // comes instead of holding them all until finish(); add() then refuses (Internal) a tensor
  // that differs from the one announced, and finish() one left out. Others ignore it.
  virtual void expect(const std::vector<TensorInfo>& infos) { (void)infos; }
  // Optional, before expect() and add(): key/value metadata for the file (safetensors writes it
  // as "__metadata__" instead of its default {"format": "pt"}). Formats without such a place
  // ignore it.
  virtual void set_metadata(std::vector<std::pair<std::string, std::string>> metadata) { (void)metadata; }
  // Optional, before complete(): HDF5 attributes as attributes_json() gives them. Returns
  // whether the format keeps them (HDF5 does; the others have no place for them and return
  // false, leaving the caller to say so). What an HDF5 output cannot place is reported by
  // take_warnings().
  virtual bool set_attributes_json(const std::string& json) {
    (void)json;
    return false;
  }
  virtual void add(const Tensor& t) = 0;
  // Completes the file (or a directory's files) under temporary names; publish() then renames
  // it into place. Without publish() the destructor removes everything written. A caller
  // writing several snapshots completes them all before it publishes any (decode of several
  // frames: a failure in a later frame leaves no file of an earlier one).
  virtual void complete() = 0;
  virtual void publish() = 0;
  void finish() {
    complete();
    publish();
  }
  // Notes for the user about lossy-looking but exact adaptations the format forced (e.g. bf16
  // stored as float32 in NPY, which numpy cannot hold), without the output's path: the caller
  // names the file. The library never prints: the CLI does.
  virtual std::vector<std::string> take_warnings() { return {}; }
};
std::unique_ptr<SnapshotWriter> create_snapshot(const std::string& path, bool overwrite);

// The format PATH names by extension (or directory); throws Error(Usage) if none fits.
Format format_for_output(const std::string& path);

}  // namespace gradcodec::formats
