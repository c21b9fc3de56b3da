// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — the stage registry: one explicit table (lib/engine/registry.cpp), no static
// self-registration. A row gives a stage's name, kind, wire version, parameter schema and factory.
//
// Part of the interface for stage authors (include/gradcodec/plugin/, docs/api.md "Writing a
// stage"): not yet stable, it changes with the engine.
#pragma once

#include <gradcodec/plugin/params.hpp>
#include <gradcodec/plugin/stage.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gradcodec {

// The parameter that sets how much a stage keeps, searched by `--target` (docs/target.md). The
// search walks the grid lo, lo + step, ..., hi (linear) or lo, lo * (1 + step), ... (log, values
// rounded to 3 significant digits), hi always on it, and assumes a finer value never takes fewer
// bits nor gives a larger error: larger is finer when `larger_is_finer`, else smaller (a
// tolerance). `when` ("mode=rate") limits it to stages with that parameter value.
struct TargetParam {
  const char* name = nullptr;
  double lo = 0, hi = 0, step = 1;
  bool log = false;
  bool larger_is_finer = true;
  const char* when = nullptr;
};

struct StageEntry {
  const char* name;
  StageKind kind;
  uint32_t version;  // current wire version; older versions the factory still accepts are listed
  std::vector<uint32_t> decodable_versions{};  // rows leave out the empty ones
  std::vector<ParamSpec> params{};
  // Builds a stage from validated parameters for the given wire version. May throw Usage for
  // combinations the schema cannot express ("give ratio or k").
  std::unique_ptr<Stage> (*make)(const Params& params, uint32_t version);
  const char* summary;
  const char* source;   // paper / section
  const char* example;  // a complete pipeline using the stage (tests run every row's example)
  std::vector<TargetParam> target{};  // the searched parameter (at most one applies); rows leave out the empty ones
};

// The table, in the order `gradcodec list stages` prints it.
const std::vector<StageEntry>& stage_table();
const StageEntry* find_stage(const std::string& name) noexcept;
// The parameter of `stage` that `param` is the alternative to (a stage takes one of the two:
// topk's ratio or k, bird+'s gamma or keep), or nullptr. Pipeline::with_param setting one drops
// the other.
const char* alternative_param(const std::string& stage, const std::string& param) noexcept;

struct Preset {
  const char* name;
  const char* pipeline;  // textual pipeline
  const char* source;
};
const std::vector<Preset>& preset_table();
const Preset* find_preset(const std::string& name) noexcept;

}  // namespace gradcodec
