// The one explicit registration table (STYLE.md habit 3). Adding a stage = one file pair under its
// kind's folder + one row here + its tests + its section in docs/stages.md.
#include <gradcodec/registry.hpp>

// transforms
#include "transform/delta.hpp"
#include "transform/ef.hpp"
// sparsifiers
#include "sparsify/dgc.hpp"
#include "sparsify/randk.hpp"
#include "sparsify/threshold.hpp"
#include "sparsify/topk.hpp"
// low-rank
// quantizers
#include "quantize/fp16.hpp"
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
       "Seide et al. 2014 (1-bit SGD, error feedback); Stich, Cordonnier & Jaggi 2018 Alg. 1; seed 001 §3.2 Alg. 2",
       "ef | topk(ratio=0.1)"},
      {"delta", StageKind::Transform, 1, {}, {}, make_delta,
       "codes the difference to the previous frame's decoded tensor (keyframes code the tensor)",
       "ALGORITHMS.md delta; time correlation of updates, TCS seed 002 §I-E, §II-A", "delta | fp16"},
      // ---- sparsifiers ----
      {"topk", StageKind::Sparsifier, 1, {},
       {{"ratio", ParamType::Float, "", false, 0, 1, true, {}, "fraction kept, (0, 1] (or k)"},
        {"k", ParamType::Int, "", false, 1, 1e18, false, {}, "count kept (or ratio)"},
        {"scope", ParamType::Choice, "layer", false, 0, 0, false, {"layer", "global"},
         "rank within each tensor, or across the whole snapshot"}},
       make_topk, "keep the k largest |g| (ties to the lower index), O(d) radix select",
       "Aji & Heafield 2017 (Sparse Communication for Distributed Gradient Descent) §2; Stich et al. 2018 §2",
       "topk(ratio=0.1)"},
      {"threshold", StageKind::Sparsifier, 1, {},
       {{"tau", ParamType::Float, "", true, 0, 1e300, false, {}, "keep |g| >= tau"}}, make_threshold,
       "keep every element with |g| >= tau", "ALGORITHMS.md threshold; cf. Strom 2015 (Interspeech)",
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
       "Stich, Cordonnier & Jaggi 2018 (Sparsified SGD with Memory) §2; TCS seed 002 §I-C (shared seed)",
       "randk(ratio=0.25)"},
      // ---- low-rank ----
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
       "Alistarh et al. 2017 (QSGD) §3; seed 001 §2.2", "qsgd(levels=15, bucket=128, coding=elias)"},
      {"terngrad", StageKind::Quantizer, 1, {},
       {{"clip", ParamType::Float, "2.5", false, 0, 1e6, false, {},
         "clip to mean +- clip*std first (GRACE's 2.5 sigma); 0 = no clipping (unbiased)"}},
       make_terngrad, "TernGrad: values to {-s, 0, s}, s = max|g|, kept with probability |g|/s; 2 bits/value",
       "Wen et al. 2017 (TernGrad) §3; clipping per GRACE (Xu et al. 2021)", "terngrad"},
      {"sign", StageKind::Quantizer, 1, {},
       {{"scale", ParamType::Choice, "mean", false, 0, 0, false, {"mean", "l1", "none"},
         "mean |v| of the coded values, ||g||_1/d of the tensor (EF-signSGD), or none (+-1)"}},
       make_sign, "scaled sign: 1 bit per value (0 counts as +) and one f32 scale",
       "Bernstein et al. 2018 (signSGD); Karimireddy et al. 2019 (EF-signSGD); seed 000 (BIRD sign values)", "sign"},
      {"onebit", StageKind::Quantizer, 1, {},
       {{"per", ParamType::Choice, "column", false, 0, 0, false, {"column", "tensor"},
         "means per column of the [shape[0], rest] view, or per tensor (GRACE)"}},
       make_onebit, "1-bit SGD: 1 bit per value, decoded to the mean of its group's values with the same bit",
       "Seide et al. 2014 (1-bit SGD); seed 001 §2.3", "onebit"},
      {"ssdm", StageKind::Quantizer, 1, {}, {}, make_ssdm,
       "stochastic sign: +1 with probability 1/2 + g/(2||g||), decoded ||g||*s (unbiased, 1 bit/value)",
       "Safaryan & Richtarik 2021 (SSDM); seed 003 §III, App. A", "randk(k=1) | ssdm"},
      {"sbc", StageKind::Quantizer, 1, {}, {}, make_sbc,
       "Sparse Binary Compression: keep the kept values' side (+/-) with the larger mean, sent as one value",
       "Sattler et al. 2019 (SBC); seed 000 §II", "topk(ratio=0.01) | sbc | golomb"},
      {"intN", StageKind::Quantizer, 1, {}, {int_param("bits", "8", 1, 32, "bits per value")}, make_intn,
       "uniform min/max quantization, round to nearest, for reference", "-", "intN(bits=8)"},
      {"fractional", StageKind::Quantizer, 1, {},
       {int_param("P", "16", 1, 65536, "intervals (geometric, between the smallest and largest |v|)")},
       make_fractional, "fractional quantization: |v| to its geometric interval's mean; ceil(log2 P) + 1 bits/value",
       "Ozfatura et al. (TCS), seed 002 §II-F", "fractional(P=16)"},
      // ---- index coders ----
      {"plain", StageKind::IndexCoder, 1, {}, {}, make_plain,
       "positions as u32 (u64 when the universe d >= 2^32), little-endian; keeps a value-order index",
       "TCS seed 002 §I-C and eq. (10) (§II-A): log2 d bits per position, as fixed-width words",
       "topk(ratio=0.1) | plain"},
      {"varint", StageKind::IndexCoder, 1, {}, {}, make_varint,
       "gaps of ascending positions as LEB128 (implied after a sparsifier); keeps a value-order index",
       "LEB128 (DWARF v2 §7.6) of delta-coded sorted positions", "topk(ratio=0.1) | varint"},
      {"bitmap", StageKind::IndexCoder, 1, {}, {}, make_bitmap, "one bit per position of the universe (d bits)",
       "DeepReduce seed 004 §2.3 (the kept mask as a bit-stream)", "topk(ratio=0.1) | bitmap"},
      {"rle", StageKind::IndexCoder, 1, {}, {}, make_rle,
       "zero-run lengths of the bitmap in fixed-width codes, the width chosen per tensor",
       "DeepReduce seed 004 §2.3.1 (run-length encoding counting only the zeros, Figure 1)",
       "topk(ratio=0.1) | rle"},
      {"golomb", StageKind::IndexCoder, 1, {}, {}, make_golomb,
       "Golomb-Rice code of the gaps, b* = 1 + floor(log2(ln(phi-1)/ln(1-k/d)))",
       "SBC: Sattler et al. 2019, Golomb position encoding (seed 000 refs [10], [29]); ALGORITHMS.md",
       "topk(ratio=0.1) | golomb"},
      {"elias", StageKind::IndexCoder, 1, {},
       {{"kind", ParamType::Choice, "gamma", false, 0, 0, false, {"gamma", "delta"}, "Elias code of gap + 1"}},
       make_elias, "Elias gamma or delta code of the gaps (cost independent of d)",
       "Elias 1975, universal codeword sets (the integer codes of QSGD, Alistarh et al. 2017)",
       "topk(ratio=0.1) | elias(kind=delta)"},
      {"tcspos", StageKind::IndexCoder, 1, {}, {}, make_tcspos,
       "TCS block code: blocks of B = 2^ceil(log2(d/k)); '1' + log2 B bits per position, '0' ends a block",
       "TCS seed 002 §II-E, Algorithm 4, eq. (18)", "topk(ratio=0.1) | tcspos"},
      // ---- lossless ----
      {"shuffle", StageKind::Lossless, 1, {},
       {int_param("width", "0", 0, 16, "element width in bytes; 0 = the stream's own"), stream_param()},
       make_shuffle, "byte shuffle (byte j of every element together)", "Blosc / HDF5 shuffle filter", "shuffle | zstd"},
      {"zstd", StageKind::Lossless, 1, {},
       {int_param("level", "3", -7, 22, "zstd compression level"), stream_param()}, make_zstd,
       "Zstandard", "RFC 8878", "zstd(level=1)"},
      {"lzma", StageKind::Lossless, 1, {},
       {int_param("preset", "6", 0, 9, "xz preset 0..9"), stream_param()}, make_lzma, "LZMA2 (liblzma)",
       "seed 000 (BIRD codes block indices with LZMA)", "lzma(preset=1)"},
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

const std::vector<Preset>& preset_table() {
  static const std::vector<Preset> presets = {
      {"lossless", "raw | shuffle | zstd(level=3)", "bit-exact: byte shuffle + Zstandard"},
      {"fp16", "fp16", "half-precision cast (PyTorch's fp16_compress_hook)"},
      {"qsgd8", "qsgd(levels=127, bucket=512)", "QSGD 8-bit, bucket 512 (Alistarh et al. 2017; DeepReduce's bucket)"},
      {"qsgd4", "qsgd(levels=7, bucket=512)", "QSGD 4-bit, bucket 512 (Alistarh et al. 2017)"},
      {"qsgd2", "qsgd(levels=1, bucket=512)", "QSGD 2-bit, bucket 512 (Alistarh et al. 2017)"},
      {"terngrad", "terngrad(clip=2.5)", "TernGrad with 2.5-sigma clipping (Wen et al. 2017; GRACE)"},
      {"signsgd", "sign(scale=none)", "signSGD, +-1 per value (Bernstein et al. 2018)"},
      {"ssdm", "ssdm", "stochastic sign descent (Safaryan & Richtarik 2021; Marsit seed 003)"},
      {"ef-signsgd", "ef | sign(scale=l1)", "EF-signSGD: error feedback + sign scaled by ||g||_1/d (Karimireddy et al. 2019)"},
      {"onebit", "ef | onebit", "1-bit SGD with error feedback, column means (Seide et al. 2014; seed 001 §2.3)"},
      {"sbc", "topk(ratio=0.01) | sbc | golomb", "Sparse Binary Compression: top-1%, one mean, Golomb positions (Sattler et al. 2019)"},
      {"topk-1pct", "topk(ratio=0.01)", "Top-k 1%, varint positions (Aji & Heafield 2017 §2; Stich et al. 2018)"},
      {"randk-1pct", "randk(ratio=0.01)", "Random-k 1%, shared seed: no index (Stich et al. 2018; TCS seed 002 §I-C)"},
      {"dgc", "dgc(ratio=0.001)", "Deep Gradient Compression, 99.9% sparsity (Lin et al. ICLR 2018 §2.1, §5)"},
  };
  return presets;
}

const Preset* find_preset(const std::string& name) noexcept {
  for (const auto& p : preset_table())
    if (name == p.name) return &p;
  return nullptr;
}

}  // namespace gradcodec
