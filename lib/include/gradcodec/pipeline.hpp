// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — pipelines: the textual grammar, its canonical JSON form, typed-chain validation.
//
//   pipeline := stage ('|' stage)*
//   stage    := NAME [ '(' [ param (',' param)* ] ')' ]
//   param    := KEY '=' value
//   value    := NUMBER ['%'] | IDENT | '"' chars '"'        (numbers accept 1e-3 and 1%)
//
// parse() fills defaults and the implied stages (`raw` when there is no quantizer, `varint` after
// a sparsifier with no index coder) so the canonical text and JSON name every stage applied.
// text() → parse() → text() and json() → from_json() → json() are identities.
#pragma once

#include <gradcodec/plugin/registry.hpp>

#include <memory>
#include <string>
#include <vector>

namespace gradcodec {

struct StageSpec {
  std::string name;
  uint32_t version = 1;
  Params params;
};

class Pipeline {
 public:
  // Parses and validates. Errors are Error(Usage) naming the stage and what would fit.
  static Pipeline parse(const std::string& text);
  // A preset name or a pipeline text ("@name" is not needed: presets are looked up first only by
  // the CLI's --preset). Throws Usage for an unknown preset, listing the presets.
  static Pipeline preset(const std::string& name);
  // From the canonical JSON stored in a container. Errors are Error(Corrupt) ("unknown stage",
  // "unknown stage version") since a container naming what we cannot decode is refused.
  static Pipeline from_json(const std::string& json);
  // From stage specs as they are (a pipeline variant built from another's stages): the chain is
  // checked and the implied stages filled in as parse() does (Error Usage).
  static Pipeline from_stages(std::vector<StageSpec> stages);

  // The same pipeline with one parameter of the stage named `stage` set to `value` (text as
  // typed). Throws Usage when the pipeline has no such stage or the stage no such parameter.
  Pipeline with_param(const std::string& stage, const std::string& param, const std::string& value) const;
  bool has_stage(const std::string& name) const;

  std::string text() const;  // canonical text
  std::string json() const;  // canonical JSON (compact, keys in fixed order)

  const std::vector<StageSpec>& stages() const { return stages_; }
  bool operator==(const Pipeline& o) const;

 private:
  std::vector<StageSpec> stages_;
  friend struct PipelineBuilder;
};

// Formats a number the way canonical text and JSON do (shortest round-trip form).
std::string format_number(double v, ParamType t);

}  // namespace gradcodec
