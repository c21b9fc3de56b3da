// SPDX-License-Identifier: BSD-3-Clause
// stage_catalogue(), preset_catalogue(): the registry's tables as the API's records.
#include <gradcodec/catalogue.hpp>

#include <gradcodec/codec.hpp>

namespace gradcodec {

namespace {

const char* param_type_name(ParamType t) noexcept {
  switch (t) {
    case ParamType::Int: return "int";
    case ParamType::Float: return "float";
    case ParamType::Bool: return "bool";
    case ParamType::Choice: return "choice";
    case ParamType::Pipeline: return "pipeline";
  }
  return "?";
}

}  // namespace

std::vector<StageRecord> stage_catalogue() {
  std::vector<StageRecord> out;
  for (const StageEntry& e : stage_table()) {
    StageRecord r{e.name, stage_kind_name(e.kind), e.version, {}, e.summary, e.source, e.example};
    for (const ParamSpec& p : e.params)
      r.params.push_back({p.name, param_type_name(p.type), p.default_text, p.required, p.min, p.max,
                          p.min_exclusive, p.choices, p.help});
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<PresetRecord> preset_catalogue() {
  TensorInfo t;
  t.dtype = DType::F32;
  t.shape = {4096, 4096};
  std::vector<PresetRecord> out;
  for (const Preset& p : preset_table()) {
    const Pipeline pipeline = Pipeline::preset(p.name);
    const double bytes = static_cast<double>(PipelineStages(pipeline).work_bytes(t));
    out.push_back({p.name, pipeline.text(), p.source, bytes / static_cast<double>(t.elements())});
  }
  return out;
}

}  // namespace gradcodec
