// SPDX-License-Identifier: BSD-3-Clause
// curvefit (DeepReduce, Kostopoulou 2020 §4): fp64 coefficients that reproduce the decoded values
// by the documented wire format, positives and negatives fitted apart, the stored RMSE (reported by
// bench and inspect), the value-order index stream counted honestly, fallbacks instead of failures
// for singular fits, the double-exponential solver never producing NaN, parse-time refusals, and
// corrupt-stream refusals.
#include <catch2/catch.hpp>

#include "support.hpp"

#include "index/varint.hpp"
#include "quantize/curvefit_solver.hpp"

#include <gradcodec/container.hpp>
#include <gradcodec/formats/snapshot_io.hpp>
#include <gradcodec/plugin/registry.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <unistd.h>

using namespace gradcodec;
using namespace gradcodec::test;
namespace cf = gradcodec::stages::curvefit;

namespace {

// The value stream, parsed here from the documented layout (docs/stages.d/32-curvefit.md).
struct Parsed {
  uint64_t count = 0, npos = 0;
  double rmse = 0;
  std::vector<std::vector<std::pair<int, std::vector<double>>>> groups;  // per group: (basis, coefs)
};
uint64_t leb(const std::vector<uint8_t>& s, size_t& pos) {
  uint64_t v = 0;
  for (unsigned sh = 0;; sh += 7) {
    const uint8_t b = s.at(pos++);
    v |= uint64_t(b & 0x7f) << sh;
    if (!(b & 0x80)) return v;
  }
}
double f64_at(const std::vector<uint8_t>& s, size_t& pos) {
  double d;
  REQUIRE(pos + 8 <= s.size());
  std::memcpy(&d, s.data() + pos, 8);
  pos += 8;
  return d;
}
Parsed parse(const std::vector<uint8_t>& s) {
  Parsed p;
  size_t pos = 0;
  p.count = leb(s, pos);
  p.npos = leb(s, pos);
  p.rmse = f64_at(s, pos);
  for (uint64_t c : {p.npos, p.count - p.npos}) {
    p.groups.emplace_back();
    if (c == 0) continue;
    const unsigned S = s.at(pos++);
    for (unsigned j = 0; j < S; ++j) {
      const int basis = s.at(pos++);
      const unsigned n = s.at(pos++);
      std::vector<double> w;
      for (unsigned i = 0; i < n; ++i) w.push_back(f64_at(s, pos));
      p.groups.back().emplace_back(basis, w);
    }
  }
  REQUIRE(pos == s.size());
  return p;
}

// The documented evaluation of one segment at local rank i of L (poly and dexp; logit below).
double eval_doc(int basis, const std::vector<double>& w, uint64_t i, uint64_t L) {
  const double x = double(i), n = double(L);
  if (basis == 1) {
    const double t = L > 1 ? x / (n - 1) : 0.0;
    return w[0] * std::exp(w[1] * t) + w[2] * std::exp(w[3] * t);
  }
  double t = 0;
  if (L > 1) t = basis == 0 ? 2 * x / (n - 1) - 1 : std::log((x + 0.5) / (n - x - 0.5)) / std::log(2 * n - 1);
  double v = 0, p = 1;
  for (double c : w) v += c * p, p *= t;
  return v;
}

// Value order as documented: positives (v >= 0) by |v| descending then position, then negatives.
std::vector<uint64_t> value_order(const std::vector<float>& v, const std::vector<uint64_t>& kept) {
  std::vector<uint64_t> pos, neg;
  for (uint64_t x : kept) (v[x] < 0 ? neg : pos).push_back(x);
  for (auto* g : {&pos, &neg})
    std::stable_sort(g->begin(), g->end(), [&](uint64_t a, uint64_t b) { return std::fabs(v[a]) > std::fabs(v[b]); });
  pos.insert(pos.end(), neg.begin(), neg.end());
  return pos;
}

std::vector<uint64_t> nonzero_positions(const std::vector<float>& v) {
  std::vector<uint64_t> out;
  for (uint64_t i = 0; i < v.size(); ++i)
    if (v[i] != 0) out.push_back(i);
  return out;
}

// A tensor whose positives follow p(t) and negatives q(t) exactly (t the documented poly
// coordinate of their rank), shuffled over n positions.
Tensor two_curves(uint64_t npos, uint64_t nneg, const std::vector<double>& p, const std::vector<double>& q) {
  std::vector<float> v;
  auto poly = [](const std::vector<double>& w, double t) {
    double s = 0, x = 1;
    for (double c : w) s += c * x, x *= t;
    return s;
  };
  for (uint64_t i = 0; i < npos; ++i) v.push_back(float(poly(p, 2.0 * double(i) / double(npos - 1) - 1)));
  for (uint64_t i = 0; i < nneg; ++i) v.push_back(-float(poly(q, 2.0 * double(i) / double(nneg - 1) - 1)));
  Rng r(12);
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[r.below(i)]);
  return make_tensor("w", {v.size()}, v);
}

bool threw(ErrorCode code, const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code() == code;
  }
  return false;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("gradcodec_curvefit_" + std::to_string(::getpid()) + "_" + name)).string();
}

}  // namespace

TEST_CASE("curvefit sends fp64 coefficients that reproduce the decoded values; positives and negatives apart",
          "[curvefit]") {
  // Positives follow 2 − t + 0.2t³, negatives 0.5 − 0.3t + 0.1t² (both decreasing in t).
  const std::vector<double> p = {2.0, -1.0, 0.0, 0.2}, q = {0.5, -0.3, 0.1, 0.0};
  Tensor t = two_curves(600, 400, p, q);
  const auto v = values_of(t);
  RoundTrip rt = roundtrip("topk(ratio=1) | curvefit(degree=3)", t);
  const Stream* vs = rt.streams.find(kValueStream);
  REQUIRE(vs);
  const Parsed ps = parse(vs->bytes);
  CHECK(ps.count == 1000);
  CHECK(ps.npos == 600);
  REQUIRE(ps.groups[0].size() == 1);
  REQUIRE(ps.groups[1].size() == 1);
  // The fp64 coefficients recover each group's own curve (inputs are f32: ~1e-7 relative).
  for (int g = 0; g < 2; ++g) {
    const auto& w = ps.groups[g][0].second;
    const auto& want = g == 0 ? p : q;
    REQUIRE(w.size() == 4);
    for (int j = 0; j < 4; ++j) CHECK(std::fabs(w[j] - want[j]) < 1e-6);
  }
  CHECK(ps.rmse < 1e-6);
  // Size formula: 8·(|count| + |npos| + 8 + Σ_groups (1 + Σ_segments (2 + 8n))).
  CHECK(vs->bytes.size() == 2 + 2 + 8 + 2 * (1 + 2 + 8 * 4));
  // Decoded = the coefficients evaluated by the documented rule, rounded to f32, sign of the group.
  const auto out = values_of(rt.decoded);
  const auto order = value_order(v, nonzero_positions(v));
  for (uint64_t j = 0; j < order.size(); ++j) {
    const bool positive = j < ps.npos;
    const uint64_t rank = positive ? j : j - ps.npos, L = positive ? ps.npos : ps.count - ps.npos;
    const auto& seg = ps.groups[positive ? 0 : 1][0];
    const float want = float(std::max(0.0, eval_doc(seg.first, seg.second, rank, L)));
    REQUIRE(out[order[j]] == (positive ? want : -want));
    REQUIRE(std::fabs(out[order[j]] - v[order[j]]) <= 1e-6f * std::fabs(v[order[j]]) + 1e-7f);
  }
}

TEST_CASE("curvefit stores its RMSE and reports it as a stage figure", "[curvefit]") {
  Tensor t = make_tensor("w", {20000}, gaussian(20000, 5));
  const auto v = values_of(t);
  for (const std::string basis : {"poly", "dexp", "logit"}) {
    const std::string text = "topk(ratio=0.05) | curvefit(basis=" + basis + ", degree=3, segments=2)";
    INFO(text);
    PipelineStages stages(Pipeline::parse(text));
    PipelineStages::TensorState es, ds;
    StageContext ctx;
    ctx.info = &t.info;
    auto enc = stages.encode(t, ctx, es);
    const Parsed ps = parse(enc.streams.get(kValueStream).size() ? std::vector<uint8_t>(enc.streams.get(kValueStream).begin(), enc.streams.get(kValueStream).end()) : std::vector<uint8_t>{});
    const auto out = values_of(stages.decode(t.info, enc.streams, true, ctx, ds));
    // RMSE recomputed here over the kept (top-5%) positions.
    const auto kept = nonzero_positions(out);
    REQUIRE(kept.size() == 1000);
    double sse = 0;
    for (uint64_t x : kept) sse += (double(out[x]) - v[x]) * (double(out[x]) - v[x]);
    const double rmse = std::sqrt(sse / 1000.0);
    CHECK(ps.rmse == Approx(rmse).epsilon(1e-9));
    REQUIRE(enc.stats.size() == 1);
    CHECK(enc.stats[0].name == "curvefit.rmse");
    CHECK(enc.stats[0].value() == Approx(rmse).epsilon(1e-9));
    // Signs are never wrong: the groups are fitted apart.
    for (uint64_t x : kept) CHECK((out[x] < 0) == (v[x] < 0));
    // A useful fit: well below the spread of the kept magnitudes around their mean.
    double mean = 0, var = 0;
    for (uint64_t x : kept) mean += std::fabs(v[x]) / 1000.0;
    for (uint64_t x : kept) var += (std::fabs(v[x]) - mean) * (std::fabs(v[x]) - mean) / 1000.0;
    CHECK(rmse < 0.5 * std::sqrt(var));
  }
}

TEST_CASE("curvefit forces a value-order index, and its size is what the record (and bench) counts", "[curvefit]") {
  const uint64_t d = 50000;
  Tensor t = make_tensor("w", {d}, gaussian(d, 8));
  const auto v = values_of(t);
  RoundTrip rt = roundtrip("topk(ratio=0.02) | curvefit", t);  // varint is implied and keeps order
  const auto out = values_of(rt.decoded);
  const auto kept = nonzero_positions(out);
  REQUIRE(kept.size() == 1000);
  const auto order = value_order(v, kept);
  const auto idx = rt.streams.get(kIndexStream);
  CHECK(idx.size() * 8 == stages::varint_bits(order, true));
  // Honest cost: the value-order positions take more than the sorted, delta-coded ones would.
  CHECK(stages::varint_bits(order, true) > stages::varint_bits(kept, false) + 8 * 500);
  // The stream holds exactly the value-order positions.
  std::vector<uint8_t> want;
  auto put = [&](uint64_t x) {
    while (x >= 0x80) want.push_back(uint8_t(x | 0x80)), x >>= 7;
    want.push_back(uint8_t(x));
  };
  put(order.size());
  want.push_back(1);  // varint's value-order flag
  for (uint64_t x : order) put(x);
  CHECK(std::vector<uint8_t>(idx.begin(), idx.end()) == want);

  // bench adds up the record's stream sizes: through the CLI, bits_index of deepreduce-fit is the
  // index streams of the container `encode` writes, every byte counted.
  const std::string input = std::string(GRADCODEC_SOURCE_DIR) + "/test_data/snapshots/step_000.npz";
  const std::string gcz = temp_path("fit.gcz"), ben = temp_path("bench.json"), ins = temp_path("inspect.json");
  const std::string exe = GRADCODEC_EXE;
  REQUIRE(std::system((exe + " encode " + input + " -o " + gcz + " --preset deepreduce-fit --force --quiet").c_str()) == 0);
  REQUIRE(std::system((exe + " bench " + input + " --preset deepreduce-fit --json " + ben +
                       " --min-time 0 --repeat 1 --quiet > /dev/null").c_str()) == 0);
  REQUIRE(std::system((exe + " inspect " + gcz + " --json > " + ins).c_str()) == 0);
  ContainerReader r = ContainerReader::open(gcz);
  uint64_t index_bytes = 0, params = 0;
  for (size_t i = 0; i < r.record_count(0); ++i) {
    RecordMeta m = r.record(0, i);
    params += m.info.elements();
    for (const auto& s : m.streams)
      if (s.name == kIndexStream) index_bytes += s.size;
  }
  REQUIRE(index_bytes > 0);
  auto bj = nlohmann::json::parse(std::ifstream(ben));
  const auto& row = bj["rows"][0];
  CHECK(row["bits_index"].get<double>() == Approx(8.0 * double(index_bytes) / double(params)).epsilon(1e-12));
  CHECK(row["stage_stats"]["curvefit.rmse"]["value"].get<double>() > 0);
  auto ij = nlohmann::json::parse(std::ifstream(ins));
  CHECK(ij["totals"]["stage_stats"]["curvefit.rmse"]["value"].get<double>() ==
        Approx(row["stage_stats"]["curvefit.rmse"]["value"].get<double>()).epsilon(1e-12));
  for (const auto& p : {gcz, ben, ins}) std::filesystem::remove(p);
}

TEST_CASE("curvefit needs coded positions and an index coder that keeps value order (parse time)", "[curvefit]") {
  CHECK(threw(ErrorCode::Usage, [] { Pipeline::parse("curvefit"); }));
  CHECK(threw(ErrorCode::Usage, [] { Pipeline::parse("randk(ratio=0.1) | curvefit"); }));
  CHECK(threw(ErrorCode::Usage, [] { Pipeline::parse("topk(ratio=0.1) | curvefit | golomb"); }));
  try {
    Pipeline::parse("topk(ratio=0.1) | curvefit | rle");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("plain, varint") != std::string::npos);
  }
  CHECK_NOTHROW(Pipeline::parse("topk(ratio=0.1) | curvefit | plain"));
  CHECK_NOTHROW(Pipeline::parse("randk(ratio=0.1, shared_seed=false) | curvefit"));
  const Pipeline fit = Pipeline::preset("deepreduce-fit");
  CHECK(fit.stages().size() == 3);
  CHECK(fit.stages()[1].name == "curvefit");
  CHECK(fit.stages()[1].params.text("basis") == "poly");
  CHECK(fit.stages()[2].name == "varint");
}

TEST_CASE("curvefit falls back instead of failing on short or singular fits, and never decodes NaN", "[curvefit]") {
  // Fewer values than coefficients: the degree drops, and a few points are interpolated exactly.
  for (uint64_t n : {1ull, 2ull, 3ull, 5ull, 10ull, 13ull}) {
    for (const std::string basis : {"poly", "dexp", "logit"}) {
      std::vector<float> v;
      for (uint64_t i = 0; i < n; ++i) v.push_back(float(1.0 + 0.25 * double(i)) * (i % 3 == 2 ? -1.0f : 1.0f));
      Tensor t = make_tensor("w", {n}, v);
      const std::string text = "topk(ratio=1) | curvefit(basis=" + basis + ", degree=7, segments=64)";
      INFO(text << " n = " << n);
      RoundTrip rt = roundtrip(text, t);
      const auto out = values_of(rt.decoded);
      for (uint64_t i = 0; i < n; ++i) REQUIRE(std::isfinite(out[i]));
      const Parsed ps = parse(std::vector<uint8_t>(rt.streams.get(kValueStream).begin(), rt.streams.get(kValueStream).end()));
      for (const auto& g : ps.groups) CHECK(g.size() <= std::max<size_t>(1, n / 4));
      uint64_t npos = 0;
      for (float x : v) npos += x >= 0;
      if (basis != "dexp" && npos <= 8 && n - npos <= 8)  // ≤ degree + 1 points per group: exact
        for (uint64_t i = 0; i < n; ++i) CHECK(out[i] == Approx(v[i]).epsilon(1e-5));
    }
  }
  // Equal values (a rank-deficient design for nothing but the constant), zeros, and extremes.
  const std::vector<std::vector<float>> cases = {
      std::vector<float>(100, 0.5f), std::vector<float>(50, -2.0f), std::vector<float>(40, 0.0f),
      {1e-30f, 1e30f, -1e30f, 3e38f, -3e38f, 1e-38f, 7.0f, -7.0f, 1e20f, 1e-20f},
      {std::numeric_limits<float>::quiet_NaN(), 1.0f, -1.0f, std::numeric_limits<float>::infinity(), 2.0f, 0.5f}};
  for (const auto& v : cases) {
    for (const std::string basis : {"poly", "dexp", "logit"}) {
      Tensor t = make_tensor("w", {v.size()}, v);
      if (!std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); })) {
        // topk screens an f32 tensor's NaN/Inf before curvefit sees them (the codec then refuses
        // it); an f64 tensor's reach curvefit at this level, which must still decode finite.
        std::vector<uint8_t> bytes(v.size() * 8);
        from_f32(v.data(), v.size(), DType::F64, bytes.data());
        t.info.dtype = DType::F64;
        t.data = Buffer(std::move(bytes));
      }
      RoundTrip rt = roundtrip("topk(ratio=1) | curvefit(basis=" + basis + ", degree=5, segments=3)", t);
      for (float x : values_of(rt.decoded)) REQUIRE(std::isfinite(x));
    }
  }
  for (float x : values_of(roundtrip("topk(ratio=1) | curvefit", make_tensor("w", {100}, std::vector<float>(100, 0.5f))).decoded))
    CHECK(x == Approx(0.5f).epsilon(1e-6));
}

TEST_CASE("curvefit's double exponential: Levenberg-Marquardt recovers a true curve and stays finite", "[curvefit]") {
  const uint64_t L = 2000;
  std::vector<double> t(L), y(L);
  for (uint64_t i = 0; i < L; ++i) {
    t[i] = double(i) / double(L - 1);
    y[i] = 3.0 * std::exp(-8.0 * t[i]) + 0.5 * std::exp(-1.0 * t[i]);
  }
  double w[4];
  REQUIRE(cf::fit_dexp(t, y, w));
  double sse = 0;
  for (uint64_t i = 0; i < L; ++i) {
    const double f = w[0] * std::exp(w[1] * t[i]) + w[2] * std::exp(w[3] * t[i]);
    sse += (f - y[i]) * (f - y[i]);
  }
  CHECK(std::sqrt(sse / double(L)) < 1e-4 * 3.5);
  // Hostile data: alternating, huge dynamic range, all zero — always a finite answer.
  for (int c = 0; c < 3; ++c) {
    for (uint64_t i = 0; i < L; ++i)
      y[i] = c == 0 ? (i % 2 ? 1e6 : 0.0) : c == 1 ? std::pow(10.0, 30.0 - 60.0 * t[i]) : 0.0;
    std::sort(y.rbegin(), y.rend());
    double v[4];
    REQUIRE(cf::fit_dexp(t, y, v));
    for (double x : v) CHECK(std::isfinite(x));
    std::vector<float> out(L);
    cf::evaluate_group({cf::Segment{cf::Basis::Dexp, {v[0], v[1], v[2], v[3]}}}, L, out.data());
    for (float x : out) REQUIRE(std::isfinite(x));
  }
}

TEST_CASE("curvefit: more poly segments never fit worse (real gradients), every basis decodes finite", "[curvefit]") {
  auto r = formats::open_snapshot(std::string(GRADCODEC_SOURCE_DIR) + "/test_data/snapshots/step_000.npz");
  for (const std::string basis : {"poly", "logit"}) {
    double sse1 = 0, sse4 = 0;
    for (size_t i = 0; i < r->arrays().size(); ++i) {
      Tensor t = r->read(i);
      if (t.elements() < 2000) continue;
      for (int segs : {1, 4}) {
        RoundTrip rt = roundtrip("topk(ratio=0.05) | curvefit(basis=" + basis + ", degree=4, segments=" +
                                     std::to_string(segs) + ")", t);
        const Parsed ps = parse(std::vector<uint8_t>(rt.streams.get(kValueStream).begin(), rt.streams.get(kValueStream).end()));
        (segs == 1 ? sse1 : sse4) += ps.rmse * ps.rmse * double(ps.count);
        for (float x : values_of(rt.decoded)) REQUIRE(std::isfinite(x));
      }
    }
    INFO(basis << ": sse with 1 segment " << sse1 << ", with 4 " << sse4);
    REQUIRE(sse1 > 0);
    // poly: the restriction of the 1-segment fit is a candidate for each piece (an affine change
    // of the coordinate keeps the degree), so piecewise least squares cannot be worse. (logit's
    // coordinate is not affine in the rank: no such guarantee, only finiteness is checked.)
    if (basis == "poly") CHECK(sse4 <= sse1 * (1 + 1e-9));
  }
}

TEST_CASE("curvefit refuses corrupt value streams and is deterministic", "[curvefit]") {
  Tensor t = make_tensor("w", {4000}, gaussian(4000, 3));
  RoundTrip a = roundtrip("topk(ratio=0.05) | curvefit(segments=2)", t);
  RoundTrip b = roundtrip("topk(ratio=0.05) | curvefit(segments=2)", t);
  CHECK(a.streams.get(kValueStream).size() == b.streams.get(kValueStream).size());
  CHECK(std::equal(a.streams.get(kValueStream).begin(), a.streams.get(kValueStream).end(),
                   b.streams.get(kValueStream).begin()));
  CHECK(values_of(a.decoded) == values_of(b.decoded));

  PipelineStages stages(Pipeline::parse("topk(ratio=0.05) | curvefit(segments=2)"));
  const std::vector<uint8_t> good(a.streams.get(kValueStream).begin(), a.streams.get(kValueStream).end());
  auto decode_with = [&](const std::vector<uint8_t>& vbytes) {
    Streams s = a.streams;
    s.find(kValueStream)->bytes = vbytes;
    PipelineStages::TensorState st;
    StageContext ctx;
    ctx.info = &t.info;
    return stages.decode(t.info, s, true, ctx, st);
  };
  CHECK_NOTHROW(decode_with(good));
  const Parsed ps = parse(good);
  // Header: count (2 bytes: 200), npos (1–2 bytes), rmse; then the positives' S.
  const size_t head = 2 + (ps.npos < 128 ? 1 : 2) + 8;
  auto corrupt = [&](std::vector<uint8_t> s) { return threw(ErrorCode::Corrupt, [&] { decode_with(s); }); };
  for (size_t n = 0; n < good.size(); n += 7) CHECK(corrupt(std::vector<uint8_t>(good.begin(), good.begin() + n)));
  auto extra = good;
  extra.push_back(0);
  CHECK(corrupt(extra));
  auto count = good;
  count[0] ^= 1;  // count no longer matches the index
  CHECK(corrupt(count));
  auto nan = good;
  std::memset(nan.data() + head - 8, 0xff, 8);  // the RMSE is NaN
  CHECK(corrupt(nan));
  auto segs = good;
  segs[head] = 0;  // zero segments
  CHECK(corrupt(segs));
  auto basis = good;
  basis[head + 1] = 3;  // unknown basis
  CHECK(corrupt(basis));
  auto ncoef = good;
  ncoef[head + 2] = 17;  // too many coefficients
  CHECK(corrupt(ncoef));
  auto coef = good;
  std::memset(coef.data() + head + 3, 0xff, 8);  // a NaN coefficient
  CHECK(corrupt(coef));
  // Random damage: decoded (finite) or refused as corrupt.
  Rng rng(9);
  for (int trial = 0; trial < 300; ++trial) {
    auto s = good;
    s[rng.below(s.size())] ^= static_cast<uint8_t>(1 + rng.below(255));
    try {
      for (float x : values_of(decode_with(s))) REQUIRE(!std::isnan(x));
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Corrupt);
    }
  }
}

TEST_CASE("curvefit on block payloads: block mean magnitudes in position order, one sign bit per value",
          "[curvefit]") {
  // bird keeps whole blocks whose values are all +-S: the block means are all S, a constant fit is
  // exact, and curvefit decodes what the sign codec does.
  Tensor conv = make_tensor("layer.weight", {16, 8, 3, 3}, gaussian(16 * 8 * 9, 31));
  const auto via_sign = values_of(roundtrip("bird | sign", conv, 4).decoded);
  const auto via_fit = values_of(roundtrip("bird | curvefit(degree=0)", conv, 4).decoded);
  REQUIRE(via_sign.size() == via_fit.size());
  uint64_t nonzero = 0;
  for (size_t i = 0; i < via_sign.size(); ++i) {
    CHECK(via_fit[i] == Approx(via_sign[i]).epsilon(1e-6));
    nonzero += via_sign[i] != 0;
  }
  CHECK(nonzero > 0);
  // Block randk (a partial last block): every element gets its own sign and its block's fitted
  // mean magnitude; the value stream is the documented layout with npos = count.
  const uint64_t n = 1003;
  Tensor t = make_tensor("w", {n}, gaussian(n, 32));
  const auto v = values_of(t);
  RoundTrip rt = roundtrip("randk(ratio=0.2, block=4, shared_seed=false) | curvefit(degree=2, segments=2)", t, 6);
  const auto out = values_of(rt.decoded);
  const Parsed ps = parse(std::vector<uint8_t>(rt.streams.get(kValueStream).begin(), rt.streams.get(kValueStream).end()));
  CHECK(ps.npos == ps.count);
  CHECK(ps.count % 4 == 0);
  CHECK(rt.streams.get(kSideStream).size() == (ps.count + 7) / 8);
  uint64_t kept = 0;
  for (uint64_t i = 0; i < n; ++i) {
    if (out[i] == 0) continue;
    ++kept;
    CHECK((out[i] < 0) == (v[i] < 0));
  }
  CHECK(kept > 150);
  CHECK(ps.rmse > 0);
  CHECK(std::isfinite(ps.rmse));
}
