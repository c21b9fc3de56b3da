// SPDX-License-Identifier: BSD-3-Clause
#include "sparsify/smartidx.hpp"

#include "index/gaps.hpp"
#include "index/golomb.hpp"
#include "sparsify/topk.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>

namespace gradcodec::stages {

namespace {

constexpr const char* kName = "smartidx";

// Rice code of g with parameter b: ⌊g/2^b⌋ zeros, a 1, the low b bits.
void put_rice(BitWriter& bw, uint64_t g, unsigned b) {
  bw.zeros(g >> b);
  bw.bit(true);
  bw.put(b == 0 ? 0 : g & (UINT64_MAX >> (64 - b)), b);
}

void put_gaps(BitWriter& bw, std::span<const uint64_t> pos, unsigned b) {
  idx::for_each_gap(pos, [&](uint64_t g) { put_rice(bw, g, b); });
}

// Positions of `count` Rice-coded gaps (parameter b) in [0, universe).
std::vector<uint64_t> get_gaps(BitReader& r, uint64_t count, uint64_t universe, unsigned b) {
  std::vector<uint64_t> out;
  out.reserve(count);  // count ≤ universe and ≤ the stream's bits / (b + 1): checked by the caller
  idx::GapDecoder gaps(universe, kName);
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t q = r.unary(gaps.max_gap() >> b);
    out.push_back(gaps.next((q << b) | r.get(b)));
  }
  return out;
}

unsigned get_rice_parameter(std::span<const uint8_t> s, size_t& pos) {
  if (pos >= s.size()) idx::corrupt(kName, "stream ends before a Rice parameter");
  const unsigned b = s[pos++];
  if (b > 63) idx::corrupt(kName, "Rice parameter " + std::to_string(b) + " is outside [0, 63]");
  return b;
}

}  // namespace

uint64_t smartidx_kernel_size(const std::vector<uint64_t>& shape) noexcept {
  if (shape.size() != 4 || shape[2] == 0 || shape[3] == 0) return 1;
  if (shape[2] > UINT32_MAX || shape[3] > UINT32_MAX) return 1;
  const uint64_t m = shape[2] * shape[3];
  return m >= 2 ? m : 1;
}

SmartIdxPackages smartidx_select(std::span<const float> v, const std::vector<uint64_t>& shape, uint64_t k,
                                 double kernel, uint64_t* nonfinite) {
  SmartIdxPackages pk;
  std::vector<uint64_t> top = topk_select(v, k, nonfinite);
  if (nonfinite && *nonfinite) return pk;
  const uint64_t m = smartidx_kernel_size(shape);
  if (m == 1) {
    pk.individual = std::move(top);
    return pk;
  }
  pk.m = m;
  pk.kernels = v.size() / m;
  // Promotion threshold: at least one element, at most m.
  const uint64_t need = std::clamp<uint64_t>(static_cast<uint64_t>(std::ceil(kernel * static_cast<double>(m))), 1, m);
  std::vector<uint64_t> promoted;
  for (size_t i = 0; i < top.size();) {  // top is ascending: a kernel's selected elements are adjacent
    const uint64_t j = top[i] / m;
    size_t e = i;
    while (e < top.size() && top[e] / m == j) ++e;
    if (e - i >= need) promoted.push_back(j);
    else pk.individual.insert(pk.individual.end(), top.begin() + static_cast<std::ptrdiff_t>(i),
                              top.begin() + static_cast<std::ptrdiff_t>(e));
    i = e;
  }
  // Group by sign pattern; a pattern's place is that of its smallest kernel (promoted ascends).
  std::unordered_map<std::string, size_t> where;  // pattern bytes → its package
  for (uint64_t j : promoted) {
    std::string key(m, '\0');
    for (uint64_t e = 0; e < m; ++e) key[e] = std::signbit(v[j * m + e]) ? 1 : 0;
    auto [it, fresh] = where.try_emplace(key, pk.patterns.size());
    if (fresh) pk.patterns.push_back({std::vector<uint8_t>(key.begin(), key.end()), {}});
    pk.patterns[it->second].kernels.push_back(j);
  }
  return pk;
}

uint64_t smartidx_bits(const SmartIdxPackages& pk, uint64_t d) noexcept {
  const unsigned bi = golomb_parameter(d, pk.individual.size());
  uint64_t bits = 8 * (idx::leb128_size(pk.individual.size()) + 1 + idx::leb128_size(pk.patterns.size()));
  bits += golomb_payload_bits(pk.individual, bi);
  for (const auto& p : pk.patterns) {
    bits += 8 * (idx::leb128_size(p.kernels.size()) + 1) + pk.m;
    bits += golomb_payload_bits(p.kernels, golomb_parameter(pk.kernels, p.kernels.size()));
  }
  return bits;
}

void smartidx_write(const SmartIdxPackages& pk, uint64_t d, std::vector<uint8_t>& out) {
  const unsigned bi = golomb_parameter(d, pk.individual.size());
  idx::put_leb128(out, pk.individual.size());
  out.push_back(static_cast<uint8_t>(bi));
  idx::put_leb128(out, pk.patterns.size());
  std::vector<unsigned> bp;
  for (const auto& p : pk.patterns) {
    bp.push_back(golomb_parameter(pk.kernels, p.kernels.size()));
    idx::put_leb128(out, p.kernels.size());
    out.push_back(static_cast<uint8_t>(bp.back()));
  }
  BitWriter bw(out);
  put_gaps(bw, pk.individual, bi);
  for (size_t i = 0; i < pk.patterns.size(); ++i) {
    for (uint8_t neg : pk.patterns[i].negative) bw.bit(neg != 0);
    put_gaps(bw, pk.patterns[i].kernels, bp[i]);
  }
  bw.flush();
}

SmartIdxPackages smartidx_read(std::span<const uint8_t> s, uint64_t d, uint64_t m) {
  SmartIdxPackages pk;
  pk.m = m;
  pk.kernels = m > 1 ? d / m : 0;
  size_t pos = 0;
  const uint64_t ki = idx::get_leb128(s, pos, kName);
  const unsigned bi = get_rice_parameter(s, pos);
  const uint64_t np = idx::get_leb128(s, pos, kName);
  // Each pattern package holds at least one kernel and takes at least 2 header bytes.
  if (np > pk.kernels || np > (s.size() - pos) / 2)
    idx::corrupt(kName, "pattern package count " + std::to_string(np) + " exceeds the " +
                            std::to_string(pk.kernels) + " kernels of the tensor or the stream");
  std::vector<uint64_t> counts(np);
  std::vector<unsigned> bp(np);
  uint64_t total = 0;
  for (uint64_t i = 0; i < np; ++i) {
    counts[i] = idx::get_leb128(s, pos, kName);
    bp[i] = get_rice_parameter(s, pos);
    if (counts[i] == 0) idx::corrupt(kName, "pattern package " + std::to_string(i) + " holds no kernel");
    if (counts[i] > pk.kernels - total)
      idx::corrupt(kName, "pattern packages hold more than the " + std::to_string(pk.kernels) + " kernels");
    total += counts[i];
  }
  const std::span<const uint8_t> bits = s.subspan(pos);
  uint64_t need = 0;  // least bits of the payload: (b + 1) per code, m per pattern
  idx::check_count(ki, d, bits.size() * 8, bi + 1, kName);
  need += ki * (bi + 1);
  for (uint64_t i = 0; i < np; ++i) {
    const uint64_t left = bits.size() * 8 - std::min<uint64_t>(need, bits.size() * 8);
    if (left < m) idx::corrupt(kName, "stream ends before the sign pattern of package " + std::to_string(i));
    idx::check_count(counts[i], pk.kernels, left - m, bp[i] + 1, kName);
    need += m + counts[i] * (bp[i] + 1);
  }
  if (need > bits.size() * 8)
    idx::corrupt(kName, "packages need at least " + std::to_string(need) + " bits but the stream holds " +
                            std::to_string(bits.size() * 8));
  BitReader r(bits, "smartidx index stream");
  pk.individual = get_gaps(r, ki, d, bi);
  // The kernels of all pattern packages, sorted (Σ c_p ≤ the stream's bits: no allocation beyond
  // the stream's size, whatever the tensor's), to find a kernel in two packages and an individual
  // position inside a kernel package.
  std::vector<uint64_t> all;
  all.reserve(total);
  for (uint64_t i = 0; i < np; ++i) {
    SmartIdxPackages::Pattern p;
    p.negative.resize(m);  // m ≤ the stream's bits (checked above)
    for (uint64_t e = 0; e < m; ++e) p.negative[e] = r.bit() ? 1 : 0;
    p.kernels = get_gaps(r, counts[i], pk.kernels, bp[i]);
    all.insert(all.end(), p.kernels.begin(), p.kernels.end());
    pk.patterns.push_back(std::move(p));
  }
  idx::expect_padding(r, kName);
  std::sort(all.begin(), all.end());
  if (auto dup = std::adjacent_find(all.begin(), all.end()); dup != all.end())
    idx::corrupt(kName, "kernel " + std::to_string(*dup) + " is in two pattern packages");
  if (!all.empty())
    for (uint64_t x : pk.individual)
      if (std::binary_search(all.begin(), all.end(), x / m))
        idx::corrupt(kName, "individual position " + std::to_string(x) + " lies in kernel package " +
                                std::to_string(x / m));
  return pk;
}

namespace {

class SmartIdx final : public Reducer {
 public:
  SmartIdx(KeepCount count, double kernel) : count_(count), kernel_(kernel) {}
  StageKind kind() const noexcept override { return StageKind::Sparsifier; }
  bool needs_index_coder() const noexcept override { return false; }
  bool values_exact() const noexcept override { return false; }  // kernel packages carry |v|
  bool screens_nonfinite() const noexcept override { return true; }
  bool reads_f32_view() const noexcept override { return true; }
  // Each selected element promotes at most its own kernel: at most k·m values (m = 1 when the
  // tensor is not cut into kernels).
  double kept_fraction(const TensorInfo& t) const noexcept override {
    const uint64_t d = t.elements();
    if (d == 0) return 1.0;
    const double k = static_cast<double>(count_.of(d)) * static_cast<double>(smartidx_kernel_size(t.shape));
    return std::min(1.0, k / static_cast<double>(d));
  }
  // The input is read in place: topk_select's candidates (4 per element at most), and per kept
  // value the selection's and the payload's u64 positions, its f32 value and its share of the
  // package stream (under 2 bytes).
  double work_per_element(const TensorInfo&, double kept) const noexcept override { return 4 + 22 * kept; }

  void encode(Payload& p, Streams& out, const StageContext&) override {
    const std::span<const float> v = p.f32_view();  // an f32 source is read in place
    // Screened only while the values are the f32 input's own (no transform changed them): the
    // top-k's first pass counts NaN/Inf and stops there when there are any.
    const bool screen = p.source && p.exact && p.source->dtype() == DType::F32;
    const SmartIdxPackages pk =
        smartidx_select(v, p.info->shape, count_.of(p.n), kernel_, screen ? &p.nonfinite : nullptr);
    if (p.nonfinite) return;  // the codec refuses the tensor or stores it raw
    Stream& s = out.add(kIndexStream);
    smartidx_write(pk, p.n, s.bytes);
    std::vector<uint64_t> index(pk.individual);
    std::vector<float> values;
    uint64_t count = index.size();
    for (const auto& pt : pk.patterns) count += pt.kernels.size() * pk.m;
    values.reserve(count);
    index.reserve(count);
    for (uint64_t x : pk.individual) values.push_back(v[x]);
    for (const auto& pt : pk.patterns)
      for (uint64_t j : pt.kernels)
        for (uint64_t e = 0; e < pk.m; ++e) {
          index.push_back(j * pk.m + e);
          values.push_back(std::fabs(v[j * pk.m + e]));
        }
    p.values = std::move(values);
    p.index = std::move(index);
    p.exact = false;
    mark(p);
  }

  void prepare_decode(Payload& p, const Streams& in, const StageContext&) override {
    const SmartIdxPackages pk = smartidx_read(in.get(kIndexStream), p.n, smartidx_kernel_size(p.info->shape));
    // Every value codec spends at least one bit per value: refuse a value count the streams
    // cannot hold before holding that many positions (distinct, so at most n of them).
    uint64_t values = pk.individual.size();
    for (const auto& pt : pk.patterns) values += pt.kernels.size() * pk.m;
    if (values / 8 > in.total_bytes())
      fail(ErrorCode::Corrupt, "smartidx: streams of " + std::to_string(in.total_bytes()) + " bytes cannot hold " +
                                   std::to_string(values) + " values");
    p.index = pk.individual;
    p.index.reserve(values);
    for (const auto& pt : pk.patterns)
      for (uint64_t j : pt.kernels)
        for (uint64_t e = 0; e < pk.m; ++e) p.index.push_back(j * pk.m + e);
    mark(p);
  }

  void decode(Payload& p, const Streams& in, const StageContext&) override {
    // The signs of the kernel packages come from their patterns.
    const SmartIdxPackages pk = smartidx_read(in.get(kIndexStream), p.n, smartidx_kernel_size(p.info->shape));
    if (p.values.size() != p.index.size())
      fail(ErrorCode::Corrupt, "smartidx: " + std::to_string(p.values.size()) + " values for " +
                                   std::to_string(p.index.size()) + " positions");
    size_t at = pk.individual.size();
    for (const auto& pt : pk.patterns)
      for (size_t j = 0; j < pt.kernels.size(); ++j)
        for (uint64_t e = 0; e < pk.m; ++e, ++at) p.values[at] = std::copysign(p.values[at], pt.negative[e] ? -1.0f : 1.0f);
    scatter_to_dense(p);
  }

 private:
  static void mark(Payload& p) {
    p.sparse = true;
    p.universe = p.n;
    p.block = 1;
    p.index_implicit = true;  // the stage's own `index` stream carries it
    p.value_order = true;     // package order; positions distinct (smartidx_read checks)
  }
  KeepCount count_;
  double kernel_;
};

}  // namespace

std::unique_ptr<Stage> make_smartidx(const Params& p, uint32_t) {
  return std::make_unique<SmartIdx>(KeepCount::from(p, kName), p.num("kernel"));
}

}  // namespace gradcodec::stages
