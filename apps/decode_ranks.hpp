// SPDX-License-Identifier: BSD-3-Clause
// `gradcodec decode` of one frame into a directory (one .npy per tensor) across the ranks of an
// MPI job (docs/scale-out.md): the ranks share the frame's tensors.
#pragma once

#include "common.hpp"

#include <gradcodec/gradcodec.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gradcodec::cli {

// The places in `infos` (one frame's tensors) that rank `rank` of `ranks` decodes, in record
// order: the owners encode gives (tensor_owners: the largest tensor first, each to the rank with
// the fewest bytes so far, ties to the lower rank; records of one name on one rank). The same on
// every rank. With at least one tensor, rank 0 has one.
std::vector<size_t> dir_share(const std::vector<TensorInfo>& infos, int rank, int ranks);

// What the whole job did, the same on every rank: what one process would report.
struct DirDecoded {
  size_t frames_read = 0;             // the most frames one tensor read (stateful: from its keyframe)
  std::vector<std::string> warnings;  // every rank's writers' warnings, in record order
  double largest = 1.0;               // the largest share of the decoded bytes one rank wrote (0..1)
};

// Decodes the tensors `mine` (dir_share) of frame `f` and writes them, with every other rank
// doing its share, into the directory that `make_writer` writes (formats::create_snapshot of a
// directory, set up as the caller wants). Collective: every rank calls it. Rank 0 makes its
// writer first, alone, so that only it creates a missing directory; a rank with no tensor makes
// none. Its tensors are decoded with Decoder::decode_frame (the decoder's threads); `advance` is
// called for each. The files appear only once every
// rank has completed its own, and they are those one process writes. On a failure every rank
// throws the error one process meets first (the lowest record's; creating the directory before
// any), and no file of any rank is left, nor a directory that rank 0 created.
DirDecoded decode_to_dir_across_ranks(Decoder& dec, size_t f, const std::vector<size_t>& mine,
                                      const std::function<std::unique_ptr<formats::SnapshotWriter>()>& make_writer,
                                      const std::function<void(const Tensor&)>& advance);

}  // namespace gradcodec::cli
