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
#include "sparsify/smartidx.hpp"
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
#include "quantize/skcompress.hpp"
#include "quantize/onebit.hpp"
#include "quantize/qsgd.hpp"
#include "quantize/raw.hpp"
#include "quantize/sbc.hpp"
#include "quantize/sign.hpp"
#include "quantize/ssdm.hpp"
#include "quantize/terngrad.hpp"
#include "quantize/zfp.hpp"
#include "quantize/fpzip.hpp"
// index coders
#include "index/bitmap.hpp"
#include "index/bloom.hpp"
#include "index/deltabin.hpp"
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
#include "lossless/zsplit.hpp"

namespace gradcodec {

namespace {

using namespace stages;

ParamSpec stream_param() {
  return {.name = "stream",
          .type = ParamType::Choice,
          .default_text = "all",
          .choices = {"all", "index", "value", "scale", "side"},
          .help = "which stream to apply to"};
}
ParamSpec int_param(const char* name, const char* def, double lo, double hi, const char* help) {
  return {.name = name, .type = ParamType::Int, .default_text = def, .min = lo, .max = hi, .help = help};
}

const std::vector<StageEntry>& build_table() {
  static const std::vector<StageEntry> table = {
      // ---- transforms ----
      {.name = "ef",
       .kind = StageKind::Transform,
       .version = 1,
       .params = {{.name = "beta", .type = ParamType::Float, .default_text = "1", .min = 0, .max = 1e300,
                   .help = "weight of the memory m, >= 0"},
                  {.name = "gamma", .type = ParamType::Float, .default_text = "1", .min = 0, .max = 1e300, .min_exclusive = true,
                   .help = "weight of the new gradient, > 0"}},
       .make = make_ef,
       .summary = "error feedback: g <- beta*m + gamma*g, then m <- g - decoded (encoder-side memory)",
       .source = "Seide et al. 2014 (1-bit SGD, error feedback); Stich, Cordonnier & Jaggi 2018 Alg. 1; Makkar 2023 (survey) §3.2 Alg. 2",
       .example = "ef | topk(ratio=0.1)"},
      {.name = "delta",
       .kind = StageKind::Transform,
       .version = 1,
       .make = make_delta,
       .summary = "codes the difference to the previous frame's decoded tensor (keyframes code the tensor)",
       .source = "time correlation of updates, TCS (Ozfatura, Ozfatura & Gündüz 2021) §I-E, §II-A",
       .example = "delta | fp16"},
      // ---- sparsifiers ----
      {.name = "topk",
       .kind = StageKind::Sparsifier,
       .version = 1,
       .params = {{.name = "ratio", .type = ParamType::Float, .min = 0, .max = 1, .min_exclusive = true,
                   .help = "fraction kept, (0, 1] (or k)"},
                  {.name = "k", .type = ParamType::Int, .min = 1, .max = 1e18,
                   .help = "count kept (or ratio)"},
                  {.name = "scope", .type = ParamType::Choice, .default_text = "layer", .choices = {"layer", "global"},
                   .help = "rank within each tensor, or across the whole snapshot"},
                  {.name = "by_sign", .type = ParamType::Bool, .default_text = "false",
                   .help = "k per sign: the k largest positive and the k most negative values (SBC's val+ and val-; layer scope)"}},
       .make = make_topk,
       .summary = "keep the k largest |g| (ties to the lower index), O(d) radix select; or k of each sign",
       .source = "Aji & Heafield 2017 (Sparse Communication for Distributed Gradient Descent) §2; Stich et al. 2018 §2; "
                 "by_sign: Sattler et al. 2019 (SBC) Algorithm 1",
       .example = "topk(ratio=0.1)",
       .target = {{.name = "ratio", .lo = 1e-5, .hi = 1, .step = 0.02, .log = true}}},
      {.name = "threshold",
       .kind = StageKind::Sparsifier,
       .version = 1,
       .params = {{.name = "tau", .type = ParamType::Float, .required = true, .min = 0, .max = 1e300,
                   .help = "keep |g| >= tau"}},
       .make = make_threshold,
       .summary = "keep every element with |g| >= tau",
       .source = "cf. Strom 2015 (Interspeech)",
       .example = "threshold(tau=0.5)"},
      {.name = "dgc",
       .kind = StageKind::Sparsifier,
       .version = 1,
       .params = {{.name = "ratio", .type = ParamType::Float, .required = true, .min = 0, .max = 1, .min_exclusive = true,
                   .help = "fraction kept, (0, 1]"},
                  {.name = "sample", .type = ParamType::Float, .default_text = "0.01", .min = 0, .max = 1, .min_exclusive = true,
                   .help = "fraction of |g| sampled for the threshold"}},
       .make = make_dgc,
       .summary = "sampled top-k threshold, exact top-k above 1.3k, lowered below 0.8k (at most 10 rounds)",
       .source = "Lin et al. 2018 (Deep Gradient Compression, ICLR) §2.1, §5",
       .example = "dgc(ratio=0.01)"},
      {.name = "randk",
       .kind = StageKind::Sparsifier,
       .version = 1,
       .params = {{.name = "ratio", .type = ParamType::Float, .min = 0, .max = 1, .min_exclusive = true,
                   .help = "fraction of the U positions kept, (0, 1] (or k)"},
                  {.name = "k", .type = ParamType::Int, .min = 1, .max = 1e18,
                   .help = "positions kept (or ratio)"},
                  {.name = "shared_seed", .type = ParamType::Bool, .default_text = "true",
                   .help = "decoder regenerates the positions from the container seed: no index stream"},
                  {.name = "unbiased", .type = ParamType::Bool, .default_text = "false",
                   .help = "scale kept values by U/k"},
                  int_param("block", "1", 1, 16777216, "elements per position (block Random-K); last block may be partial")},
       .make = make_randk,
       .summary = "k positions (or blocks) uniformly without replacement",
       .source = "Stich, Cordonnier & Jaggi 2018 (Sparsified SGD with Memory) §2; TCS (Ozfatura, Ozfatura & Gündüz 2021) §I-C (shared seed)",
       .example = "randk(ratio=0.25)",
       .target = {{.name = "ratio", .lo = 1e-5, .hi = 1, .step = 0.02, .log = true}}},
      {.name = "bird",
       .kind = StageKind::Sparsifier,
       .version = 1,
       .params = {{.name = "vectors", .type = ParamType::Choice, .default_text = "attach", .choices = {"attach", "dense"},
                   .help = "1-D tensors: send (fp32) the entries of the sibling weight's sampled output channels, or all"}},
       .make = make_bird,
       .summary = "BIRD: blocks (conv kernels, matrix rows) sampled by L1 then L-inf; kept blocks = sign * S",
       .source = "Wu, Yang, Zou et al. 2023 (BIRD+, journal version of BIRD) §III-B/C, Algorithm 1 with the L-inf stage",
       .example = "bird | sign | plain | lzma(stream=index)"},
      {.name = "bird+",
       .kind = StageKind::Sparsifier,
       .version = 1,
       .params = {{.name = "gamma", .type = ParamType::Float, .min = 0, .max = 1e6,
                   .help = "exponent on the L-inf probability, >= 0; larger keeps fewer blocks (or keep)"},
                  {.name = "keep", .type = ParamType::Float, .min = 0, .max = 1, .min_exclusive = true,
                   .help = "target kept fraction of each tensor, (0, 1]: gamma solved per tensor (or gamma)"},
                  {.name = "vectors", .type = ParamType::Choice, .default_text = "attach", .choices = {"attach", "dense"},
                   .help = "1-D tensors: send (fp32) the entries of the sibling weight's sampled output channels, or all"}},
       .make = make_bird_plus,
       .summary = "BIRD+: L1 sampling, then K ~ sum Bernoulli(p_inf^gamma) blocks chosen uniformly; sign * S",
       .source = "Wu et al. 2023 (BIRD+) §III-C, Algorithm 1 (gamma correction, uniform second stage)",
       .example = "bird+(gamma=1.4) | sign | plain | lzma(stream=index)",
       .target = {{.name = "keep", .lo = 1e-4, .hi = 1, .step = 0.02, .log = true}}},
      {.name = "tcs",
       .kind = StageKind::Sparsifier,
       .version = 1,
       .params = {{.name = "global", .type = ParamType::Float, .default_text = "0.01", .min = 0, .max = 1,
                   .help = "fraction of the snapshot in the global mask: top of the previous decoded update, sent without positions"},
                  {.name = "local", .type = ParamType::Float, .default_text = "0.001", .min = 0, .max = 1,
                   .help = "fraction in the local mask: top of g + e outside the global mask, positions coded (tcspos)"},
                  {.name = "fairness", .type = ParamType::Choice, .default_text = "none", .choices = {"none", "lf", "plf"},
                   .help = "layer-wise fairness: lf = every tensor gets its minimum in both masks, plf = in the global mask only"},
                  {.name = "min_global", .type = ParamType::Float, .default_text = "0.001", .min = 0, .max = 1,
                   .help = "lf/plf: least fraction of each tensor in the global mask (the paper's phi_min_global)"},
                  {.name = "min_local", .type = ParamType::Float, .default_text = "0.0004", .min = 0, .max = 1,
                   .help = "lf: least fraction of each tensor in the local mask (the paper's phi_min_local)"}},
       .make = make_tcs,
       .summary = "time-correlated sparsification: values of the previous update's top positions + coded top of the residual",
       .source = "Ozfatura, Ozfatura & Gündüz 2021 (TCS) §II-A..C, Algorithm 2, §II-E position code",
       .example = "tcs(global=0.05, local=0.01)"},
      {.name = "smartidx",
       .kind = StageKind::Sparsifier,
       .version = 1,
       .params = {{.name = "ratio", .type = ParamType::Float, .min = 0, .max = 1, .min_exclusive = true,
                   .help = "fraction selected by top-k, (0, 1] (or k)"},
                  {.name = "k", .type = ParamType::Int, .min = 1, .max = 1e18,
                   .help = "count selected by top-k (or ratio)"},
                  {.name = "kernel", .type = ParamType::Float, .default_text = "0.5", .min = 0, .max = 1, .min_exclusive = true,
                   .help = "4-D conv weights: a kernel with at least this fraction of its kh*kw elements selected is sent whole"}},
       .make = make_smartidx,
       .summary = "SmartIdx: top-k, promoted conv kernels sent whole, kernels grouped by sign pattern, Rice-coded indices",
       .source = "Wu, Zou, Zhang et al. 2022 (SmartIdx, AAAI); BIRD+ (Wu et al. 2023) §IV as SMT",
       .example = "smartidx(ratio=0.01, kernel=0.5)"},
      // ---- low-rank ----
      {.name = "powersgd",
       .kind = StageKind::LowRank,
       .version = 1,
       .params = {int_param("rank", "1", 1, 65536, "rank r of the approximation (r' = min(n, m, r))"),
                  int_param("iters", "1", 1, 64, "power iterations per frame (warm-started from the last frame's Q)"),
                  {.name = "ef", .type = ParamType::Bool, .default_text = "true",
                   .help = "error feedback: M <- M + e, e <- M - decoded"}},
       .make = make_powersgd,
       .summary = "PowerSGD: [shape[0], rest] matrices as P^Q^T by warm-started power iteration; others dense",
       .source = "Vogels, Karimireddy & Jaggi 2019 (PowerSGD) Alg. 1-2; Makkar 2023 (survey) §3; PyTorch powerSGD_hook (min compression 2)",
       .example = "powersgd(rank=2)",
       .target = {{.name = "rank", .lo = 1, .hi = 1024}}},
      {.name = "accordion",
       .kind = StageKind::LowRank,
       .version = 1,
       .params = {{.name = "mild", .type = ParamType::Pipeline, .required = true,
                   .help = "the low-compression reducer for critical regimes, quoted: \"powersgd(rank=2)\""},
                  {.name = "aggressive", .type = ParamType::Pipeline, .required = true,
                   .help = "the high-compression reducer (the same stage as mild), quoted: \"powersgd(rank=1)\""},
                  {.name = "eta", .type = ParamType::Float, .default_text = "0.5", .min = 0, .max = 1e300,
                   .help = "critical when |old - new| / old >= eta for the norms of the last two accumulated intervals"},
                  int_param("interval", "1", 1, 1e9, "frames per interval: the gradient is accumulated and the choice made per interval")},
       .make = make_accordion,
       .summary = "Accordion: per tensor and interval, mild in critical regimes (gradient-norm change >= eta), else aggressive",
       .source = "Agarwal et al. 2021 (Accordion) eq. 2 and auto_scale.py; Makkar 2023 (survey) §4",
       .example = "accordion(mild=\"powersgd(rank=2)\", aggressive=\"powersgd(rank=1)\")"},
      // ---- quantizers ----
      {.name = "raw",
       .kind = StageKind::Quantizer,
       .version = 1,
       .make = make_raw,
       .summary = "values as stored: the tensor's own dtype when untouched, else f32 (implied when no quantizer)",
       .source = "-",
       .example = "raw"},
      {.name = "fp16",
       .kind = StageKind::Quantizer,
       .version = 1,
       .make = make_fp16,
       .summary = "IEEE binary16 cast, round to nearest even",
       .source = "IEEE 754-2008",
       .example = "fp16"},
      {.name = "bf16",
       .kind = StageKind::Quantizer,
       .version = 1,
       .make = make_bf16,
       .summary = "bfloat16 cast, round to nearest even",
       .source = "Kalamkar et al. 2019",
       .example = "bf16"},
      {.name = "qsgd",
       .kind = StageKind::Quantizer,
       .version = 1,
       .params = {int_param("levels", "127", 1, 16777215, "quantization levels s: |v|/||v|| is coded as l/s, l in 0..s"),
                  int_param("bucket", "512", 0, 4294967295.0, "values per bucket with their own norm; 0 = one bucket"),
                  {.name = "coding", .type = ParamType::Choice, .default_text = "fixed", .choices = {"fixed", "elias"},
                   .help = "level codes: sign + ceil(log2(s+1)) bits, or Elias-gamma of l+1 (+ sign when l > 0)"}},
       .make = make_qsgd,
       .summary = "QSGD: per bucket, |v_i|/||v||*s rounded up or down at random (unbiased); norm per bucket",
       .source = "Alistarh et al. 2017 (QSGD) §3; Makkar 2023 (survey) §2.2",
       .example = "qsgd(levels=15, bucket=128, coding=elias)",
       .target = {{.name = "levels", .lo = 1, .hi = 65535}}},
      {.name = "terngrad",
       .kind = StageKind::Quantizer,
       .version = 1,
       .params = {{.name = "clip", .type = ParamType::Float, .default_text = "2.5", .min = 0, .max = 1e6,
                   .help = "clip |g| to clip*std first, around 0 (TernGrad §3.3, GRACE's 2.5 sigma); 0 = no clipping (unbiased)"}},
       .make = make_terngrad,
       .summary = "TernGrad: values to {-s, 0, s}, s = max|clip(g)|, kept with probability |g|/s; 2 bits/value",
       .source = "Wen et al. 2017 (TernGrad) §3, clipping §3.3 (|g| <= c*sigma); GRACE (Xu et al. 2021) clamp(g, -c, c)",
       .example = "terngrad"},
      {.name = "sign",
       .kind = StageKind::Quantizer,
       .version = 1,
       .params = {{.name = "scale", .type = ParamType::Choice, .default_text = "mean", .choices = {"mean", "l1", "none"},
                   .help = "mean |v| of the coded values, ||g||_1/d of the tensor (EF-signSGD), or none (+-1)"}},
       .make = make_sign,
       .summary = "scaled sign: 1 bit per value (0 counts as +) and one f32 scale",
       .source = "Bernstein et al. 2018 (signSGD); Karimireddy et al. 2019 (EF-signSGD); Wu et al. 2023 (BIRD's sign values)",
       .example = "sign"},
      {.name = "onebit",
       .kind = StageKind::Quantizer,
       .version = 1,
       .params = {{.name = "per", .type = ParamType::Choice, .default_text = "column", .choices = {"column", "tensor"},
                   .help = "means per column of the [shape[0], rest] view, or per tensor (GRACE)"}},
       .make = make_onebit,
       .summary = "1-bit SGD: 1 bit per value, decoded to the mean of its group's values with the same bit",
       .source = "Seide et al. 2014 (1-bit SGD); Makkar 2023 (survey) §2.3",
       .example = "onebit"},
      {.name = "ssdm",
       .kind = StageKind::Quantizer,
       .version = 1,
       .make = make_ssdm,
       .summary = "stochastic sign: +1 with probability 1/2 + g/(2||g||), decoded ||g||*s (unbiased, 1 bit/value)",
       .source = "Safaryan & Richtarik 2021 (SSDM); Wu, He, Guo et al. 2022 (Marsit) §III, App. A",
       .example = "randk(k=1) | ssdm"},
      {.name = "sbc",
       .kind = StageKind::Quantizer,
       .version = 1,
       .make = make_sbc,
       .summary = "Sparse Binary Compression: keep the side (+/-) of the kept values with the larger mean |v|, sent as one value",
       .source = "Sattler et al. 2019 (SBC) Algorithm 1, after topk(by_sign=true)",
       .example = "topk(ratio=0.01, by_sign=true) | sbc | golomb"},
      {.name = "intN",
       .kind = StageKind::Quantizer,
       .version = 1,
       .params = {int_param("bits", "8", 1, 32, "bits per value")},
       .make = make_intn,
       .summary = "uniform min/max quantization, round to nearest, for reference",
       .source = "-",
       .example = "intN(bits=8)"},
      {.name = "skcompress",
       .kind = StageKind::Quantizer,
       .version = 1,
       .params = {int_param("buckets", "256", 1, 4096, "equal-frequency buckets of |v| (exact quantiles); values sent as bucket indexes"),
                  int_param("rows", "2", 1, 16, "MinMaxSketch hash rows"),
                  {.name = "cols", .type = ParamType::Float, .default_text = "0.5", .min = 0, .max = 64, .min_exclusive = true,
                   .help = "MinMaxSketch cells per row, as a fraction of the coded values (at least 1)"}},
       .make = make_skcompress,
       .summary = "SKCompress values: |v| bucket indexes in a MinMaxSketch (min insert, max query), Huffman-coded cells, sign bits, f32 bucket means",
       .source = "Jiang et al., VLDB J. 29(5) 2020 (SKCompress); BIRD+ (Wu et al. 2023) §IV as SKC",
       .example = "topk(ratio=0.01) | skcompress(buckets=256, rows=2, cols=0.5) | deltabin"},
      {.name = "fractional",
       .kind = StageKind::Quantizer,
       .version = 1,
       .params = {int_param("P", "16", 1, 65536, "intervals (geometric, between the smallest and largest |v|)")},
       .make = make_fractional,
       .summary = "fractional quantization: |v| to its geometric interval's mean; ceil(log2 P) + 1 bits/value",
       .source = "Ozfatura, Ozfatura & Gündüz 2021 (TCS) §II-F",
       .example = "fractional(P=16)"},
      {.name = "curvefit",
       .kind = StageKind::Quantizer,
       .version = 1,
       .params = {{.name = "basis", .type = ParamType::Choice, .default_text = "poly", .choices = {"poly", "dexp", "logit"},
                   .help = "curve fitted to |v| against its rank: polynomial, double exponential, or polynomial in the logit"},
                  int_param("degree", "5", 0, 15, "degree of the poly and logit curves (dexp has 4 coefficients)"),
                  int_param("segments", "1", 1, 64, "rank segments fitted separately (fewer when a segment would be too short)")},
       .make = make_curvefit,
       .summary = "curve fit of the sorted kept values (positives and negatives apart): fp64 coefficients only; "
                  "the positions then travel in value order",
       .source = "DeepReduce: Kostopoulou 2020 (MSc thesis) §4 (4.2.1 logit, 4.2.2 polynomial segments, 4.3.1 double exponential)",
       .example = "topk(ratio=0.1) | curvefit(segments=2)"},
      {.name = "zfp",
       .kind = StageKind::Quantizer,
       .version = 1,
       .params = {{.name = "mode", .type = ParamType::Choice, .default_text = "rate",
                   .choices = {"rate", "precision", "accuracy", "reversible"},
                   .help = "fixed rate, fixed precision, fixed accuracy, or reversible (lossless)"},
                  {.name = "rate", .type = ParamType::Float, .min = 2.25, .max = 32,
                   .help = "mode=rate: bits per value, 2.25..32 (round(4*rate) bits per block of 4)"},
                  int_param("precision", "", 1, 32, "mode=precision: bit planes coded per block, 1..32"),
                  {.name = "tolerance", .type = ParamType::Float, .min = 1e-38, .max = 1e38,
                   .help = "mode=accuracy: largest absolute error, > 0"}},
       .make = make_zfp,
       .summary = "zfp: blocks of 4 values, block-floating-point + decorrelating transform + embedded bit planes",
       .source = "Lindstrom 2014 (Fixed-Rate Compressed Floating-Point Arrays, IEEE TVCG); zfp 1.0",
       .example = "zfp(mode=rate, rate=8)",
       .target = {{.name = "rate", .lo = 2.25, .hi = 32, .step = 0.25, .when = "mode=rate"},
                  {.name = "tolerance", .lo = 1e-12, .hi = 1, .step = 0.05, .log = true, .larger_is_finer = false,
                   .when = "mode=accuracy"}}},
      {.name = "fpzip",
       .kind = StageKind::Quantizer,
       .version = 1,
       .params = {int_param("precision", "0", 0, 32, "leading bits kept per value, 2..32; 0 = all (lossless)")},
       .make = make_fpzip,
       .summary = "fpzip: predictive coding of the values' integer images, range coded; lossless or reduced precision",
       .source = "Lindstrom & Isenburg 2006 (Fast and Efficient Compression of Floating-Point Data, IEEE TVCG); fpzip 1.3",
       .example = "fpzip(precision=16)"},
      // ---- index coders ----
      {.name = "plain",
       .kind = StageKind::IndexCoder,
       .version = 1,
       .make = make_plain,
       .summary = "positions as u32 (u64 when the universe d >= 2^32), little-endian; keeps a value-order index",
       .source = "TCS (Ozfatura, Ozfatura & Gündüz 2021) §I-C and eq. (10) (§II-A): log2 d bits per position, as fixed-width words",
       .example = "topk(ratio=0.1) | plain"},
      {.name = "varint",
       .kind = StageKind::IndexCoder,
       .version = 1,
       .make = make_varint,
       .summary = "gaps of ascending positions as LEB128 (implied after a sparsifier); keeps a value-order index",
       .source = "LEB128 (DWARF v2 standard 1993, §7.6) of delta-coded sorted positions",
       .example = "topk(ratio=0.1) | varint"},
      {.name = "bitmap",
       .kind = StageKind::IndexCoder,
       .version = 1,
       .make = make_bitmap,
       .summary = "one bit per position of the universe (d bits)",
       .source = "DeepReduce (Kostopoulou 2020) §2.3 (the kept mask as a bit-stream)",
       .example = "topk(ratio=0.1) | bitmap"},
      {.name = "rle",
       .kind = StageKind::IndexCoder,
       .version = 1,
       .make = make_rle,
       .summary = "zero-run lengths of the bitmap in fixed-width codes, the width chosen per tensor",
       .source = "DeepReduce (Kostopoulou 2020) §2.3.1 (run-length encoding counting only the zeros, Figure 1)",
       .example = "topk(ratio=0.1) | rle"},
      {.name = "golomb",
       .kind = StageKind::IndexCoder,
       .version = 1,
       .make = make_golomb,
       .summary = "Golomb-Rice code of the gaps, b* = 1 + floor(log2(ln(phi-1)/ln(1-k/d)))",
       .source = "SBC: Sattler et al. 2019, Golomb position encoding (BIRD+ refs [10], [29]: Wu et al. 2023)",
       .example = "topk(ratio=0.1) | golomb"},
      {.name = "deltabin",
       .kind = StageKind::IndexCoder,
       .version = 1,
       .params = {int_param("group", "8", 1, 4096, "gaps per group; each group a 6-bit prefix giving its bit width")},
       .make = make_deltabin,
       .summary = "delta-binary gaps with an adaptive prefix: per group of gaps, their bit width, then the gaps in that width",
       .source = "Jiang et al., VLDB J. 29(5) 2020 (SKCompress), key coding; BIRD+ (Wu et al. 2023) §IV as SKC",
       .example = "topk(ratio=0.01) | deltabin(group=8)"},
      {.name = "elias",
       .kind = StageKind::IndexCoder,
       .version = 1,
       .params = {{.name = "kind", .type = ParamType::Choice, .default_text = "gamma", .choices = {"gamma", "delta"},
                   .help = "Elias code of gap + 1"}},
       .make = make_elias,
       .summary = "Elias gamma or delta code of the gaps (cost independent of d)",
       .source = "Elias 1975, universal codeword sets (the integer codes of QSGD, Alistarh et al. 2017)",
       .example = "topk(ratio=0.1) | elias(kind=delta)"},
      {.name = "tcspos",
       .kind = StageKind::IndexCoder,
       .version = 1,
       .make = make_tcspos,
       .summary = "TCS block code: blocks of B = 2^ceil(log2(d/k)); '1' + log2 B bits per position, '0' ends a block",
       .source = "TCS (Ozfatura, Ozfatura & Gündüz 2021) §II-E, Algorithm 4, eq. (18)",
       .example = "topk(ratio=0.1) | tcspos"},
      {.name = "bloom",
       .kind = StageKind::IndexCoder,
       .version = 1,
       .params = {{.name = "fpr", .type = ParamType::Float, .default_text = "0.01", .min = 1e-9, .max = 0.9,
                   .help = "target false-positive rate eps: m = ceil(-r ln eps/(ln 2)^2) bits, k = round(-ln eps/ln 2) hashes"},
                  {.name = "policy", .type = ParamType::Choice, .default_text = "conflict", .choices = {"leftmost", "random", "conflict"},
                   .help = "how the decoder picks r of the positions the filter answers"},
                  {.name = "fp_aware", .type = ParamType::Bool, .default_text = "false",
                   .help = "send the values at the positions the decoder will pick (each picked position gets its own value)"},
                  {.name = "second", .type = ParamType::Bool, .default_text = "false",
                   .help = "also send a second filter of the false positives P - S (same fpr); the decoder picks the "
                           "positions it clears outright"}},
       .make = make_bloom,
       .summary = "Bloom filter of the kept positions (lossy): the decoder queries every position, a policy picks r",
       .source = "DeepReduce: Kostopoulou 2020 (MSc thesis) §3 (3.2 sizing, 3.4 policies, 3.6 second filter, 3.7 "
                 "false-positive-aware)",
       .example = "topk(ratio=0.1) | bloom(fpr=0.05, fp_aware=true)"},
      // ---- lossless ----
      {.name = "shuffle",
       .kind = StageKind::Lossless,
       .version = 1,
       .params = {int_param("width", "0", 0, 16, "element width in bytes; 0 = the stream's own"),
                  int_param("block", "0", 0, 1073741824, "elements per shuffled run; 0 = the whole stream is one run"),
                  stream_param()},
       .make = make_shuffle,
       .summary = "byte shuffle (byte j of every element together)",
       .source = "Blosc / HDF5 shuffle filter",
       .example = "shuffle | zstd"},
      {.name = "zstd",
       .kind = StageKind::Lossless,
       .version = 1,
       .params = {int_param("level", "3", -1000, 22, "zstd compression level (negative: faster, fewer matches)"),
                  int_param("minmatch", "0", 0, 7, "shortest match searched, 3..7 (0 = the level's)"),
                  int_param("hashlog", "0", 0, 25, "log2 of the match finder's hash table, 6..25 (0 = the level's)"),
                  {.name = "literals", .type = ParamType::Choice, .default_text = "auto",
                   .choices = {"auto", "huffman", "raw"},
                   .help = "literals Huffman-coded (huffman), stored (raw) or as the level does (auto: raw below level 1)"},
                  stream_param()},
       .make = make_zstd,
       .summary = "Zstandard",
       .source = "RFC 8878",
       .example = "zstd(level=1)"},
      {.name = "zsplit",
       .kind = StageKind::Lossless,
       .version = 1,
       .params = {int_param("level", "-1000", -1000, 22, "zstd level of the sign-and-exponent bytes (Huffman literals)"),
                  stream_param()},
       .make = make_zsplit,
       .summary = "float32 words: zero runs apart, low bytes stored, sign and exponent through zstd",
       .source = "byte planes as in Blosc / HDF5 shuffle; RFC 8878 (zstd)",
       .example = "raw | zsplit"},
      {.name = "lzma",
       .kind = StageKind::Lossless,
       .version = 1,
       .params = {int_param("preset", "6", 0, 9, "xz preset 0..9"),
                  stream_param()},
       .make = make_lzma,
       .summary = "LZMA2 (liblzma)",
       .source = "Wu et al. 2023 (BIRD codes block indices with LZMA)",
       .example = "lzma(preset=1)"},
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
  static constexpr const char* kPairs[][3] = {{"topk", "ratio", "k"}, {"randk", "ratio", "k"}, {"bird+", "gamma", "keep"}, {"smartidx", "ratio", "k"}};
  for (const auto& p : kPairs) {
    if (stage != p[0]) continue;
    if (param == p[1]) return p[2];
    if (param == p[2]) return p[1];
  }
  return nullptr;
}

}  // namespace gradcodec
