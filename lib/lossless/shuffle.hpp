// SPDX-License-Identifier: BSD-3-Clause
// shuffle — byte shuffle (as in Blosc/HDF5): byte j of every element, then byte j+1, ...
// so exponent bytes of floats sit together for the next lossless stage.
// Wire: u8 width, then the shuffled bytes (a tail shorter than one element is copied as is).
#pragma once
#include <gradcodec/plugin/params.hpp>
#include <gradcodec/plugin/stage.hpp>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_shuffle(const Params& p, uint32_t version);
// The same coder for another stage's use: the stream's own width, runs of `block` elements.
std::unique_ptr<Lossless> shuffle_coder(uint64_t block);
}
