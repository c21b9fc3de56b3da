// SPDX-License-Identifier: BSD-3-Clause
// The facade's way into a container file.
#pragma once

#include <gradcodec/file_io.hpp>

#include <memory>
#include <string>

namespace gradcodec::api {

// The bytes of the container at `path` ("-": standard input), as ContainerReader::open_file
// reads them; a snapshot file given in its place (NPZ, NPY, HDF5, safetensors) is refused as
// such (Error Input: "this is an NPZ file, not a gradcodec container; ...").
std::shared_ptr<const InputFile> open_container_file(const std::string& path);

}  // namespace gradcodec::api
