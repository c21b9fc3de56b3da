// SPDX-License-Identifier: BSD-3-Clause
// accordion(mild, aggressive, eta, interval) — Accordion, adaptive switching between a mild and
// an aggressive compressor on the rate of change of the gradient norm (Agarwal et al. 2021,
// "Adaptive Gradient Communication via Critical Learning Regime Identification"; Makkar 2023
// (survey) §4, eq. 2; docs/stages.md "accordion"; the authors' auto_scale.py). Stateful
// control stage.
//
// `mild` and `aggressive` are quoted pipelines holding one reducer each — the same stage with
// different parameters, e.g. mild="powersgd(rank=2)", aggressive="powersgd(rank=1)", or
// mild="topk(ratio=0.99)", aggressive="topk(ratio=0.1)" (only the implied `raw`/`varint` may
// follow it inside the quotes: quantizer, index coder and lossless stages go in the outer
// pipeline, after accordion, and apply to both). The outer chain is typed by that stage's kind.
//
// Rule, per tensor (frames are grouped in intervals of `interval` frames, j = frame / interval):
//   Δ_j  = the sum of the tensor's input over the frames of interval j (before any transform);
//   at the first frame of interval j ≥ 2: critical ⇔ ‖Δ_{j−2}‖ = 0 or
//        |‖Δ_{j−2}‖ − ‖Δ_{j−1}‖| / ‖Δ_{j−2}‖ ≥ eta   (eq. 2 with old = j−2, current = j−1);
//   the whole interval j uses `mild` when critical, else `aggressive`; intervals 0 and 1 (no two
//   completed intervals yet) use `mild` — as auto_scale.py, which starts on the low-compression
//   setting and first compares at the end of the second check period.
//
// How the choice is recorded: a control stage has alternatives(); a record it encodes names the
// alternative it applied (Payload::alternative), and the codec writes the record with a footer
// pipeline *variant* — the outer pipeline with accordion replaced, in place, by that reducer
// (e.g. "ef | powersgd(rank=1) | raw"). The decoder decodes every record with the variant it
// names and never runs accordion: the choice per tensor per frame is in the container, and
// `inspect` shows it as the record's stages. Both alternatives are the same stage at the same
// position, so they share its slot of state (PowerSGD's warm-start Q, TCS's previous output):
// the decoder and the encoder's mirror keep the same state whichever alternative a frame used.
// Records stored raw name no variant (they decode without a reducer); accordion hands them to
// the mild stage's raw hook, on both sides.
//
// State (encoder-private): the running sum Δ_j (f64 per element), the last two interval norms,
// the current choice, and the wrapped stage's own encoder-private state.
// Wire: none of its own — the records are the chosen stage's.
#pragma once
#include <gradcodec/plugin/params.hpp>

namespace gradcodec::stages {

std::unique_ptr<Stage> make_accordion(const Params& p, uint32_t version);

// eq. 2: whether a tensor whose accumulated-gradient norm went from `old_norm` to `new_norm`
// is in a critical regime (then it gets the mild compressor). A zero old norm counts as critical.
bool accordion_critical(double old_norm, double new_norm, double eta) noexcept;

}  // namespace gradcodec::stages
