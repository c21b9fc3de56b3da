// SPDX-License-Identifier: BSD-3-Clause
// `gradcodec encode` across the ranks of an MPI job (docs/scale-out.md).
#pragma once

#include "common.hpp"

#include <gradcodec/gradcodec.hpp>

#include <string>
#include <vector>

namespace gradcodec::cli {

// Which rank encodes each tensor, by name: frame 0's tensors balanced by their bytes (the largest
// first, each to the rank with the fewest bytes so far, ties to the lower rank); a name first
// seen in a later frame goes by a hash of the name. The same on every rank.
std::function<int(const std::string&)> tensor_owners(const FrameSource& first_frame, int ranks);

// Encodes `inputs` (one frame each, opened on every rank) into `output` with the ranks sharing
// the tensors, and returns the container's figures (the same on every rank) and, in `largest`,
// the largest share of the input bytes one rank encoded (0..1). The file is the one a single
// process writes. `output` must be a regular file's path (not "-").
EncodeSummary encode_across_ranks(double& largest, const EncoderOptions& options, std::vector<OpenInput>& inputs,
                                  const std::vector<std::string>& recorded, const std::string& output, bool overwrite);

}  // namespace gradcodec::cli
