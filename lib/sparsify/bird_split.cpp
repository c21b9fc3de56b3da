// SPDX-License-Identifier: BSD-3-Clause
#include "sparsify/bird_split.hpp"

#include <string_view>
#include <unordered_map>

namespace gradcodec::stages {

BirdSplit bird_split(const std::vector<uint64_t>& shape) noexcept {
  BirdSplit s;
  if (shape.size() <= 1) {
    s.vector = true;
    return s;
  }
  for (uint64_t dim : shape)
    if (dim == 0) return s;  // empty: no blocks
  uint64_t m = shape.back();
  size_t lead = shape.size() - 1;  // dimensions that index blocks
  if (shape.size() == 4) {
    m = shape[2] * shape[3];
    lead = 2;
  }
  uint64_t blocks = 1;
  for (size_t i = 0; i < lead; ++i) blocks *= shape[i];
  s.blocks = blocks;
  s.block = m;
  s.channels = shape[0];
  s.per_channel = blocks / shape[0];
  return s;
}

std::string bird_sibling_name(const std::string& name) {
  const size_t dot = name.rfind('.');
  const std::string prefix = dot == std::string::npos ? "" : name.substr(0, dot + 1);
  const std::string leaf = dot == std::string::npos ? name : name.substr(dot + 1);
  constexpr std::string_view kBias = "bias";
  if (leaf.size() > kBias.size() && leaf.compare(leaf.size() - kBias.size(), kBias.size(), kBias) == 0)
    return prefix + leaf.substr(0, leaf.size() - kBias.size()) + "weight";
  return prefix + "weight";
}

std::vector<int64_t> bird_attach_map(size_t count, const std::function<TensorInfo(size_t)>& info) {
  std::vector<TensorInfo> infos;
  infos.reserve(count);
  std::unordered_map<std::string, size_t> by_name;
  for (size_t i = 0; i < count; ++i) {
    infos.push_back(info(i));
    by_name.emplace(infos.back().name, i);
  }
  std::vector<int64_t> out(count, -1);
  for (size_t i = 0; i < count; ++i) {
    const TensorInfo& t = infos[i];
    if (!is_float(t.dtype) || t.shape.size() != 1 || t.shape[0] == 0) continue;
    auto it = by_name.find(bird_sibling_name(t.name));
    if (it == by_name.end() || it->second == i) continue;
    const TensorInfo& w = infos[it->second];
    if (!is_float(w.dtype) || w.shape.size() < 2 || w.shape[0] != t.shape[0]) continue;
    if (bird_split(w.shape).blocks == 0) continue;  // an empty sibling samples nothing
    out[i] = static_cast<int64_t>(it->second);
  }
  return out;
}

}  // namespace gradcodec::stages
