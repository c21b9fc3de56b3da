// SPDX-License-Identifier: BSD-3-Clause
#include "transform/delta.hpp"

#include <gradcodec/half.hpp>

#include <cmath>

namespace gradcodec::stages {

namespace {

struct Previous final : StageState {
  std::vector<float> v;
  bool have = false;
};

class Delta final : public Transform {
 public:
  bool stateful() const noexcept override { return true; }
  // The previous frame's f32 values, the f32 values, the codec's copy of them for after_encode()
  // and the mirror decoder's reconstruction.
  double work_per_element(const TensorInfo&, double) const noexcept override { return 18; }

  void encode(Payload& p, const StageContext& ctx) override {
    std::vector<float>& g = p.dense_f32();
    const auto& prev = ctx.shared_as<Previous>();
    if (!usable(prev, g.size(), ctx)) return;
    // g is finite here (the codec screens the input); the previous frame may have been stored
    // raw with NaN/Inf (NonFinite::Raw).
    bool overflow = false;
    for (size_t i = 0; i < g.size(); ++i) {
      g[i] -= prev.v[i];
      overflow |= !std::isfinite(g[i]);
    }
    if (overflow)
      p.overflow = "delta: the difference to the previous frame is not finite (beyond float32's range, or the "
                   "previous frame held NaN/Inf)";
  }

  void decode(std::vector<float>& dense, const StageContext& ctx) override {
    auto& prev = ctx.shared_as<Previous>();
    if (usable(prev, dense.size(), ctx))
      for (size_t i = 0; i < dense.size(); ++i) dense[i] += prev.v[i];
    remember(prev, dense, ctx);
  }

  void on_raw(std::span<const float> output, const StageContext& ctx) override {
    remember(ctx.shared_as<Previous>(), output, ctx);
  }

 private:
  static bool usable(const Previous& prev, size_t n, const StageContext& ctx) {
    return !ctx.keyframe && prev.have && prev.v.size() == n;
  }
  // prev ← the decoder's output: f32 values rounded to the tensor's dtype.
  static void remember(Previous& prev, std::span<const float> out, const StageContext& ctx) {
    prev.v.assign(out.begin(), out.end());
    prev.have = true;
    const DType dt = ctx.info ? ctx.info->dtype : DType::F32;
    if (dt == DType::F16)
      for (float& x : prev.v) x = f16_to_f32(f32_to_f16(x));
    else if (dt == DType::BF16)
      for (float& x : prev.v) x = bf16_to_f32(f32_to_bf16(x));
  }
};

}  // namespace

std::unique_ptr<Stage> make_delta(const Params&, uint32_t) { return std::make_unique<Delta>(); }

}  // namespace gradcodec::stages
