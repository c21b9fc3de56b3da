// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — the registered stages and the presets, as records (`gradcodec list`, docs/api.md).
// Part of the API: <gradcodec/gradcodec.hpp> includes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gradcodec {

// One parameter of a stage, as its schema declares it (docs/stages.md).
struct ParamRecord {
  std::string name;
  std::string type;               // "int", "float", "bool", "choice" or "pipeline"
  std::string default_text;       // the canonical default; empty: none (optional or required)
  bool required = false;
  double min = -1e300, max = 1e300;  // the inclusive range of an int or float ((min, max] when
  bool min_exclusive = false;        // min_exclusive); the extremes when the schema gives none
  std::vector<std::string> choices;  // a choice's values, in the schema's order
  std::string help;
};

// One registered stage (a row of the registry, lib/engine/registry.cpp).
struct StageRecord {
  std::string name;
  std::string kind;      // "transform", "sparsifier", "lowrank", "quantizer", "index coder" or "lossless"
  uint32_t version = 0;  // the wire version it writes
  std::vector<ParamRecord> params;
  std::string summary;
  std::string source;    // the paper and section it follows
  std::string example;   // a complete pipeline using it
};

// One preset.
struct PresetRecord {
  std::string name;
  std::string pipeline;  // its canonical text
  std::string source;
  // Bytes of working memory per element that encoding an f32 [4096, 4096] tensor with it may
  // take, as EncoderOptions::memory_limit counts them (the tensor and its stages' memory).
  double encode_memory = 0;
};

// Every registered stage, in the registry's order. Never throws but std::bad_alloc.
std::vector<StageRecord> stage_catalogue();
// Every preset, in the registry's order (EncoderOptions::preset takes these names).
std::vector<PresetRecord> preset_catalogue();

}  // namespace gradcodec
