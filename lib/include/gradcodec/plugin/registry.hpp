// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — the stage registry: one explicit table (lib/engine/registry.cpp), no static
// self-registration. A row gives a stage's name, kind, wire version, parameter schema and factory.
//
// Part of the interface for stage authors (include/gradcodec/plugin/, docs/api.md "Writing a
// stage"): not yet stable, it changes with the engine.
#pragma once

#include <gradcodec/plugin/stage.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gradcodec {

enum class ParamType : uint8_t { Int, Float, Bool, Choice, Pipeline };

struct ParamSpec {
  std::string name;
  ParamType type = ParamType::Float;
  std::string default_text;  // canonical default; empty = no default (optional or required)
  bool required = false;
  double min = -1e300, max = 1e300;  // inclusive range for Int/Float
  bool min_exclusive = false;        // (min, max]
  std::vector<std::string> choices;  // for Choice
  std::string help;
};

// A parameter's value. Numbers keep the double; choices, pipelines and bools their text.
struct ParamValue {
  ParamType type = ParamType::Float;
  double num = 0;
  std::string text;  // Choice name; Pipeline canonical text; "true"/"false" for Bool
};

class Params {
 public:
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  double num(const std::string& name) const;
  int64_t integer(const std::string& name) const;
  bool flag(const std::string& name) const;
  const std::string& text(const std::string& name) const;
  void set(const std::string& name, ParamValue v) { values_[name] = std::move(v); }
  void erase(const std::string& name) { values_.erase(name); }
  const std::map<std::string, ParamValue>& values() const { return values_; }
  bool operator==(const Params& o) const;

 private:
  std::map<std::string, ParamValue> values_;
};

struct StageEntry {
  const char* name;
  StageKind kind;
  uint32_t version;  // current wire version; older versions the factory still accepts are listed
  std::vector<uint32_t> decodable_versions;
  std::vector<ParamSpec> params;
  // Builds a stage from validated parameters for the given wire version. May throw Usage for
  // combinations the schema cannot express ("give ratio or k").
  std::unique_ptr<Stage> (*make)(const Params& params, uint32_t version);
  const char* summary;
  const char* source;   // paper / section
  const char* example;  // a complete pipeline using the stage (tests run every row's example)
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
