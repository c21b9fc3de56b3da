// SPDX-License-Identifier: BSD-3-Clause
// threshold — keep every element with |g_i| ≥ tau (the rule below and docs/stages.md
// "threshold"; cf. the fixed-threshold updates of Strom 2015, "Scalable distributed DNN
// training using commodity GPU cloud computing" (Interspeech), whose residual `ef` supplies).
//
// The comparison is done in double on the f32 working value: |g_i| ≥ tau. NaN is never kept;
// ±Inf always is; tau = 0 keeps every non-NaN element (zeros included). The kept count depends on
// the data (possibly 0 or d). Wire: no stream of its own; positions ascending go to the index
// coder, kept values (the input's own elements) to the value codec.
#pragma once
#include <gradcodec/plugin/params.hpp>

namespace gradcodec::stages {
std::unique_ptr<Stage> make_threshold(const Params& p, uint32_t version);
}
