// SPDX-License-Identifier: BSD-3-Clause
#include "sparsify/threshold.hpp"

#include "sparsify/elementwise.hpp"

#include <cmath>

namespace gradcodec::stages {

namespace {

class Threshold final : public ElementwiseSparsifier {
 public:
  explicit Threshold(double tau) : tau_(tau) {}

  void encode(Payload& p, Streams&, const StageContext&) override {
    const std::vector<float>& v = p.dense_f32();
    std::vector<uint64_t> idx;
    std::vector<float> kept;
    for (size_t i = 0; i < v.size(); ++i) {
      if (std::fabs(static_cast<double>(v[i])) >= tau_) {  // false for NaN
        idx.push_back(i);
        kept.push_back(v[i]);
      }
    }
    keep(p, std::move(kept), std::move(idx));
  }

 private:
  double tau_;
};

}  // namespace

std::unique_ptr<Stage> make_threshold(const Params& p, uint32_t) { return std::make_unique<Threshold>(p.num("tau")); }

}  // namespace gradcodec::stages
