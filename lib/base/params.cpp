// SPDX-License-Identifier: BSD-3-Clause
#include <gradcodec/plugin/params.hpp>

#include <gradcodec/error.hpp>

namespace gradcodec {

namespace {
const ParamValue& get(const std::map<std::string, ParamValue>& m, const std::string& name) {
  auto it = m.find(name);
  if (it == m.end()) fail(ErrorCode::Internal, "stage parameter '" + name + "' is not set");
  return it->second;
}
}  // namespace

double Params::num(const std::string& name) const { return get(values_, name).num; }
int64_t Params::integer(const std::string& name) const {
  return static_cast<int64_t>(get(values_, name).num);
}
bool Params::flag(const std::string& name) const { return get(values_, name).text == "true"; }
const std::string& Params::text(const std::string& name) const { return get(values_, name).text; }
const std::vector<NestedStage>& Params::stages(const std::string& name) const { return get(values_, name).stages; }

bool Params::operator==(const Params& o) const {
  if (values_.size() != o.values_.size()) return false;
  for (const auto& [k, v] : values_) {
    auto it = o.values_.find(k);
    if (it == o.values_.end() || it->second.type != v.type || it->second.text != v.text ||
        it->second.num != v.num)
      return false;
  }
  return true;
}

const char* stage_kind_name(StageKind k) noexcept {
  switch (k) {
    case StageKind::Transform: return "transform";
    case StageKind::Sparsifier: return "sparsifier";
    case StageKind::LowRank: return "lowrank";
    case StageKind::Quantizer: return "quantizer";
    case StageKind::IndexCoder: return "index coder";
    case StageKind::Lossless: return "lossless";
  }
  return "?";
}

}  // namespace gradcodec
