// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — a stage's parameters: their schema (ParamSpec, one per parameter in a registry row,
// plugin/registry.hpp) and their validated values (Params, what a stage's factory receives).
// The stage folders include this header and stage.hpp, never the registry or the pipeline
// (docs/architecture.md "Layers").
//
// Part of the interface for stage authors (include/gradcodec/plugin/, docs/api.md "Writing a
// stage"): not yet stable, it changes with the engine.
#pragma once

#include <gradcodec/plugin/stage.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gradcodec {

enum class ParamType : uint8_t { Int, Float, Bool, Choice, Pipeline };

// One parameter of a registry row. Rows name their fields (designated initializers,
// lib/engine/registry.cpp) and leave out the ones at their defaults.
struct ParamSpec {
  std::string name{};
  ParamType type = ParamType::Float;
  std::string default_text{};  // canonical default; empty = no default (optional or required)
  bool required = false;
  double min = -1e300, max = 1e300;  // inclusive range for Int/Float
  bool min_exclusive = false;        // (min, max]
  std::vector<std::string> choices{};  // for Choice
  std::string help{};
};

// One stage of a quoted pipeline parameter (accordion's mild and aggressive), resolved by the
// engine when it validates the parameter: the stage folders sit below the engine and do not parse
// pipelines or look stages up themselves.
struct NestedStage {
  std::string name;
  StageKind kind = StageKind::Transform;
  std::function<std::unique_ptr<Stage>()> make;  // a new stage with its validated parameters and version
};

// A parameter's value. Numbers keep the double; choices, pipelines and bools their text.
struct ParamValue {
  ParamType type = ParamType::Float;
  double num = 0;
  std::string text;                 // Choice name; Pipeline canonical text; "true"/"false" for Bool
  std::vector<NestedStage> stages{};  // Pipeline: its stages in order, the implied ones included
};

class Params {
 public:
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  double num(const std::string& name) const;
  int64_t integer(const std::string& name) const;
  bool flag(const std::string& name) const;
  const std::string& text(const std::string& name) const;
  const std::vector<NestedStage>& stages(const std::string& name) const;  // a Pipeline parameter's
  void set(const std::string& name, ParamValue v) { values_[name] = std::move(v); }
  void erase(const std::string& name) { values_.erase(name); }
  const std::map<std::string, ParamValue>& values() const { return values_; }
  bool operator==(const Params& o) const;

 private:
  std::map<std::string, ParamValue> values_;
};

}  // namespace gradcodec
