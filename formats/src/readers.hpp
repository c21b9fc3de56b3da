// SPDX-License-Identifier: BSD-3-Clause
// Internal to gradcodec::formats: one factory pair per format; snapshot.cpp dispatches to them.
#pragma once

#include <gradcodec/file_io.hpp>
#include <gradcodec/formats/snapshot_io.hpp>

#include <memory>
#include <string>

namespace gradcodec::formats {

std::unique_ptr<SnapshotReader> open_npy(std::shared_ptr<const InputFile> file);
std::unique_ptr<SnapshotReader> open_npy_dir(const std::string& dir);
std::unique_ptr<SnapshotReader> open_npz(std::shared_ptr<const InputFile> file);
// HDF5 is read through the library by path; the InputFile is used for in-memory (stdin) images.
std::unique_ptr<SnapshotReader> open_hdf5(std::shared_ptr<const InputFile> file);
std::unique_ptr<SnapshotReader> open_safetensors(std::shared_ptr<const InputFile> file);
// The size of a safetensors stream from its first `avail` bytes: 8 + the header's length (capped),
// then + the end of its data as the header declares it once the whole header is given (just the
// header when it does not parse: the reader then says why). For reading standard input.
uint64_t safetensors_declared_size(const uint8_t* p, size_t avail);
// torch.save's zip format (.pt, .pth, .bin): torch_read.cpp; the pickle is read by
// pickle_restricted.cpp, which executes nothing.
std::unique_ptr<SnapshotReader> open_torch(std::shared_ptr<const InputFile> file);

// Sharded checkpoints (sharded_read.cpp): whether PATH's name is an index's
// (NAME.safetensors.index.json, NAME.bin.index.json, any case), and the index opened as one
// snapshot of all its shards, each opened only when one of its tensors is read.
bool is_sharded_index_name(const std::string& path);
std::unique_ptr<SnapshotReader> open_sharded(const std::string& index_path);
// For tests: how many times a sharded reader (open_sharded; Error(Internal) for another) has
// opened a shard to read a tensor (open() opens each one once more to check it, not counted).
size_t sharded_shard_opens(const SnapshotReader& sharded);
// One shard of a sharded checkpoint, by its content (snapshot.cpp): a safetensors file or a
// torch.save zip (a zip under a .bin/.pt/.pth name goes to the torch reader, which says what is
// wrong with it); any other file refused (Error Input) saying what it is.
std::unique_ptr<SnapshotReader> open_shard(std::shared_ptr<const InputFile> file);

// Array i of an npz reader (open_npz; Error(Internal) for another reader): its size in bytes, and
// its bytes as stored (before any transpose or byte swap) written to dst, with every check
// read(i) makes (CRC, no more data than declared). read(i) is allocate + read_npz_array_into;
// tests use the latter to inflate a member of over 4 GiB into a destination whose pages alias.
uint64_t npz_array_bytes(const SnapshotReader& npz, size_t i);
void read_npz_array_into(SnapshotReader& npz, size_t i, uint8_t* dst);

std::unique_ptr<SnapshotWriter> create_npy(const std::string& path, bool overwrite);
std::unique_ptr<SnapshotWriter> create_npy_dir(const std::string& dir, bool overwrite);
std::unique_ptr<SnapshotWriter> create_npz(const std::string& path, bool overwrite);
std::unique_ptr<SnapshotWriter> create_hdf5(const std::string& path, bool overwrite);
std::unique_ptr<SnapshotWriter> create_safetensors(const std::string& path, bool overwrite);
std::unique_ptr<SnapshotWriter> create_torch(const std::string& path, bool overwrite);

}  // namespace gradcodec::formats
