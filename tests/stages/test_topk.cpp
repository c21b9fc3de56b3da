// SPDX-License-Identifier: BSD-3-Clause
// topk: exactly the set a full sort picks (|g| descending, ties to the lower index) for every k
// from 1 to d, on tensors full of ties; scope=global matches a full sort of the concatenated
// snapshot (plan_frame called directly, and through a real container); NaN ranks lowest;
// k = max(1, round(ratio·d)); refusals; kept values come back bit-exact in every dtype.
#include <catch2/catch.hpp>

#include "sparsify/topk.hpp"
#include "support.hpp"

#include <gradcodec/container.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>

using namespace gradcodec;
using namespace gradcodec::test;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// The reference: std::stable_sort of all positions by |g| descending (NaN below everything),
// so equal magnitudes keep index order; the first k, ascending.
std::vector<uint64_t> by_full_sort(const std::vector<float>& v, uint64_t k) {
  std::vector<uint64_t> order(v.size());
  std::iota(order.begin(), order.end(), uint64_t{0});
  auto mag = [&](uint64_t i) { return std::isnan(v[i]) ? -1.0 : std::fabs(static_cast<double>(v[i])); };
  std::stable_sort(order.begin(), order.end(), [&](uint64_t a, uint64_t b) { return mag(a) > mag(b); });
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

// Tensors with many ties: few levels, constants, specials, and magnitudes that share their top
// radix digits and differ only in the last mantissa bits.
std::vector<std::vector<float>> tie_heavy_tensors() {
  std::vector<std::vector<float>> ts;
  ts.push_back(gaussian(257, 11));
  auto q = gaussian(300, 12);
  for (auto& x : q) x = std::clamp(std::round(x * 1.5f), -2.0f, 2.0f);  // {-2,-1,0,1,2}, ± ties
  ts.push_back(q);
  ts.push_back(std::vector<float>(64, 0.5f));
  ts.push_back(std::vector<float>(33, 0.0f));
  ts.push_back({kNaN, 0.0f, -0.0f, 1.0f, -kInf, kInf, kNaN, 1e-45f, -1.0f, 3e38f, 1.0f, -3e38f});
  std::vector<float> w;
  for (int j = 0; j < 200; ++j) {
    float base = std::ldexp(1.0f, (j % 7) * 13 - 40);
    w.push_back(std::nextafter(base, 10.0f) * (j % 3 ? 1.0f : -1.0f));
    w.push_back(base + base * 1e-7f * static_cast<float>(j % 5));
  }
  ts.push_back(w);
  ts.push_back({7.0f});
  return ts;
}

std::unique_ptr<Reducer> topk_stage(const std::string& params) {
  Pipeline p = Pipeline::parse("topk(" + params + ")");
  const StageSpec& s = p.stages()[0];
  auto st = find_stage("topk")->make(s.params, s.version);
  return std::unique_ptr<Reducer>(static_cast<Reducer*>(st.release()));
}

// Runs the stage's encode on one tensor; returns the payload.
Payload encode_with(Reducer& r, const Tensor& t, const StageContext& ctx) {
  Payload p;
  p.source = &t;
  p.info = &t.info;
  p.n = t.elements();
  Streams s;
  r.encode(p, s, ctx);
  return p;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("gradcodec_topk_" + name)).string();
}

}  // namespace

TEST_CASE("topk_select picks what a full sort picks, for every k from 1 to d", "[topk]") {
  for (const auto& v : tie_heavy_tensors()) {
    INFO("d = " << v.size());
    for (uint64_t k = 1; k <= v.size(); ++k) {
      INFO("k = " << k);
      REQUIRE(stages::topk_select(v, k) == by_full_sort(v, k));
    }
    CHECK(stages::topk_select(v, 0).empty());
    CHECK(stages::topk_select(v, v.size() + 5).size() == v.size());
  }
}

TEST_CASE("topk_select matches a full sort on large tensors (vectorised scan, split histograms)", "[topk]") {
  // Above 4096 elements the first digit is counted in four interleaved histograms, and every
  // scan compares 16 keys at a time: a size that is no multiple of 16, ties, NaN and ±Inf.
  std::vector<float> v = gaussian(10007, 31);
  for (size_t i = 0; i < v.size(); i += 7) v[i] = (i % 2 ? -1.0f : 1.0f) * 2.0f;  // a tie every 7th
  v[3] = kNaN, v[4000] = kInf, v[9999] = -kInf, v[10006] = 2.0f;
  // |x| > 2 for ~4.6% of the rest (~390): k from ~390 to ~1820 cuts through the 1431 ties.
  for (uint64_t k : {1, 2, 3, 16, 100, 391, 500, 1000, 1431, 1800, 1900, 5000, 10005, 10006, 10007}) {
    INFO("k = " << k);
    REQUIRE(stages::topk_select(v, k) == by_full_sort(v, k));
  }
}

TEST_CASE("topk_select's sampled path keeps what a full sort keeps, or hands over to the full path", "[topk]") {
  using stages::topk_select_sampled;
  const uint64_t d = stages::kSampledMin + 1237;  // no multiple of 16
  std::vector<uint64_t> idx;
  uint64_t nonfinite = 99;
  SECTION("gradient-like values with ties: the sample's bound lets at least k through") {
    std::vector<float> v = gaussian(d, 41);
    for (size_t i = 0; i < d; i += 5) v[i] = (i % 2 ? -1.0f : 1.0f) * 2.5f;  // ~1/5 tie at |2.5|
    // Per-block scales, as gradients have per-channel ones.
    for (size_t i = 0; i < d; ++i) v[i] *= 1.0f + static_cast<float>((i / 4096) % 3);
    for (uint64_t k : {1, 7, 100, 667, 1000, 2000}) {
      INFO("k = " << k);
      REQUIRE(topk_select_sampled(v, k, &nonfinite, idx));
      CHECK(nonfinite == 0);
      REQUIRE(idx == by_full_sort(v, k));
      REQUIRE(stages::topk_select(v, k) == idx);
    }
  }
  SECTION("a sample that overrates the tensor: fewer than k pass, the full path answers") {
    // Large values exactly where the sample's 256 runs of 16 lie (at r·(d − 16)/255), small ones
    // elsewhere: the bound sits among the large values, and only 4096 elements reach it.
    std::vector<float> v = gaussian(d, 42, 1e-3f);
    for (uint64_t r = 0; r < 256; ++r)
      for (uint64_t j = 0; j < 16; ++j) v[r * (d - 16) / 255 + j] = 1.0f + static_cast<float>((r * 16 + j) % 97);
    const uint64_t k = 5000;
    CHECK_FALSE(topk_select_sampled(v, k, &nonfinite, idx));
    CHECK(idx.empty());
    CHECK(stages::topk_select(v, k) == by_full_sort(v, k));
    CHECK(stages::topk_select(v, 100) == by_full_sort(v, 100));  // here the sample is right
  }
  SECTION("dense cuts, mostly-zero tensors and small tensors take the full path") {
    std::vector<float> v = gaussian(d, 43);
    CHECK_FALSE(topk_select_sampled(v, d / 4, nullptr, idx));  // the bound would pass 1/4
    CHECK(stages::topk_select(v, d / 4) == by_full_sort(v, d / 4));
    std::vector<float> z(d, 0.0f);
    for (size_t i = 0; i < d; i += 1000) z[i] = static_cast<float>(i);
    CHECK_FALSE(topk_select_sampled(z, 200, nullptr, idx));  // the bound is ±0's key
    CHECK(stages::topk_select(z, 200) == by_full_sort(z, 200));
    std::vector<float> small = gaussian(stages::kSampledMin - 1, 44);
    CHECK_FALSE(topk_select_sampled(small, 10, nullptr, idx));
  }
  SECTION("NaN and Inf are counted exactly, wherever they lie") {
    std::vector<float> v = gaussian(d, 45);
    v[d - 1] = kNaN, v[12345] = kNaN, v[3] = -kInf, v[d / 2] = kInf;
    // a NaN in the scalar tail (d is no multiple of 16) and in the vector loop
    REQUIRE(topk_select_sampled(v, 600, &nonfinite, idx));
    CHECK(nonfinite == 4);
    CHECK(idx.empty());
    uint64_t full = 0;
    CHECK(stages::topk_select(v, 600, &full).empty());
    CHECK(full == 4);
    // Without screening, NaN ranks lowest and ±Inf highest, as in the full path.
    REQUIRE(topk_select_sampled(v, 600, nullptr, idx));
    CHECK(idx == by_full_sort(v, 600));
  }
}

TEST_CASE("topk stage keeps the sorted set and its own values for every k", "[topk]") {
  auto v = gaussian(64, 21);
  for (auto& x : v) x = std::round(x * 2.0f) / 2.0f;  // steps of 0.5: ties
  Tensor t = make_tensor("w", {8, 8}, v);
  for (uint64_t k = 1; k <= v.size(); ++k) {
    auto r = topk_stage("k=" + std::to_string(k));
    Payload p = encode_with(*r, t, {});
    REQUIRE(p.sparse);
    REQUIRE(p.universe == 64);
    REQUIRE(p.index == by_full_sort(v, k));
    for (size_t j = 0; j < p.index.size(); ++j) REQUIRE(p.values[j] == v[p.index[j]]);
  }
}

TEST_CASE("topk: NaN ranks lowest, Inf highest", "[topk]") {
  std::vector<float> v = {kNaN, 0.0f, 1.0f, kNaN, -2.0f, -kInf};
  CHECK(stages::topk_select(v, 1) == std::vector<uint64_t>{5});
  CHECK(stages::topk_select(v, 4) == std::vector<uint64_t>{1, 2, 4, 5});
  CHECK(stages::topk_select(v, 5) == std::vector<uint64_t>{0, 1, 2, 4, 5});  // the first NaN
}

TEST_CASE("topk: k = max(1, round(ratio·d)), at most d; n = 0 keeps nothing", "[topk]") {
  Tensor t = make_tensor("w", {1000}, gaussian(1000, 2));
  const std::vector<std::pair<std::string, size_t>> cases = {
      {"ratio=0.0004", 1}, {"ratio=0.0015", 2}, {"ratio=0.0025", 3}, {"ratio=1%", 10}, {"ratio=1", 1000},
      {"k=1", 1},          {"k=999", 999},      {"k=5000", 1000}};
  for (const auto& [params, kept] : cases) {
    INFO(params);
    CHECK(encode_with(*topk_stage(params), t, {}).index.size() == kept);
  }
  Tensor empty = make_tensor("e", {0}, {});
  CHECK(encode_with(*topk_stage("ratio=0.5"), empty, {}).index.empty());
}

TEST_CASE("topk refuses ratio and k together, neither, or out of range", "[topk]") {
  auto refusal = [](const std::string& text) {
    try {
      Pipeline::parse(text);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Usage);
      return std::string(e.what());
    }
    FAIL("accepted: " << text);
    return std::string();
  };
  CHECK_THAT(refusal("topk"), Catch::Contains("topk") && Catch::Contains("ratio") && Catch::Contains("k"));
  CHECK_THAT(refusal("topk(ratio=0.1, k=3)"), Catch::Contains("topk: give ratio or k, not both"));
  CHECK_THAT(refusal("topk(ratio=0)"), Catch::Contains("out of range"));
  CHECK_THAT(refusal("topk(ratio=1.5)"), Catch::Contains("out of range"));
  CHECK_THAT(refusal("topk(k=0)"), Catch::Contains("out of range"));
  CHECK_THAT(refusal("topk(ratio=0.1, scope=model)"), Catch::Contains("layer|global"));
}

TEST_CASE("topk round trip keeps the input's own bits at the kept positions, zeros elsewhere", "[topk]") {
  auto v = gaussian(500, 8);
  v[3] = kInf;
  for (DType dt : {DType::F16, DType::BF16, DType::F32, DType::F64}) {
    INFO(dtype_name(dt));
    Tensor t = make_tensor("w", {500}, v);
    std::vector<uint8_t> bytes(500 * dtype_size(dt));
    from_f32(v.data(), 500, dt, bytes.data());
    t.info.dtype = dt;
    t.data = Buffer(bytes);
    const auto expect = by_full_sort(values_of(t), 50);  // ranks the dtype's values (bf16 ties)
    if (dt == DType::F32) {
      // An f32 tensor is screened by topk itself: the Inf is counted in the first pass and the
      // pipeline stops there (the codec refuses the tensor or stores it raw, cli_roundtrip.py).
      PipelineStages stages(Pipeline::parse("topk(ratio=0.1)"));
      PipelineStages::TensorState st;
      StageContext ctx;
      ctx.info = &t.info;
      REQUIRE(stages.screens_nonfinite());
      CHECK(stages.encode(t, ctx, st).nonfinite == 1);
      CHECK(stages::topk_select(values_of(t), 50) == expect);  // unscreened callers rank Inf first
      continue;
    }
    RoundTrip r = roundtrip("topk(ratio=0.1)", t);
    REQUIRE(r.decoded.dtype() == dt);
    const size_t es = dtype_size(dt);
    std::vector<uint8_t> zero(es, 0);
    size_t kept = 0;
    for (size_t i = 0, j = 0; i < 500; ++i) {
      const uint8_t* got = r.decoded.data.data() + i * es;
      if (j < expect.size() && expect[j] == i) {
        REQUIRE(std::memcmp(got, t.data.data() + i * es, es) == 0);
        ++j, ++kept;
      } else {
        REQUIRE(std::memcmp(got, zero.data(), es) == 0);
      }
    }
    CHECK(kept == 50);
  }
}

namespace {
// A snapshot with ties across tensors, an empty, a 0-d, an f16 and a non-floating tensor.
std::vector<Tensor> global_snapshot() {
  std::vector<Tensor> s;
  auto q = [](size_t n, uint64_t seed, float step) {
    auto v = gaussian(n, seed);
    for (auto& x : v) x = std::round(x / step) * step;
    return v;
  };
  s.push_back(make_tensor("a.weight", {5, 8}, q(40, 1, 0.5f)));
  s.push_back(make_tensor("a.bias", {0}, {}));
  s.push_back(make_other("step", "<i8", {1}, std::vector<uint8_t>(8, 1)));
  s.push_back(make_tensor("b.weight", {25}, q(25, 2, 1.0f)));
  s.push_back(make_tensor("b.scale", {}, {1.0f}));
  Tensor h = make_tensor("c.weight", {3, 10}, q(30, 3, 0.5f));
  std::vector<uint8_t> hb(30 * 2);
  auto hv = values_of(h);
  from_f32(hv.data(), 30, DType::F16, hb.data());
  h.info.dtype = DType::F16;
  h.data = Buffer(hb);
  s.push_back(h);
  return s;
}
}  // namespace

TEST_CASE("topk scope=global: plan_frame + encode match a full sort over the whole snapshot", "[topk]") {
  auto snap = global_snapshot();
  std::vector<float> all;  // floating tensors concatenated in tensor order
  std::vector<size_t> offset(snap.size(), 0);
  for (size_t i = 0; i < snap.size(); ++i) {
    offset[i] = all.size();
    if (snap[i].dtype() == DType::Other) continue;
    auto v = values_of(snap[i]);
    all.insert(all.end(), v.begin(), v.end());
  }
  REQUIRE(all.size() == 96);
  FrameView view;
  view.count = snap.size();
  view.info = [&](size_t i) { return snap[i].info; };
  view.load = [&](size_t i) { return snap[i]; };
  auto check = [&](const std::string& params, uint64_t k) {
    INFO(params);
    auto r = topk_stage(params + ", scope=global");
    auto plan = r->plan_frame(view, {});
    REQUIRE(plan);
    std::vector<uint64_t> got;
    for (size_t i = 0; i < snap.size(); ++i) {
      if (snap[i].dtype() == DType::Other) continue;
      StageContext ctx;
      ctx.tensor = static_cast<uint32_t>(i);
      ctx.frame_plan = plan.get();
      for (uint64_t pos : encode_with(*r, snap[i], ctx).index) got.push_back(offset[i] + pos);
    }
    REQUIRE(got == by_full_sort(all, k));
  };
  for (uint64_t k = 1; k <= all.size(); ++k) check("k=" + std::to_string(k), k);
  check("ratio=0.1", 10);  // round(9.6)
  check("ratio=1", 96);
  // Without a frame plan (a lone tensor), global falls back to the tensor itself.
  auto r = topk_stage("k=3, scope=global");
  CHECK(encode_with(*r, snap[0], {}).index == by_full_sort(values_of(snap[0]), 3));
}

TEST_CASE("topk scope=global through SequenceEncoder and a real container", "[topk]") {
  auto snap = global_snapshot();
  const std::string path = temp_path("global.gcz");
  {
    SequenceEncoder enc(Pipeline::parse("topk(k=12, scope=global)"), {});
    ContainerWriter w(path, true, enc.header("[]"));
    FrameSource src = frame_source(snap);
    enc.encode_frame(src, w);
    w.finish();
  }
  std::ifstream f(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), {});
  std::filesystem::remove(path);
  ContainerReader reader(InputFile::from_bytes(std::move(bytes), "global.gcz"));
  SequenceDecoder dec(reader);
  std::vector<float> all;
  for (const auto& t : snap)
    if (t.dtype() != DType::Other) {
      auto v = values_of(t);
      all.insert(all.end(), v.begin(), v.end());
    }
  const auto kept = by_full_sort(all, 12);
  // Each record that went through the pipeline holds exactly its share of the global top-12;
  // a record stored raw (encoding would have grown it) holds the whole tensor.
  size_t offset = 0, through_pipeline = 0;
  for (size_t i = 0; i < snap.size(); ++i) {
    if (snap[i].dtype() == DType::Other) continue;
    auto v = values_of(snap[i]);
    auto d = values_of(dec.decode(0, i));
    const bool raw = reader.record(0, i).storage == Storage::Raw;
    through_pipeline += !raw;
    INFO(snap[i].name() << (raw ? " (raw)" : ""));
    for (size_t j = 0; j < v.size(); ++j) {
      const bool in = std::binary_search(kept.begin(), kept.end(), offset + j);
      REQUIRE(d[j] == (raw || in ? v[j] : 0.0f));
    }
    offset += v.size();
  }
  CHECK(through_pipeline >= 2);
}

TEST_CASE("ef before topk stops on the Inf its accumulated error would make; topk never ranks it", "[topk]") {
  // ef's accumulated error could overflow finite inputs to Inf. Frame 0 sends one of four 3e38
  // values; frame 1's g + e would be 3e38 + 3e38 = Inf for the three others. ef reports that
  // (Encoded::overflow: the codec refuses the tensor or stores it raw) rather than handing topk
  // values the input never held.
  const std::vector<float> g(4, 3e38f);
  const std::vector<Tensor> frames = {make_tensor("w", {4}, g), make_tensor("w", {4}, g)};
  CHECK_THROWS_WITH(sequence_roundtrip("ef | topk(k=1)", frames),
                    "ef: beta*m + gamma*g is beyond float32's range (3.4e38)");
  const auto first = sequence_roundtrip("ef | topk(k=1)", {frames[0]});
  const auto f0 = values_of(first[0]);
  CHECK(std::count(f0.begin(), f0.end(), 3e38f) == 1);
  CHECK(std::count(f0.begin(), f0.end(), 0.0f) == 3);
}
