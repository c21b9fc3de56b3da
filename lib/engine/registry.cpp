// SPDX-License-Identifier: BSD-3-Clause
// The one explicit registration table, as blosc2's filters-registry.c or lzbench's comp_desc[] (no
// static self-registration: the linker drops such objects from static libraries). Adding a stage
// = one file pair under its kind's folder + one row here + its tests + its section in
// docs/stages.md.
#include <gradcodec/plugin/registry.hpp>

// transforms
#include "transform/delta.hpp"
#include "transform/ef.hpp"
// sparsifiers
#include "sparsify/bird.hpp"
#include "sparsify/dgc.hpp"
#include "sparsify/randk.hpp"
#include "sparsify/threshold.hpp"
#include "sparsify/tcs.hpp"
#include "sparsify/topk.hpp"
// low-rank
#include "lowrank/accordion.hpp"
#include "lowrank/powersgd.hpp"
// quantizers
#include "quantize/fp16.hpp"
#include "quantize/curvefit.hpp"
#include "quantize/fractional.hpp"
#include "quantize/intn.hpp"
#include "quantize/onebit.hpp"
#include "quantize/qsgd.hpp"
#include "quantize/raw.hpp"
#include "quantize/sbc.hpp"
#include "quantize/sign.hpp"
#include "quantize/ssdm.hpp"
#include "quantize/terngrad.hpp"
// index coders
#include "index/bitmap.hpp"
#include "index/bloom.hpp"
#include "index/elias.hpp"
#include "index/golomb.hpp"
#include "index/plain.hpp"
#include "index/rle.hpp"
#include "index/tcspos.hpp"
#include "index/varint.hpp"
// lossless
#include "lossless/lzma.hpp"
#include "lossless/shuffle.hpp"
#include "lossless/zstd.hpp"

namespace gradcodec {

namespace {

using namespace stages;

ParamSpec stream_param() {
  return {"stream", ParamType::Choice, "all", false, 0, 0, false,
          {"all", "index", "value", "scale", "side"}, "which stream to apply to"};
}
ParamSpec int_param(const char* name, const char* def, double lo, double hi, const char* help) {
  return {name, ParamType::Int, def, false, lo, hi, false, {}, help};
}

const std::vector<StageEntry>& build_table() {
  static const std::vector<StageEntry> table = {
      // ---- transforms ----
      {"ef", StageKind::Transform, 1, {},
       {{"beta", ParamType::Float, "1", false, 0, 1e300, false, {}, "weight of the memory m, >= 0"},
        {"gamma", ParamType::Float, "1", false, 0, 1e300, true, {}, "weight of the new gradient, > 0"}},
       make_ef, "error feedback: g <- beta*m + gamma*g, then m <- g - decoded (encoder-side memory)",
       "Seide et al. 2014 (1-bit SGD, error feedback); Stich, Cordonnier & Jaggi 2018 Alg. 1; Makkar 2023 (survey) §3.2 Alg. 2",
       "ef | topk(ratio=0.1)"},
      {"delta", StageKind::Transform, 1, {}, {}, make_delta,
       "codes the difference to the previous frame's decoded tensor (keyframes code the tensor)",
       "time correlation of updates, TCS (Ozfatura, Ozfatura & Gündüz 2021) §I-E, §II-A", "delta | fp16"},
      // ---- sparsifiers ----
      {"topk", StageKind::Sparsifier, 1, {},
       {{"ratio", ParamType::Float, "", false, 0, 1, true, {}, "fraction kept, (0, 1] (or k)"},
        {"k", ParamType::Int, "", false, 1, 1e18, false, {}, "count kept (or ratio)"},
        {"scope", ParamType::Choice, "layer", false, 0, 0, false, {"layer", "global"},
         "rank within each tensor, or across the whole snapshot"},
        {"by_sign", ParamType::Bool, "false", false, 0, 0, false, {},
         "k per sign: the k largest positive and the k most negative values (SBC's val+ and val-; layer scope)"}},
       make_topk, "keep the k largest |g| (ties to the lower index), O(d) radix select; or k of each sign",
       "Aji & Heafield 2017 (Sparse Communication for Distributed Gradient Descent) §2; Stich et al. 2018 §2; "
       "by_sign: Sattler et al. 2019 (SBC) Algorithm 1",
       "topk(ratio=0.1)"},
      {"threshold", StageKind::Sparsifier, 1, {},
       {{"tau", ParamType::Float, "", true, 0, 1e300, false, {}, "keep |g| >= tau"}}, make_threshold,
       "keep every element with |g| >= tau", "cf. Strom 2015 (Interspeech)",
       "threshold(tau=0.5)"},
      {"dgc", StageKind::Sparsifier, 1, {},
       {{"ratio", ParamType::Float, "", true, 0, 1, true, {}, "fraction kept, (0, 1]"},
        {"sample", ParamType::Float, "0.01", false, 0, 1, true, {}, "fraction of |g| sampled for the threshold"}},
       make_dgc, "sampled top-k threshold, exact top-k above 1.3k, lowered below 0.8k (at most 10 rounds)",
       "Lin et al. 2018 (Deep Gradient Compression, ICLR) §2.1, §5", "dgc(ratio=0.01)"},
      {"randk", StageKind::Sparsifier, 1, {},
       {{"ratio", ParamType::Float, "", false, 0, 1, true, {}, "fraction of the U positions kept, (0, 1] (or k)"},
        {"k", ParamType::Int, "", false, 1, 1e18, false, {}, "positions kept (or ratio)"},
        {"shared_seed", ParamType::Bool, "true", false, 0, 0, false, {},
         "decoder regenerates the positions from the container seed: no index stream"},
        {"unbiased", ParamType::Bool, "false", false, 0, 0, false, {}, "scale kept values by U/k"},
        int_param("block", "1", 1, 16777216, "elements per position (block Random-K); last block may be partial")},
       make_randk, "k positions (or blocks) uniformly without replacement",
       "Stich, Cordonnier & Jaggi 2018 (Sparsified SGD with Memory) §2; TCS (Ozfatura, Ozfatura & Gündüz 2021) §I-C (shared seed)",
       "randk(ratio=0.25)"},
      {"bird", StageKind::Sparsifier, 1, {},
       {{"vectors", ParamType::Choice, "attach", false, 0, 0, false, {"attach", "dense"},
         "1-D tensors: send (fp32) the entries of the sibling weight's sampled output channels, or all"}},
       make_bird, "BIRD: blocks (conv kernels, matrix rows) sampled by L1 then L-inf; kept blocks = sign * S",
       "Wu, Yang, Zou et al. 2023 (BIRD+, journal version of BIRD) §III-B/C, Algorithm 1 with the L-inf stage",
       "bird | sign | plain | lzma(stream=index)"},
      {"bird+", StageKind::Sparsifier, 1, {},
       {{"gamma", ParamType::Float, "", false, 0, 1e6, false, {},
         "exponent on the L-inf probability, >= 0; larger keeps fewer blocks (or keep)"},
        {"keep", ParamType::Float, "", false, 0, 1, true, {},
         "target kept fraction of each tensor, (0, 1]: gamma solved per tensor (or gamma)"},
        {"vectors", ParamType::Choice, "attach", false, 0, 0, false, {"attach", "dense"},
         "1-D tensors: send (fp32) the entries of the sibling weight's sampled output channels, or all"}},
       make_bird_plus, "BIRD+: L1 sampling, then K ~ sum Bernoulli(p_inf^gamma) blocks chosen uniformly; sign * S",
       "Wu et al. 2023 (BIRD+) §III-C, Algorithm 1 (gamma correction, uniform second stage)",
       "bird+(gamma=1.4) | sign | plain | lzma(stream=index)"},
      {"tcs", StageKind::Sparsifier, 1, {},
       {{"global", ParamType::Float, "0.01", false, 0, 1, false, {},
         "fraction of the snapshot in the global mask: top of the previous decoded update, sent without positions"},
        {"local", ParamType::Float, "0.001", false, 0, 1, false, {},
         "fraction in the local mask: top of g + e outside the global mask, positions coded (tcspos)"},
        {"fairness", ParamType::Choice, "none", false, 0, 0, false, {"none", "lf", "plf"},
         "layer-wise fairness: lf = every tensor gets its minimum in both masks, plf = in the global mask only"},
        {"min_global", ParamType::Float, "0.001", false, 0, 1, false, {},
         "lf/plf: least fraction of each tensor in the global mask (the paper's phi_min_global)"},
        {"min_local", ParamType::Float, "0.0004", false, 0, 1, false, {},
         "lf: least fraction of each tensor in the local mask (the paper's phi_min_local)"}},
       make_tcs,
       "time-correlated sparsification: values of the previous update's top positions + coded top of the residual",
       "Ozfatura, Ozfatura & Gündüz 2021 (TCS) §II-A..C, Algorithm 2, §II-E position code",
       "tcs(global=0.05, local=0.01)"},
      // ---- low-rank ----
      {"powersgd", StageKind::LowRank, 1, {},
       {int_param("rank", "1", 1, 65536, "rank r of the approximation (r' = min(n, m, r))"),
        int_param("iters", "1", 1, 64, "power iterations per frame (warm-started from the last frame's Q)"),
        {"ef", ParamType::Bool, "true", false, 0, 0, false, {}, "error feedback: M <- M + e, e <- M - decoded"}},
       make_powersgd, "PowerSGD: [shape[0], rest] matrices as P^Q^T by warm-started power iteration; others dense",
       "Vogels, Karimireddy & Jaggi 2019 (PowerSGD) Alg. 1-2; Makkar 2023 (survey) §3; PyTorch powerSGD_hook (min compression 2)",
       "powersgd(rank=2)"},
      {"accordion", StageKind::LowRank, 1, {},
       {{"mild", ParamType::Pipeline, "", true, 0, 0, false, {},
         "the low-compression reducer for critical regimes, quoted: \"powersgd(rank=2)\""},
        {"aggressive", ParamType::Pipeline, "", true, 0, 0, false, {},
         "the high-compression reducer (the same stage as mild), quoted: \"powersgd(rank=1)\""},
        {"eta", ParamType::Float, "0.5", false, 0, 1e300, false, {},
         "critical when |old - new| / old >= eta for the norms of the last two accumulated intervals"},
        int_param("interval", "1", 1, 1e9, "frames per interval: the gradient is accumulated and the choice made per interval")},
       make_accordion,
       "Accordion: per tensor and interval, mild in critical regimes (gradient-norm change >= eta), else aggressive",
       "Agarwal et al. 2021 (Accordion) eq. 2 and auto_scale.py; Makkar 2023 (survey) §4",
       "accordion(mild=\"powersgd(rank=2)\", aggressive=\"powersgd(rank=1)\")"},
      // ---- quantizers ----
      {"raw", StageKind::Quantizer, 1, {}, {}, make_raw,
       "values as stored: the tensor's own dtype when untouched, else f32 (implied when no quantizer)",
       "-", "raw"},
      {"fp16", StageKind::Quantizer, 1, {}, {}, make_fp16, "IEEE binary16 cast, round to nearest even",
       "IEEE 754-2008", "fp16"},
      {"bf16", StageKind::Quantizer, 1, {}, {}, make_bf16, "bfloat16 cast, round to nearest even",
       "Kalamkar et al. 2019", "bf16"},
      {"qsgd", StageKind::Quantizer, 1, {},
       {int_param("levels", "127", 1, 16777215, "quantization levels s: |v|/||v|| is coded as l/s, l in 0..s"),
        int_param("bucket", "512", 0, 4294967295.0, "values per bucket with their own norm; 0 = one bucket"),
        {"coding", ParamType::Choice, "fixed", false, 0, 0, false, {"fixed", "elias"},
         "level codes: sign + ceil(log2(s+1)) bits, or Elias-gamma of l+1 (+ sign when l > 0)"}},
       make_qsgd, "QSGD: per bucket, |v_i|/||v||*s rounded up or down at random (unbiased); norm per bucket",
       "Alistarh et al. 2017 (QSGD) §3; Makkar 2023 (survey) §2.2", "qsgd(levels=15, bucket=128, coding=elias)"},
      {"terngrad", StageKind::Quantizer, 1, {},
       {{"clip", ParamType::Float, "2.5", false, 0, 1e6, false, {},
         "clip |g| to clip*std first, around 0 (TernGrad §3.3, GRACE's 2.5 sigma); 0 = no clipping (unbiased)"}},
       make_terngrad, "TernGrad: values to {-s, 0, s}, s = max|clip(g)|, kept with probability |g|/s; 2 bits/value",
       "Wen et al. 2017 (TernGrad) §3, clipping §3.3 (|g| <= c*sigma); GRACE (Xu et al. 2021) clamp(g, -c, c)", "terngrad"},
      {"sign", StageKind::Quantizer, 1, {},
       {{"scale", ParamType::Choice, "mean", false, 0, 0, false, {"mean", "l1", "none"},
         "mean |v| of the coded values, ||g||_1/d of the tensor (EF-signSGD), or none (+-1)"}},
       make_sign, "scaled sign: 1 bit per value (0 counts as +) and one f32 scale",
       "Bernstein et al. 2018 (signSGD); Karimireddy et al. 2019 (EF-signSGD); Wu et al. 2023 (BIRD's sign values)", "sign"},
      {"onebit", StageKind::Quantizer, 1, {},
       {{"per", ParamType::Choice, "column", false, 0, 0, false, {"column", "tensor"},
         "means per column of the [shape[0], rest] view, or per tensor (GRACE)"}},
       make_onebit, "1-bit SGD: 1 bit per value, decoded to the mean of its group's values with the same bit",
       "Seide et al. 2014 (1-bit SGD); Makkar 2023 (survey) §2.3", "onebit"},
      {"ssdm", StageKind::Quantizer, 1, {}, {}, make_ssdm,
       "stochastic sign: +1 with probability 1/2 + g/(2||g||), decoded ||g||*s (unbiased, 1 bit/value)",
       "Safaryan & Richtarik 2021 (SSDM); Wu, He, Guo et al. 2022 (Marsit) §III, App. A", "randk(k=1) | ssdm"},
      {"sbc", StageKind::Quantizer, 1, {}, {}, make_sbc,
       "Sparse Binary Compression: keep the side (+/-) of the kept values with the larger mean |v|, sent as one value",
       "Sattler et al. 2019 (SBC) Algorithm 1, after topk(by_sign=true)", "topk(ratio=0.01, by_sign=true) | sbc | golomb"},
      {"intN", StageKind::Quantizer, 1, {}, {int_param("bits", "8", 1, 32, "bits per value")}, make_intn,
       "uniform min/max quantization, round to nearest, for reference", "-", "intN(bits=8)"},
      {"fractional", StageKind::Quantizer, 1, {},
       {int_param("P", "16", 1, 65536, "intervals (geometric, between the smallest and largest |v|)")},
       make_fractional, "fractional quantization: |v| to its geometric interval's mean; ceil(log2 P) + 1 bits/value",
       "Ozfatura, Ozfatura & Gündüz 2021 (TCS) §II-F", "fractional(P=16)"},
      {"curvefit", StageKind::Quantizer, 1, {},
       {{"basis", ParamType::Choice, "poly", false, 0, 0, false, {"poly", "dexp", "logit"},
         "curve fitted to |v| against its rank: polynomial, double exponential, or polynomial in the logit"},
        int_param("degree", "5", 0, 15, "degree of the poly and logit curves (dexp has 4 coefficients)"),
        int_param("segments", "1", 1, 64, "rank segments fitted separately (fewer when a segment would be too short)")},
       make_curvefit,
       "curve fit of the sorted kept values (positives and negatives apart): fp64 coefficients only; "
       "the positions then travel in value order",
       "DeepReduce: Kostopoulou 2020 (MSc thesis) §4 (4.2.1 logit, 4.2.2 polynomial segments, 4.3.1 double exponential)",
       "topk(ratio=0.1) | curvefit(segments=2)"},
      // ---- index coders ----
      {"plain", StageKind::IndexCoder, 1, {}, {}, make_plain,
       "positions as u32 (u64 when the universe d >= 2^32), little-endian; keeps a value-order index",
       "TCS (Ozfatura, Ozfatura & Gündüz 2021) §I-C and eq. (10) (§II-A): log2 d bits per position, as fixed-width words",
       "topk(ratio=0.1) | plain"},
      {"varint", StageKind::IndexCoder, 1, {}, {}, make_varint,
       "gaps of ascending positions as LEB128 (implied after a sparsifier); keeps a value-order index",
       "LEB128 (DWARF v2 standard 1993, §7.6) of delta-coded sorted positions", "topk(ratio=0.1) | varint"},
      {"bitmap", StageKind::IndexCoder, 1, {}, {}, make_bitmap, "one bit per position of the universe (d bits)",
       "DeepReduce (Kostopoulou 2020) §2.3 (the kept mask as a bit-stream)", "topk(ratio=0.1) | bitmap"},
      {"rle", StageKind::IndexCoder, 1, {}, {}, make_rle,
       "zero-run lengths of the bitmap in fixed-width codes, the width chosen per tensor",
       "DeepReduce (Kostopoulou 2020) §2.3.1 (run-length encoding counting only the zeros, Figure 1)",
       "topk(ratio=0.1) | rle"},
      {"golomb", StageKind::IndexCoder, 1, {}, {}, make_golomb,
       "Golomb-Rice code of the gaps, b* = 1 + floor(log2(ln(phi-1)/ln(1-k/d)))",
       "SBC: Sattler et al. 2019, Golomb position encoding (BIRD+ refs [10], [29]: Wu et al. 2023)",
       "topk(ratio=0.1) | golomb"},
      {"elias", StageKind::IndexCoder, 1, {},
       {{"kind", ParamType::Choice, "gamma", false, 0, 0, false, {"gamma", "delta"}, "Elias code of gap + 1"}},
       make_elias, "Elias gamma or delta code of the gaps (cost independent of d)",
       "Elias 1975, universal codeword sets (the integer codes of QSGD, Alistarh et al. 2017)",
       "topk(ratio=0.1) | elias(kind=delta)"},
      {"tcspos", StageKind::IndexCoder, 1, {}, {}, make_tcspos,
       "TCS block code: blocks of B = 2^ceil(log2(d/k)); '1' + log2 B bits per position, '0' ends a block",
       "TCS (Ozfatura, Ozfatura & Gündüz 2021) §II-E, Algorithm 4, eq. (18)", "topk(ratio=0.1) | tcspos"},
      {"bloom", StageKind::IndexCoder, 1, {},
       {{"fpr", ParamType::Float, "0.01", false, 1e-9, 0.9, false, {},
         "target false-positive rate eps: m = ceil(-r ln eps/(ln 2)^2) bits, k = round(-ln eps/ln 2) hashes"},
        {"policy", ParamType::Choice, "conflict", false, 0, 0, false, {"leftmost", "random", "conflict"},
         "how the decoder picks r of the positions the filter answers"},
        {"fp_aware", ParamType::Bool, "false", false, 0, 0, false, {},
         "send the values at the positions the decoder will pick (each picked position gets its own value)"},
        {"second", ParamType::Bool, "false", false, 0, 0, false, {},
         "also send a second filter of the false positives P - S (same fpr); the decoder picks the positions it "
         "clears outright"}},
       make_bloom, "Bloom filter of the kept positions (lossy): the decoder queries every position, a policy picks r",
       "DeepReduce: Kostopoulou 2020 (MSc thesis) §3 (3.2 sizing, 3.4 policies, 3.6 second filter, 3.7 "
       "false-positive-aware)",
       "topk(ratio=0.1) | bloom(fpr=0.05, fp_aware=true)"},
      // ---- lossless ----
      {"shuffle", StageKind::Lossless, 1, {},
       {int_param("width", "0", 0, 16, "element width in bytes; 0 = the stream's own"),
        int_param("block", "0", 0, 1073741824, "elements per shuffled run; 0 = the whole stream is one run"),
        stream_param()},
       make_shuffle, "byte shuffle (byte j of every element together)", "Blosc / HDF5 shuffle filter", "shuffle | zstd"},
      {"zstd", StageKind::Lossless, 1, {},
       {int_param("level", "3", -7, 22, "zstd compression level"),
        int_param("minmatch", "0", 0, 7, "shortest match searched, 3..7 (0 = the level's)"),
        int_param("hashlog", "0", 0, 25, "log2 of the match finder's hash table, 6..25 (0 = the level's)"),
        stream_param()},
       make_zstd,
       "Zstandard", "RFC 8878", "zstd(level=1)"},
      {"lzma", StageKind::Lossless, 1, {},
       {int_param("preset", "6", 0, 9, "xz preset 0..9"), stream_param()}, make_lzma, "LZMA2 (liblzma)",
       "Wu et al. 2023 (BIRD codes block indices with LZMA)", "lzma(preset=1)"},
  };
  return table;
}

}  // namespace

const std::vector<StageEntry>& stage_table() { return build_table(); }

const StageEntry* find_stage(const std::string& name) noexcept {
  for (const auto& e : stage_table())
    if (name == e.name) return &e;
  return nullptr;
}

const char* alternative_param(const std::string& stage, const std::string& param) noexcept {
  // Each pair once; the stages' factories refuse both given at once (KeepCount::from, bird+).
  static constexpr const char* kPairs[][3] = {{"topk", "ratio", "k"}, {"randk", "ratio", "k"}, {"bird+", "gamma", "keep"}};
  for (const auto& p : kPairs) {
    if (stage != p[0]) continue;
    if (param == p[1]) return p[2];
    if (param == p[2]) return p[1];
  }
  return nullptr;
}

const std::vector<Preset>& preset_table() {
  static const std::vector<Preset> presets = {
      {"lossless", "raw | shuffle(block=262144) | zstd(level=1, minmatch=7, hashlog=10)", "bit-exact: byte shuffle + Zstandard"},
      {"fp16", "fp16", "half-precision cast (PyTorch's fp16_compress_hook)"},
      {"qsgd8", "qsgd(levels=127, bucket=512)", "QSGD 8-bit, bucket 512 (Alistarh et al. 2017; DeepReduce's bucket)"},
      {"qsgd4", "qsgd(levels=7, bucket=512)", "QSGD 4-bit, bucket 512 (Alistarh et al. 2017)"},
      {"qsgd2", "qsgd(levels=1, bucket=512)", "QSGD 2-bit, bucket 512 (Alistarh et al. 2017)"},
      {"terngrad", "terngrad(clip=2.5)", "TernGrad with 2.5-sigma clipping (Wen et al. 2017; GRACE)"},
      {"signsgd", "sign(scale=none)", "signSGD, +-1 per value (Bernstein et al. 2018)"},
      {"ssdm", "ssdm", "stochastic sign descent (Safaryan & Richtarik 2021; Marsit: Wu, He, Guo et al. 2022)"},
      {"ef-signsgd", "ef | sign(scale=l1)", "EF-signSGD: error feedback + sign scaled by ||g||_1/d (Karimireddy et al. 2019)"},
      {"onebit", "ef | onebit", "1-bit SGD with error feedback, column means (Seide et al. 2014; Makkar 2023 (survey) §2.3)"},
      {"sbc", "topk(ratio=0.01, by_sign=true) | sbc | golomb",
       "Sparse Binary Compression: top-1% of each sign, the side with the larger mean sent as that mean, Golomb "
       "positions (Sattler et al. 2019, Algorithm 1)"},
      {"topk-1pct", "topk(ratio=0.01)", "Top-k 1%, varint positions (Aji & Heafield 2017 §2; Stich et al. 2018)"},
      {"randk-1pct", "randk(ratio=0.01)", "Random-k 1%, shared seed: no index (Stich et al. 2018; TCS (Ozfatura, Ozfatura & Gündüz 2021) §I-C)"},
      {"dgc", "dgc(ratio=0.001)", "Deep Gradient Compression, 99.9% sparsity (Lin et al. ICLR 2018 §2.1, §5)"},
      {"deepreduce-bloom", "topk(ratio=0.01) | bloom(fpr=0.01, policy=conflict, fp_aware=true)",
       "DeepReduce: top-1%, false-positive-aware Bloom filter with conflict sets, fp32 values (Kostopoulou 2020 (DeepReduce) §3.7, Table 2)"},
      {"deepreduce-fit", "topk(ratio=0.01) | curvefit(basis=poly, degree=5, segments=4) | varint",
       "DeepReduce: top-1%, polynomial curve fit of the values, positions in value order (Kostopoulou 2020 (DeepReduce) §4.2.2)"},
      {"bird", "bird | sign | plain | lzma(stream=index)",
       "BIRD: bi-random block sampling, sign values + one scale, LZMA-coded block indices (Wu et al. 2023)"},
      {"bird+", "bird+(gamma=1.4) | sign | plain | lzma(stream=index)",
       "BIRD+ with gamma 1.4: gamma-corrected count, uniform choice, sign values, LZMA indices (Wu et al. 2023)"},
      {"tcs", "tcs(global=0.01, local=0.001)",
       "TCS: 1% global mask from the previous update + 0.1% coded local positions, fp32 values (Ozfatura, Ozfatura & Gündüz 2021 (TCS), Table I)"},
      {"tcs-q5", "tcs(global=0.01, local=0.001) | fractional(P=16)",
       "TCS with 5-bit fractional values (sign + 4-bit interval; Ozfatura, Ozfatura & Gündüz 2021 (TCS) §II-F, TCS-LF-Q5's quantizer, Table II)"},
      {"powersgd-r1", "powersgd(rank=1)", "PowerSGD rank 1, warm start, error feedback (Vogels et al. 2019; Makkar 2023 (survey) §3)"},
      {"powersgd-r2", "powersgd(rank=2)", "PowerSGD rank 2, warm start, error feedback (Vogels et al. 2019; Makkar 2023 (survey) §3)"},
      {"powersgd-r4", "powersgd(rank=4)", "PowerSGD rank 4, warm start, error feedback (Vogels et al. 2019; Makkar 2023 (survey) §3)"},
      {"accordion-powersgd", "accordion(mild=\"powersgd(rank=2)\", aggressive=\"powersgd(rank=1)\")",
       "Accordion over PowerSGD rank 2 (critical) / rank 1, eta 0.5 (Agarwal et al. 2021 Table 1; Makkar 2023 (survey) §4.2)"},
      {"accordion-topk", "ef | accordion(mild=\"topk(ratio=0.99)\", aggressive=\"topk(ratio=0.1)\")",
       "Accordion over top-k 99% (critical) / 10% with error feedback (Agarwal et al. 2021; Makkar 2023 (survey) §4.3)"},
  };
  return presets;
}

const Preset* find_preset(const std::string& name) noexcept {
  for (const auto& p : preset_table())
    if (name == p.name) return &p;
  return nullptr;
}

}  // namespace gradcodec
