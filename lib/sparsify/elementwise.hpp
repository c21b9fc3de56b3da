// SPDX-License-Identifier: BSD-3-Clause
// What the sparsifiers that keep single elements of the whole tensor (topk, threshold, dgc)
// share: the payload they hand the index coder, and their decode (the kept values scattered
// into a dense tensor of zeros). Block and per-row sparsifiers (randk, bird, tcs) differ.
#pragma once
#include <gradcodec/plugin/stage.hpp>

#include <span>
#include <utility>
#include <vector>

namespace gradcodec::stages {

class ElementwiseSparsifier : public Reducer {
 public:
  StageKind kind() const noexcept override { return StageKind::Sparsifier; }
  void prepare_decode(Payload& p, const Streams&, const StageContext&) override { mark(p); }
  void decode(Payload& p, const Streams&, const StageContext&) override { scatter_to_dense(p); }

 protected:
  // p keeps `values` at the ascending element positions `index`.
  static void keep(Payload& p, std::vector<float> values, std::vector<uint64_t> index) {
    p.values = std::move(values);
    p.index = std::move(index);
    mark(p);
  }
  // p keeps v[index[j]] for every j.
  static void keep_at(Payload& p, std::span<const float> v, std::vector<uint64_t> index) {
    std::vector<float> values(index.size());
    for (size_t j = 0; j < index.size(); ++j) values[j] = v[index[j]];
    keep(p, std::move(values), std::move(index));
  }

 private:
  static void mark(Payload& p) {
    p.sparse = true;
    p.universe = p.n;
    p.block = 1;
  }
};

}  // namespace gradcodec::stages
