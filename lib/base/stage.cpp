// SPDX-License-Identifier: BSD-3-Clause
#include <gradcodec/half.hpp>
#include <gradcodec/plugin/stage.hpp>

#include <gradcodec/detail/pages.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace gradcodec {

double Stage::work_per_element(const TensorInfo& t, double kept) const noexcept {
  (void)t;
  switch (kind()) {
    case StageKind::Transform: return 8;  // its output in f32, and a copy kept for after_encode()
    case StageKind::Sparsifier:
    case StageKind::LowRank: return 4 + 12 * kept;  // a dense f32 copy; a u64 position and an f32 value per kept value
    case StageKind::Quantizer: return 4 * kept;  // its streams: at most one f32 per coded value
    case StageKind::IndexCoder: return 0.25 + 10 * kept;  // a bit per position of the universe; LEB128's worst case per kept one
    case StageKind::Lossless: return 0;  // its output, at most the size of the streams: PipelineStages::work_bytes
  }
  return 0;
}

Stream& Streams::add(std::string name, uint8_t width) {
  if (find(name)) fail(ErrorCode::Internal, "stream '" + name + "' produced twice");
  Stream s;
  s.name = std::move(name);
  s.width = width;
  list_.push_back(std::move(s));
  return list_.back();
}

Stream* Streams::find(const std::string& name) noexcept {
  for (auto& s : list_)
    if (s.name == name) return &s;
  return nullptr;
}

const Stream* Streams::find(const std::string& name) const noexcept {
  for (const auto& s : list_)
    if (s.name == name) return &s;
  return nullptr;
}

std::span<const uint8_t> Streams::get(const std::string& name) const {
  const Stream* s = find(name);
  if (!s) fail(ErrorCode::Corrupt, "missing stream '" + name + "'");
  return s->view();
}

void Stream::own() {
  if (!is_lent) return;
  reserve_fresh(bytes, lent.size());
  bytes.assign(lent.begin(), lent.end());
  lent = {};
  is_lent = false;
}

uint64_t Streams::total_bytes() const noexcept {
  uint64_t n = 0;
  for (const auto& s : list_) n += s.view().size();
  return n;
}

void to_f32(DType dt, const uint8_t* src, uint64_t n, float* dst) {
  switch (dt) {
    case DType::F32:
      if (n) std::memcpy(dst, src, n * 4);  // (empty tensors may come with null pointers)
      return;
    case DType::F64:
      for (uint64_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, src + 8 * i, 8);
        dst[i] = static_cast<float>(v);
      }
      return;
    case DType::F16:
      f16_to_f32_n(src, n, dst);
      return;
    case DType::BF16:
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = bf16_to_f32(h);
      }
      return;
    case DType::Other: break;
  }
  fail(ErrorCode::Internal, "to_f32 on a non-floating tensor");
}

void from_f32(const float* src, uint64_t n, DType dt, uint8_t* dst) {
  switch (dt) {
    case DType::F32:
      if (n) std::memcpy(dst, src, n * 4);
      return;
    case DType::F64:
      for (uint64_t i = 0; i < n; ++i) {
        double v = src[i];
        std::memcpy(dst + 8 * i, &v, 8);
      }
      return;
    case DType::F16:
      f32_to_f16_n(src, n, dst);
      return;
    case DType::BF16:
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t h = f32_to_bf16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case DType::Other: break;
  }
  fail(ErrorCode::Internal, "from_f32 to a non-floating dtype");
}

std::span<const float> Payload::f32_view() {
  if (values.empty() && n > 0 && !sparse && !lowrank && source && source->dtype() == DType::F32 &&
      source->data.size() == n * 4 && reinterpret_cast<uintptr_t>(source->data.data()) % alignof(float) == 0)
    return {reinterpret_cast<const float*>(source->data.data()), n};
  return dense_f32();
}

std::vector<float>& Payload::dense_f32() {
  if (values.empty() && n > 0 && !sparse && !lowrank) {
    if (!source) fail(ErrorCode::Internal, "dense_f32 without a source tensor");
    values.resize(n);
    to_f32(source->dtype(), source->data.data(), n, values.data());
  }
  return values;
}

}  // namespace gradcodec

namespace gradcodec {

namespace {

// The dense vector of `total` elements holding run k of `src` (`run` elements) at index[k]·run
// and zeros elsewhere. In index order each output element is written once, front to back (the
// zeros of a gap, then a run) into fresh memory; in value order (index not ascending) the
// output is zero-filled first and the runs copied over it.
template <class T>
std::vector<T> place_blocks(const T* src, const std::vector<uint64_t>& index, uint64_t run, uint64_t total,
                            bool value_order) {
  if (value_order) {
    auto dense = zeroed_fresh<T>(total);
    for (size_t k = 0; k < index.size(); ++k) std::memcpy(dense.data() + index[k] * run, src + k * run, run * sizeof(T));
    return dense;
  }
  std::vector<T> dense;
  reserve_fresh(dense, total);
  for (size_t k = 0; k < index.size(); ++k) {
    dense.resize(index[k] * run);  // the gap before this run: zeros
    dense.insert(dense.end(), src + k * run, src + (k + 1) * run);
  }
  dense.resize(total);
  return dense;
}

}  // namespace

void scatter_to_dense(Payload& p) {
  const uint64_t block = p.block;
  if (block == 0) fail(ErrorCode::Corrupt, "block size 0");
  const bool exact = !p.exact_bytes.empty() || (p.exact && p.values.empty() && !p.index.empty());
  const size_t es = exact ? dtype_size(p.exact_dtype) : 4;
  const uint64_t count = static_cast<uint64_t>(p.index.size()) * block;
  if ((exact ? p.exact_bytes.size() / es : p.values.size()) != count)
    fail(ErrorCode::Corrupt, "value count does not match the index");
  uint64_t prev = 0;
  for (size_t k = 0; k < p.index.size(); ++k) {
    uint64_t pos = p.index[k];
    if (pos >= p.universe || (pos + 1) * block > p.n)
      fail(ErrorCode::Corrupt, "position " + std::to_string(pos) + " outside the tensor");
    if (!p.value_order && k > 0 && pos <= prev) fail(ErrorCode::Corrupt, "positions not ascending");
    prev = pos;
  }
  if (exact)
    p.exact_bytes = place_blocks(p.exact_bytes.data(), p.index, block * es, p.n * es, p.value_order);
  else
    p.values = place_blocks(p.values.data(), p.index, block, p.n, p.value_order);
  p.sparse = false;
}

}  // namespace gradcodec

namespace gradcodec {

double StageStat::value() const noexcept {
  if (!(den > 0)) return 0.0;
  const double v = num / den;
  return root ? std::sqrt(v) : v;
}

void merge_stats(StageStats& into, const StageStats& add) {
  for (const auto& s : add) {
    auto it = std::find_if(into.begin(), into.end(), [&](const StageStat& x) { return x.name == s.name; });
    if (it == into.end()) {
      into.push_back(s);
    } else {
      it->num += s.num;
      it->den += s.den;
    }
  }
}

}  // namespace gradcodec
