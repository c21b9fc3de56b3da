// SPDX-License-Identifier: BSD-3-Clause
#include "transform/ef.hpp"

#include <gradcodec/half.hpp>

#include <cmath>

namespace gradcodec::stages {

namespace {

// The value the decoder outputs for a reconstructed f32 value, in a tensor of dtype `dt`.
float as_decoded(float x, DType dt) noexcept {
  switch (dt) {
    case DType::F16: return f16_to_f32(f32_to_f16(x));
    case DType::BF16: return bf16_to_f32(f32_to_bf16(x));
    default: return x;  // f32 is exact; f64 outputs are the f32 value widened
  }
}

class Ef final : public Transform {
 public:
  Ef(double beta, double gamma) : beta_(beta), gamma_(gamma) {}
  bool stateful() const noexcept override { return true; }
  // The f64 memory m, the f32 values, the codec's copy of them for after_encode() and the
  // mirror decoder's reconstruction (ef-signsgd on a 4096x4096 f32 tensor: 20.1 B/element).
  double work_per_element(const TensorInfo&, double) const noexcept override { return 22; }

  void encode(Payload& p, const StageContext& ctx) override {
    std::vector<float>& g = p.dense_f32();
    auto& mem = ctx.state_as<EfMemory>();
    if (mem.m.size() != g.size()) mem.m.assign(g.size(), 0.0);
    bool overflow = false;  // the input is finite here (the codec screens it before transforms)
    for (size_t i = 0; i < g.size(); ++i) {
      mem.m[i] = beta_ * mem.m[i] + gamma_ * static_cast<double>(g[i]);
      g[i] = static_cast<float>(mem.m[i]);
      overflow |= !std::isfinite(g[i]);
    }
    if (overflow) p.overflow = "ef: beta*m + gamma*g is beyond float32's range (3.4e38)";
  }

  void after_encode(std::span<const float>, std::span<const float> recon, const StageContext& ctx) override {
    auto& mem = ctx.state_as<EfMemory>();
    if (recon.size() != mem.m.size()) fail(ErrorCode::Internal, "ef: reconstruction size differs from the memory");
    const DType dt = ctx.info ? ctx.info->dtype : DType::F32;
    for (size_t i = 0; i < recon.size(); ++i) {
      const double m = mem.m[i] - static_cast<double>(as_decoded(recon[i], dt));
      mem.m[i] = std::isfinite(m) ? m : 0.0;
    }
  }

 private:
  double beta_, gamma_;
};

}  // namespace

std::unique_ptr<Stage> make_ef(const Params& p, uint32_t) {
  return std::make_unique<Ef>(p.num("beta"), p.num("gamma"));
}

}  // namespace gradcodec::stages
