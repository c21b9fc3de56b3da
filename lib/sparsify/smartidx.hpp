// SPDX-License-Identifier: BSD-3-Clause
// smartidx — top-k extended to convolution kernels, with packages that let several kept values
// share one index (Wu, Zou, Zhang et al., AAAI 2022, "SmartIdx: Reducing Communication Cost in
// Federated Learning by Exploiting the CNNs Structures"; compared in BIRD+ (Wu et al. 2023) §IV as
// "SMT": index sharing on the 2-D kernels of convolutions, lossless-coded indices). The paper's
// text was not available when this was written: the rules below are the reading chosen, written
// down with their reasons in docs/stages.md "smartidx".
//
// Selection, per tensor of d elements:
//  1. top-k: the k = max(1, round(ratio·d)) largest |g| (topk_select: ties to the lower index).
//  2. Tensors of 4 dimensions [out, in, kh, kw] with m = kh·kw ≥ 2 are cut into K = d/m kernels
//     (kernel j = elements j·m .. j·m + m − 1). A kernel with c ≥ max(1, ceil(kernel·m)) of its
//     elements selected becomes a *kernel package*: all m of its values are sent. The selected
//     elements of the other kernels, and of every other tensor, are *individual packages*.
//  3. Kernel packages with the same sign pattern (m bits, bit e = signbit of element e) form one
//     *pattern package*: the pattern once, then the ascending indices of its kernels; their
//     values travel as magnitudes |v| (the pattern carries the signs). Pattern packages are
//     ordered by their smallest kernel index.
//
// Wire: stream `index` (this stage's own; no index coder follows):
//   LEB128 k_i      individual packages
//   u8     b_i      Rice parameter of their gaps (universe d), golomb_parameter(d, k_i)
//   LEB128 P        pattern packages (0 unless the tensor is cut into kernels)
//   P × { LEB128 c_p ≥ 1 kernels; u8 b_p = golomb_parameter(K, c_p) }
//   bits (MSB-first): k_i Rice codes of the individual gaps; then per pattern package: m pattern
//   bits, c_p Rice codes of its kernel gaps (universe K); zero padding to a byte.
// A Rice code of gap g with parameter b: ⌊g/2^b⌋ zeros, a 1, the low b bits of g (as `golomb`).
// Values (to the value codec, f32 with `raw`): the k_i individual values in ascending position,
// then per pattern package, per kernel, its m magnitudes in element order.
#pragma once
#include <gradcodec/plugin/params.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace gradcodec::stages {

// The packages of one tensor (the encoder's plan and what the decoder reads back).
struct SmartIdxPackages {
  uint64_t m = 1;                        // elements per kernel; 1 when the tensor is not cut
  uint64_t kernels = 0;                  // K (0 when not cut)
  std::vector<uint64_t> individual;      // element positions, ascending
  struct Pattern {
    std::vector<uint8_t> negative;       // m entries, 1 = the element's sign bit is set
    std::vector<uint64_t> kernels;       // ascending
  };
  std::vector<Pattern> patterns;         // by smallest kernel index
};

// Elements per kernel for a tensor shape: kh·kw for [out, in, kh, kw] with kh·kw ≥ 2, else 1.
uint64_t smartidx_kernel_size(const std::vector<uint64_t>& shape) noexcept;

// Packages for `v` (the tensor's f32 values, `shape` its shape): top-k of k values, kernels
// promoted at `kernel` (fraction of m). With `nonfinite`, the top-k's first pass counts the NaN/Inf
// elements into it, and when there are any no package is made (as topk_select).
SmartIdxPackages smartidx_select(std::span<const float> v, const std::vector<uint64_t>& shape, uint64_t k,
                                 double kernel, uint64_t* nonfinite = nullptr);

// The `index` stream of `pk` (appended to `out`), and its exact size in bits before padding.
void smartidx_write(const SmartIdxPackages& pk, uint64_t d, std::vector<uint8_t>& out);
uint64_t smartidx_bits(const SmartIdxPackages& pk, uint64_t d) noexcept;

// Reads the `index` stream of a tensor of d elements cut into kernels of m (1: not cut). Throws
// Corrupt (naming smartidx) on anything the encoder cannot have written: counts beyond the
// tensor or the stream, positions out of range, a kernel in two packages, an individual position
// inside a kernel package, nonzero padding, trailing bytes.
SmartIdxPackages smartidx_read(std::span<const uint8_t> s, uint64_t d, uint64_t m);

std::unique_ptr<Stage> make_smartidx(const Params& p, uint32_t version);

}  // namespace gradcodec::stages
