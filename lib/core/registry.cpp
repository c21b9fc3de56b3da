// The one explicit registration table (STYLE.md habit 3). Adding a stage = one file pair under its
// kind's folder + one row here + its tests + its section in docs/stages.md.
#include <gradcodec/registry.hpp>

// transforms
// sparsifiers
// low-rank
// quantizers
#include "quantize/fp16.hpp"
#include "quantize/raw.hpp"
// index coders
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
      // ---- sparsifiers ----
      // ---- low-rank ----
      // ---- quantizers ----
      {"raw", StageKind::Quantizer, 1, {}, {}, make_raw,
       "values as stored: the tensor's own dtype when untouched, else f32 (implied when no quantizer)",
       "-", "raw"},
      {"fp16", StageKind::Quantizer, 1, {}, {}, make_fp16, "IEEE binary16 cast, round to nearest even",
       "IEEE 754-2008", "fp16"},
      {"bf16", StageKind::Quantizer, 1, {}, {}, make_bf16, "bfloat16 cast, round to nearest even",
       "Kalamkar et al. 2019", "bf16"},
      // ---- index coders ----
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
  };
  return presets;
}

const Preset* find_preset(const std::string& name) noexcept {
  for (const auto& p : preset_table())
    if (name == p.name) return &p;
  return nullptr;
}

}  // namespace gradcodec
