// SPDX-License-Identifier: BSD-3-Clause
// scatter_to_dense (every sparsifier's decode): the dense tensor equals a reference built by
// zero-filling and copying each block, for f32 values and exact bytes, blocks of 1 and 3, gaps at
// the start, middle and end, no block and every block, in index order and in value order; the
// refusals (positions outside the tensor, not ascending, a count that does not match).
#include <catch2/catch.hpp>

#include <gradcodec/error.hpp>
#include <gradcodec/rng.hpp>
#include <gradcodec/plugin/stage.hpp>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

using namespace gradcodec;

namespace {

// positions of the blocks kept out of `blocks` (each kept with probability `keep`), ascending.
std::vector<uint64_t> pick(uint64_t blocks, double keep, Rng& r) {
  std::vector<uint64_t> out;
  for (uint64_t b = 0; b < blocks; ++b)
    if (r.uniform() < keep) out.push_back(b);
  return out;
}

template <class T>
std::vector<T> reference(const std::vector<T>& kept, const std::vector<uint64_t>& index, size_t run, size_t total) {
  std::vector<T> dense(total, T{});
  for (size_t k = 0; k < index.size(); ++k)
    std::copy(kept.begin() + static_cast<long>(k * run), kept.begin() + static_cast<long>((k + 1) * run),
              dense.begin() + static_cast<long>(index[k] * run));
  return dense;
}

Payload sparse_payload(uint64_t n, uint32_t block, std::vector<uint64_t> index) {
  Payload p;
  p.n = n;
  p.sparse = true;
  p.block = block;
  p.universe = n / block;
  p.index = std::move(index);
  return p;
}

}  // namespace

TEST_CASE("scatter_to_dense equals zero-fill-and-copy for values and exact bytes", "[core][scatter]") {
  Rng r(20261123);
  for (uint32_t block : {1u, 3u}) {
    const uint64_t blocks = 1000, n = blocks * block;
    for (double keep : {0.0, 0.01, 0.3, 0.9, 1.0}) {
      CAPTURE(block, keep);
      std::vector<uint64_t> index = pick(blocks, keep, r);
      if (keep == 1.0) REQUIRE(index.size() == blocks);
      // a gap at the start and the end unless every block is kept
      if (keep > 0 && keep < 1) {
        index.erase(std::remove_if(index.begin(), index.end(), [&](uint64_t b) { return b < 5 || b >= blocks - 5; }),
                    index.end());
        REQUIRE(!index.empty());
      }
      std::vector<float> kept(index.size() * block);
      for (auto& v : kept) v = static_cast<float>(r.normal()) + 1.0f;  // never 0: a dropped copy shows

      Payload p = sparse_payload(n, block, index);
      p.exact = false;
      p.values = kept;
      scatter_to_dense(p);
      CHECK_FALSE(p.sparse);
      CHECK(p.values == reference(kept, index, block, n));

      // exact bytes (the raw codec's f16 kept exactly): 2 bytes per element. With no block kept
      // there are no exact bytes to tell the two apart; the f32 path above gives the zeros.
      if (index.empty()) continue;
      Payload e = sparse_payload(n, block, index);
      e.exact_dtype = DType::F16;
      std::vector<uint8_t> bytes(kept.size() * 2);
      for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(1 + i % 255);
      e.exact_bytes = bytes;
      scatter_to_dense(e);
      CHECK(e.exact_bytes == reference(bytes, index, size_t{block} * 2, n * 2));

      // value order: the same blocks listed in another order, with their values in that order
      if (index.size() > 1) {
        std::vector<size_t> order(index.size());
        std::iota(order.begin(), order.end(), size_t{0});
        std::reverse(order.begin(), order.end());
        std::swap(order.front(), order[order.size() / 2]);
        Payload v = sparse_payload(n, block, {});
        v.exact = false;
        v.value_order = true;
        for (size_t k : order) {
          v.index.push_back(index[k]);
          v.values.insert(v.values.end(), kept.begin() + static_cast<long>(k * block),
                          kept.begin() + static_cast<long>((k + 1) * block));
        }
        scatter_to_dense(v);
        CHECK(v.values == reference(kept, index, block, n));
      }
    }
  }
}

TEST_CASE("scatter_to_dense refuses positions it cannot place", "[core][scatter]") {
  // n elements in blocks of `block`, the blocks at `index`, `values` kept values: Corrupt?
  auto refused = [](uint64_t n, uint32_t block, std::vector<uint64_t> index, size_t values) {
    Payload p = sparse_payload(n, block, std::move(index));
    p.exact = false;
    p.values.assign(values, 1.0f);
    try {
      scatter_to_dense(p);
    } catch (const Error& e) {
      return e.code() == ErrorCode::Corrupt;
    }
    return false;
  };
  CHECK(refused(30, 3, {2, 10}, 6));  // block 10 would cover elements 30..32
  CHECK(refused(30, 1, {5, 4}, 2));   // descending
  CHECK(refused(30, 1, {4, 4}, 2));   // repeated
  CHECK(refused(30, 3, {1, 2}, 5));   // 5 values for two blocks of 3
  CHECK_FALSE(refused(30, 3, {1, 2}, 6));
}
