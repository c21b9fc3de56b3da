// SPDX-License-Identifier: BSD-3-Clause
// skcompress — SKCompress (Jiang, Fu, Yang et al., "SKCompress: compressing sparse and
// nonuniform gradient in distributed machine learning", VLDB Journal 29(5), 2020; the method "SKC"
// of the BIRD+ comparison, Wu et al. 2023 §IV: "the sketching technique with bucket quantization"
// for the values, "the prefix technique" for the index). The paper's text was not available when
// this was written: the rules below are the reading chosen, with their reasons in docs/stages.md
// "skcompress".
//
// Composed as `topk(ratio=0.01) | skcompress | deltabin` (preset `skcompress`; deltabin: index/deltabin.hpp):
//
// skcompress(buckets=q, rows=r, cols=c) — value codec (Quantizer) of the n coded values, the key
// of value i being its element position (p.index[i/block]·block + i%block when sparse, else i):
//  1. Buckets: Q = min(q, n) equal-frequency buckets of the magnitudes |v| (exact quantiles of
//     the sorted magnitudes a[0..n): split s_b = a[⌊b·n/Q⌋], b = 1..Q−1); value i goes to bucket
//     B_i = #{b : s_b ≤ |v_i|}, so buckets ascend with magnitude. Bucket means (f32, of the
//     magnitudes; an empty bucket b ≥ 1 has mean s_b, an empty bucket 0 a[0]) go to stream `scale`.
//  2. MinMaxSketch: r rows × W = max(1, ⌈c·n⌉) cells; row j's cell of key x is
//     h_j(x) = ⌊mix(x + (j+1)·0x9E3779B97F4A7C15) · W / 2^64⌋ (mix: the splitmix64 finalizer).
//     Insert keeps per cell the MIN of the bucket indexes hashed there (0 in a cell no key
//     reaches); a query returns the MAX over the key's r cells. The estimate never exceeds B_i
//     (collisions only lower it: the decoded magnitude decays, never grows), and equals B_i when
//     one of the key's cells holds no smaller bucket index.
//  3. Stream `value`, MSB-first bits: n sign bits (1 = non-negative), Q code lengths of 5 bits
//     (0 = symbol unused, at most 24), the r·W cells row by row in the canonical Huffman code of
//     those lengths, zero padding to a byte. Decoded value: ±mean[estimate].
#pragma once
#include <gradcodec/plugin/params.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace gradcodec::stages {

inline constexpr unsigned kSkMaxCodeLength = 24;  // Huffman code lengths fit 5 bits

// Row j's cell of key x in a sketch of `width` cells per row.
uint64_t sk_cell(uint64_t key, unsigned row, uint64_t width) noexcept;

// Equal-frequency magnitude buckets of `v` (at most q of them): bucket of each value, and the
// f32 mean magnitude of each bucket.
struct SkBuckets {
  std::vector<uint32_t> bucket;  // per value
  std::vector<float> mean;       // per bucket, Q = min(q, n)
  std::vector<float> split;      // s_1 .. s_{Q−1}
};
SkBuckets sk_buckets(std::span<const float> v, uint32_t q);

// The MinMaxSketch of (keys[i], bucket[i]): rows·width cells, row-major (MIN insert).
std::vector<uint32_t> sk_sketch(std::span<const uint64_t> keys, std::span<const uint32_t> bucket, unsigned rows,
                                uint64_t width);
// The estimate of `key`: the MAX of its cells.
uint32_t sk_query(std::span<const uint32_t> cells, uint64_t key, unsigned rows, uint64_t width) noexcept;

// Canonical Huffman code lengths (≤ kSkMaxCodeLength) of symbols with frequencies `freq`: 0 for
// unused symbols; a lone used symbol gets length 1. Frequencies are halved (rounding up) until
// the longest code fits.
std::vector<uint8_t> sk_huffman_lengths(std::span<const uint64_t> freq);
// Bits of the symbols under those lengths.
uint64_t sk_huffman_bits(std::span<const uint8_t> lengths, std::span<const uint32_t> symbols) noexcept;

// Exact `value` stream size in bits before padding for n values, Q buckets and these cells.
uint64_t skcompress_value_bits(uint64_t n, std::span<const uint8_t> lengths, std::span<const uint32_t> cells) noexcept;
// Cells per row for n values at `cols`.
uint64_t sk_width(uint64_t n, double cols) noexcept;

std::unique_ptr<Stage> make_skcompress(const Params& p, uint32_t version);

}  // namespace gradcodec::stages
