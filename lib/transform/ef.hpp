// SPDX-License-Identifier: BSD-3-Clause
// ef — error feedback / memory compensation (docs/stages.md "ef"; Seide et al. 2014, 1-bit SGD
// with error feedback; Stich, Cordonnier & Jaggi 2018 "Sparsified SGD with Memory", Alg. 1;
// Makkar 2023 (survey) §3.2 Alg. 2 (error-feedback SGD, Vogels et al. 2019); TCS §II-B).
//
// Per tensor, an encoder-private memory m (zeros at the first frame and whenever the tensor's
// element count changes):
//   encode:        g ← β·m + γ·g            (computed in double; the pipeline gets it as f32)
//   after_encode:  m ← (β·m + γ·g) − ĝ      ĝ = what the decoder outputs for this record
// ĝ is the reconstruction the codec hands after_encode, rounded to the tensor's dtype (f16/bf16
// outputs are rounded, f32/f64 are the f32 values), so with β = γ = 1 the invariant
//   Σ_t ĝ_t + m_T = Σ_t g_t
// holds to double rounding, whatever the rest of the pipeline drops. The memory is kept in double
// (8 bytes per element per tensor) for that reason. A non-finite memory entry (from an Inf or NaN
// gradient) is reset to 0 rather than carried into every later frame. Place ef first among the
// transforms: the codec passes every transform the same reconstruction, which is ef's ĝ only
// when no other transform's inverse runs after ef's (e.g. "delta | ef | topk", not "ef | delta").
// The decoder needs none of this: ef has no inverse and no stream. stateful() = true.
#pragma once
#include <gradcodec/plugin/params.hpp>

#include <vector>

namespace gradcodec::stages {

// ef's per-tensor state (encoder side only; exposed for tests).
struct EfMemory final : StageState {
  std::vector<double> m;  // after encode() and before after_encode(): β·m + γ·g
};

std::unique_ptr<Stage> make_ef(const Params& p, uint32_t version);

}  // namespace gradcodec::stages
