// SPDX-License-Identifier: BSD-3-Clause
// tcs: the published bit budget measured from real encoded streams at ResNet-18's d (0.363 bits
// per parameter with fp32 values, 0.067 with 5-bit fractional values, each frame after the
// first); the decoder rebuilds the global mask from its own previous output, so a decoded
// sequence equals, frame by frame and bit for bit, an independent dense reference of TCS
// (Algorithm 2 with error accumulation, snapshot-wide masks, LF/PLF) — and frame N decoded alone
// (from the last keyframe) equals it too; LF and PLF give every tensor its minimum share;
// keyframes code top-(K_global + K_local) with every position; corrupt index streams are refused.
#include <catch2/catch.hpp>

#include "index/gaps.hpp"
#include "index/tcspos.hpp"
#include "sequence_support.hpp"
#include "sparsify/tcs.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

using namespace gradcodec;
using namespace gradcodec::test;
using gradcodec::stages::tcs_counts;
using gradcodec::stages::TcsCounts;

namespace {

uint64_t count_of(double phi, uint64_t d) {
  return std::clamp<uint64_t>(static_cast<uint64_t>(std::llround(phi * static_cast<double>(d))), 1, d);
}
uint64_t min_of(double phi, uint64_t d) {
  return std::min<uint64_t>(d, static_cast<uint64_t>(std::ceil(phi * static_cast<double>(d))));
}

// A frame of a ResNet-18-shaped snapshot: a fixed pattern plus frame noise, so successive frames
// are correlated as successive updates are. `skewed` = false: the same distribution in every
// tensor — the paper's accounting, where every block of every layer holds its φ share of the
// positions; true: scaled by 1/sqrt(fan-in) (1-D tensors small), so the top positions crowd into
// a few layers.
std::vector<Tensor> resnet_frame(size_t f, bool skewed) {
  std::vector<Tensor> out;
  const auto shapes = resnet18_cifar_shapes();
  for (size_t l = 0; l < shapes.size(); ++l) {
    const auto& [name, shape] = shapes[l];
    const uint64_t n = shape_elements(shape);
    float scale = 1.0f;
    if (skewed) scale = shape.size() > 1 ? 1.0f / std::sqrt(static_cast<float>(n / shape[0])) : 0.01f;
    Rng base(1000 + l), noise(50000 + 131 * f + l);
    std::vector<float> v(n);
    for (auto& x : v) x = scale * ((base.uniform_f() - 0.5f) + 0.5f * (noise.uniform_f() - 0.5f));
    out.push_back(make_tensor(name, shape, v));
  }
  return out;
}

// The index streams of every record of frame f.
std::vector<TcsCounts> counts_of_frame(const ContainerReader& r, size_t f) {
  std::vector<TcsCounts> out;
  for (size_t i = 0; i < r.record_count(f); ++i) {
    RecordMeta m = r.record(f, i);
    REQUIRE(m.storage == Storage::Pipeline);
    Streams s = r.streams(m);
    out.push_back(tcs_counts(s.get(kIndexStream)));
  }
  return out;
}

// ---- an independent dense reference of TCS (sorting is fine here) ----

struct Item {
  double mag;
  size_t tensor;
  uint64_t pos;
};
// Snapshot-wide top-K over magnitudes (-1: excluded; a NaN is -0.5: selectable, below every
// number, as the codec ranks it) with per-tensor minimum shares: each
// tensor keeps its own top-min first, the rest of K goes by magnitude, ties to the lower tensor,
// then the lower position. Returns per tensor the chosen positions, ascending.
std::vector<std::vector<uint64_t>> ref_select(const std::vector<std::vector<double>>& mag, uint64_t K,
                                              const std::vector<uint64_t>& mins) {
  auto before = [](const Item& a, const Item& b) {
    if (a.mag != b.mag) return a.mag > b.mag;
    if (a.tensor != b.tensor) return a.tensor < b.tensor;
    return a.pos < b.pos;
  };
  std::vector<std::vector<uint64_t>> out(mag.size());
  std::vector<Item> pool;
  uint64_t reserved = 0;
  for (size_t t = 0; t < mag.size(); ++t) {
    std::vector<Item> own;
    for (uint64_t i = 0; i < mag[t].size(); ++i)
      if (mag[t][i] > -1) own.push_back({mag[t][i], t, i});
    std::sort(own.begin(), own.end(), before);
    const size_t keep = std::min<size_t>(mins[t], own.size());
    for (size_t j = 0; j < own.size(); ++j) (j < keep ? out[t].push_back(own[j].pos) : pool.push_back(own[j]));
    reserved += keep;
  }
  std::sort(pool.begin(), pool.end(), before);
  const uint64_t rest = K > reserved ? std::min<uint64_t>(K - reserved, pool.size()) : 0;
  for (uint64_t j = 0; j < rest; ++j) out[pool[j].tensor].push_back(pool[j].pos);
  for (auto& v : out) std::sort(v.begin(), v.end());
  return out;
}

struct RefTcs {
  double global = 0.01, local = 0.001, min_g = 1e-3, min_l = 4e-4;
  std::string fairness = "none";
  std::vector<std::vector<float>> prev, e;

  static double magnitude(float v) { return std::isnan(v) ? -0.5 : std::fabs(double(v)); }

  // One frame: returns the decoded output of every tensor. Tensor `raw` (if any) is stored raw
  // by the codec (it holds a NaN): it takes part in the selection, but decodes as itself and
  // leaves its error memory as it was.
  std::vector<std::vector<float>> frame(const std::vector<Tensor>& ts, bool keyframe, size_t raw = SIZE_MAX) {
    const size_t T = ts.size();
    uint64_t d = 0;
    for (const auto& t : ts) d += t.elements();
    if (e.empty()) {
      e.resize(T);
      prev.resize(T);
      for (size_t t = 0; t < T; ++t) e[t].assign(ts[t].elements(), 0.0f), prev[t].assign(ts[t].elements(), 0.0f);
    }
    std::vector<std::vector<float>> gbar(T);
    std::vector<std::vector<double>> mag(T);
    for (size_t t = 0; t < T; ++t) {
      gbar[t] = values_of(ts[t]);
      for (size_t i = 0; i < gbar[t].size(); ++i) gbar[t][i] += e[t][i];
    }
    std::vector<uint64_t> mins(T);
    std::vector<std::vector<uint64_t>> chosen(T);
    const bool lf = fairness == "lf", plf = fairness == "plf";
    if (keyframe) {
      for (size_t t = 0; t < T; ++t) {
        const uint64_t n = gbar[t].size();
        mins[t] = (lf || plf ? min_of(min_g, n) : 0) + (lf ? min_of(min_l, n) : 0);
        mag[t].assign(n, 0);
        for (size_t i = 0; i < n; ++i) mag[t][i] = magnitude(gbar[t][i]);
      }
      chosen = ref_select(mag, count_of(global, d) + count_of(local, d), mins);
    } else {
      for (size_t t = 0; t < T; ++t) {
        const uint64_t n = gbar[t].size();
        mins[t] = lf || plf ? min_of(min_g, n) : 0;
        mag[t].assign(n, 0);
        for (size_t i = 0; i < n; ++i) mag[t][i] = std::fabs(prev[t][i]);
      }
      const auto gm = ref_select(mag, count_of(global, d), mins);
      for (size_t t = 0; t < T; ++t) {
        const uint64_t n = gbar[t].size();
        mins[t] = lf ? min_of(min_l, n) : 0;
        for (size_t i = 0; i < n; ++i) mag[t][i] = magnitude(gbar[t][i]);
        for (uint64_t x : gm[t]) mag[t][x] = -1;  // not in the local mask
      }
      const auto lm = ref_select(mag, count_of(local, d), mins);
      for (size_t t = 0; t < T; ++t) {
        chosen[t] = gm[t];
        chosen[t].insert(chosen[t].end(), lm[t].begin(), lm[t].end());
      }
    }
    std::vector<std::vector<float>> out(T);
    for (size_t t = 0; t < T; ++t) {
      if (t == raw) {
        out[t] = values_of(ts[t]);
        prev[t] = out[t];
        for (float& x : prev[t]) x = std::isnan(x) ? 0.0f : x;  // a NaN counts as zero
        continue;
      }
      out[t].assign(gbar[t].size(), 0.0f);
      for (uint64_t x : chosen[t]) out[t][x] = gbar[t][x];
      for (size_t i = 0; i < out[t].size(); ++i) e[t][i] = gbar[t][i] - out[t][i];
      prev[t] = out[t];
    }
    return out;
  }
};

// A small snapshot with very different scales per tensor (so plain TCS starves some tensors and
// fairness has something to do), correlated over frames.
std::vector<std::vector<Tensor>> small_sequence(size_t frames) {
  const std::vector<std::pair<std::vector<uint64_t>, float>> layout = {
      {{40, 30}, 1.0f}, {{64, 16, 3, 3}, 0.05f}, {{500}, 0.002f}, {{16, 8, 3, 3}, 30.0f}, {{2000}, 0.3f}};
  std::vector<std::vector<Tensor>> out(frames);
  for (size_t l = 0; l < layout.size(); ++l) {
    const uint64_t n = shape_elements(layout[l].first);
    auto base = gaussian(n, 300 + l, layout[l].second);
    for (size_t f = 0; f < frames; ++f) {
      auto noise = gaussian(n, 900 + 17 * f + l, 0.4f * layout[l].second);
      std::vector<float> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = base[i] + noise[i];
      std::string name = "t";
      name += std::to_string(l);
      out[f].push_back(make_tensor(name, layout[l].first, v));
    }
  }
  return out;
}

}  // namespace

TEST_CASE("tcs reproduces the published bit budget at ResNet-18's d", "[tcs]") {
  const auto shapes = resnet18_cifar_shapes();
  uint64_t d = 0;
  for (const auto& s : shapes) d += shape_elements(s.second);
  REQUIRE(shapes.size() == 62);
  REQUIRE(d == 11173962);
  const uint64_t Kg = count_of(0.01, d), Kl = count_of(0.001, d);
  struct Case {
    const char* preset;
    double published, tolerance;
    bool fp32;
  };
  const std::vector<std::vector<Tensor>> frames = {resnet_frame(0, false), resnet_frame(1, false)};
  for (const Case c : {Case{"tcs", 0.363, 0.01, true}, Case{"tcs-q5", 0.067, 0.02, false}}) {
    INFO(c.preset);
    auto seq = encode_sequence(Pipeline::preset(c.preset).text(), frames);
    ContainerReader r(InputFile::from_bytes(seq.bytes, "tcs.gcz"));
    // Frame 1 (not a keyframe): index + value streams of every record, in bits per parameter.
    const auto& o1 = seq.outcomes[1];
    uint64_t iv = 0, scale = 0, index = 0;
    for (const auto& o : o1) {
      iv += stream_bytes(o, {"index", "value", "raw"});
      index += stream_bytes(o, {"index"});
      scale += stream_bytes(o, {"scale", "side"});
    }
    const double bits = 8.0 * double(iv) / double(d);
    WARN(c.preset << ": frame 1 index+value " << bits << " bits/param (published " << c.published << "); index "
                  << 8.0 * double(index) / double(d) << ", value " << 8.0 * double(iv - index) / double(d)
                  << ", scale/side " << 8.0 * double(scale) / double(d));
    CHECK(std::fabs(bits - c.published) <= c.tolerance * c.published);

    // The counts are the snapshot's K exactly, and the index stream is its size formula.
    const auto k1 = counts_of_frame(r, 1);
    uint64_t sum_g = 0, sum_l = 0, formula = 0;
    for (size_t i = 0; i < k1.size(); ++i) {
      const uint64_t n = shape_elements(shapes[i].second);
      sum_g += k1[i].global;
      sum_l += k1[i].local;
      formula += stages::idx::leb128_size(k1[i].global) + (stages::tcspos_bits(n, k1[i].local) + 7) / 8;
    }
    CHECK(sum_g == Kg);
    CHECK(sum_l == Kl);
    CHECK(index == formula);
    if (c.fp32) {
      uint64_t value = 0;
      for (const auto& o : o1) value += stream_bytes(o, {"value"});
      CHECK(value == 4 * (Kg + Kl));
    }
    // Frame 0 is a keyframe: top-(Kg + Kl) with every position coded, no global mask — what
    // top-k with the same position code costs (the 0.41-like frame).
    const auto k0 = counts_of_frame(r, 0);
    uint64_t sum0 = 0, index0 = 0, formula0 = 0;
    for (size_t i = 0; i < k0.size(); ++i) {
      CHECK(k0[i].global == 0);
      sum0 += k0[i].local;
      formula0 += 1 + (stages::tcspos_bits(shape_elements(shapes[i].second), k0[i].local) + 7) / 8;
      index0 += stream_bytes(seq.outcomes[0][i], {"index"});
    }
    CHECK(sum0 == Kg + Kl);
    CHECK(index0 == formula0);
    uint64_t iv0 = 0;
    for (const auto& o : seq.outcomes[0]) iv0 += stream_bytes(o, {"index", "value", "raw"});
    WARN(c.preset << ": frame 0 (keyframe) index+value " << 8.0 * double(iv0) / double(d) << " bits/param");
  }
}

// Hidden (run with "[.tcs-skewed]"; numbers for docs/stages.d/22-tcs.md): when the top positions
// crowd into a few layers, the position code costs less than the uniform accounting — each
// tensor's k·(log2(d_l/k) + 1) + d_l/B is concave in k, so spreading K evenly is the worst case.
TEST_CASE("tcs: layer-skewed gradients cost no more than the published budget", "[.tcs-skewed]") {
  uint64_t d = 0;
  for (const auto& s : resnet18_cifar_shapes()) d += shape_elements(s.second);
  for (const char* preset : {"tcs", "tcs-q5"}) {
    auto seq = encode_sequence(Pipeline::preset(preset).text(), 2, [](size_t f) { return resnet_frame(f, true); });
    uint64_t iv = 0, index = 0;
    for (const auto& o : seq.outcomes[1]) {
      iv += stream_bytes(o, {"index", "value", "raw"});
      index += stream_bytes(o, {"index"});
    }
    const double bits = 8.0 * double(iv) / double(d);
    WARN(preset << " (skewed layers): frame 1 index+value " << bits << " bits/param, index "
                << 8.0 * double(index) / double(d));
    CHECK(bits <= (std::string(preset) == "tcs" ? 0.363 : 0.067) * 1.01);
  }
}

TEST_CASE("tcs: the decoder rebuilds the global mask from its own output, frame by frame", "[tcs]") {
  const auto frames = small_sequence(7);
  for (const char* fairness : {"none", "lf", "plf"}) {
    for (uint32_t interval : {0u, 3u}) {
      INFO("fairness " << fairness << ", keyframe interval " << interval);
      const std::string text = std::string("tcs(global=0.02, local=0.004, fairness=") + fairness + ")";
      auto seq = encode_sequence(text, frames, interval);
      ContainerReader r(InputFile::from_bytes(seq.bytes, "tcs.gcz"));
      const auto decoded = decode_all(r);
      RefTcs ref;
      ref.global = 0.02, ref.local = 0.004, ref.fairness = fairness;
      for (size_t f = 0; f < frames.size(); ++f) {
        INFO("frame " << f);
        const bool key = f == 0 || (interval && f % interval == 0);
        REQUIRE(r.frame(f).keyframe == key);
        const auto expect = ref.frame(frames[f], key);
        for (size_t i = 0; i < frames[f].size(); ++i) {
          INFO("tensor " << i);
          REQUIRE(r.record(f, i).storage == Storage::Pipeline);
          CHECK(decoded[f][i] == expect[i]);  // bit for bit (fp32 values)
        }
      }
      // Frame N alone, by a fresh decoder: it replays that tensor from the last keyframe.
      for (size_t f = 0; f < frames.size(); ++f) {
        SequenceDecoder dec(r);
        const size_t last_key = interval ? f - f % interval : 0;
        for (size_t i = 0; i < frames[f].size(); ++i) {
          CHECK(values_of(dec.decode(f, i)) == decoded[f][i]);
          CHECK(dec.frames_read() == f - last_key + 1);
        }
      }
    }
  }
}

TEST_CASE("tcs: the same bytes for any thread count", "[tcs]") {
  const auto frames = small_sequence(4);
  const std::string text = "tcs(global=0.02, local=0.004, fairness=lf) | fractional(P=8)";
  const auto one = encode_sequence(text, frames, 0, 5, 1).bytes;
  CHECK(encode_sequence(text, frames, 0, 5, 3).bytes == one);
  // Quantized values: the decoder still follows the encoder's masks (sequential = frame alone).
  ContainerReader r(InputFile::from_bytes(one, "tcs.gcz"));
  const auto decoded = decode_all(r);
  for (size_t f = 0; f < frames.size(); ++f) {
    SequenceDecoder dec(r);
    for (size_t i = 0; i < frames[f].size(); ++i) CHECK(values_of(dec.decode(f, i)) == decoded[f][i]);
  }
}

TEST_CASE("tcs and powersgd: a tensor stored raw for its NaN leaves the error memory as it was", "[tcs][powersgd]") {
  auto frames = small_sequence(5);
  const size_t t = 3;  // the tensor with the largest values: it gets positions every frame
  auto bad = values_of(frames[2][t]);
  bad[7] = std::numeric_limits<float>::quiet_NaN();
  frames[2][t] = make_tensor(frames[2][t].name(), frames[2][t].info.shape, bad);
  auto nan_ok = [](const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
    return true;
  };
  {
    const std::string text = "tcs(global=0.02, local=0.004)";
    auto seq = encode_sequence(text, frames.size(), [&](size_t f) { return frames[f]; }, 0, 3, 1, NonFinite::Raw);
    ContainerReader r(InputFile::from_bytes(seq.bytes, "nan.gcz"));
    REQUIRE(r.record(2, t).storage == Storage::Raw);
    const auto decoded = decode_all(r);
    RefTcs ref;
    ref.global = 0.02, ref.local = 0.004;
    for (size_t f = 0; f < frames.size(); ++f) {
      const auto expect = ref.frame(frames[f], f == 0, f == 2 ? t : SIZE_MAX);
      if (f > 2) CHECK(std::count(expect[t].begin(), expect[t].end(), 0.0f) < long(expect[t].size()));
      for (size_t i = 0; i < frames[f].size(); ++i) CHECK(nan_ok(decoded[f][i], expect[i]));
    }
  }
  {
    // PowerSGD: skipping the raw frame leaves e and the warm-start Q as they were, so frame 3
    // decodes as frame 2 of the sequence without the NaN frame.
    std::vector<Tensor> with, without;
    for (size_t f = 0; f < frames.size(); ++f) {
      with.push_back(frames[f][t]);
      if (f != 2) without.push_back(frames[f][t]);
    }
    auto a = encode_sequence("powersgd(rank=2)", with.size(), [&](size_t f) { return std::vector<Tensor>{with[f]}; },
                             0, 3, 1, NonFinite::Raw);
    auto b = encode_sequence("powersgd(rank=2)", without);
    ContainerReader ra(InputFile::from_bytes(a.bytes, "a.gcz")), rb(InputFile::from_bytes(b.bytes, "b.gcz"));
    REQUIRE(ra.record(2, 0).storage == Storage::Raw);
    const auto da = decode_all(ra), db = decode_all(rb);
    CHECK(da[3][0] == db[2][0]);
    CHECK(da[4][0] == db[3][0]);
  }
}

TEST_CASE("tcs: lf and plf give every tensor at least its minimum share", "[tcs]") {
  const auto frames = small_sequence(4);
  const double mg = 0.004, ml = 0.002;  // larger than the paper's so that they bind here
  for (const char* fairness : {"none", "lf", "plf"}) {
    INFO(fairness);
    const std::string text = std::string("tcs(global=0.02, local=0.004, fairness=") + fairness +
                             ", min_global=0.004, min_local=0.002)";
    auto seq = encode_sequence(text, frames);
    ContainerReader r(InputFile::from_bytes(seq.bytes, "tcs.gcz"));
    uint64_t d = 0;
    for (const auto& t : frames[0]) d += t.elements();
    bool starved_g = false, starved_l = false;
    for (size_t f = 1; f < frames.size(); ++f) {
      const auto k = counts_of_frame(r, f);
      uint64_t sum_g = 0, sum_l = 0;
      for (size_t i = 0; i < k.size(); ++i) {
        const uint64_t n = frames[f][i].elements();
        INFO("frame " << f << " tensor " << i << ": global " << k[i].global << ", local " << k[i].local);
        sum_g += k[i].global;
        sum_l += k[i].local;
        const bool g_ok = k[i].global >= min_of(mg, n), l_ok = k[i].local >= min_of(ml, n);
        starved_g = starved_g || !g_ok;
        starved_l = starved_l || !l_ok;
        if (std::string(fairness) != "none") CHECK(g_ok);
        if (std::string(fairness) == "lf") CHECK(l_ok);
      }
      CHECK(sum_g == count_of(0.02, d));  // the totals stay K_global and K_local
      CHECK(sum_l == count_of(0.004, d));
    }
    // Without fairness some tensor gets less than the minimum (the check above can fail), and
    // plf leaves the local mask unconstrained.
    if (std::string(fairness) == "none") CHECK((starved_g && starved_l));
    if (std::string(fairness) == "plf") CHECK(starved_l);
  }
}

TEST_CASE("tcs on a lone tensor uses its own counts; refuses corrupt index streams", "[tcs]") {
  Tensor t = make_tensor("w", {50, 40}, gaussian(2000, 8));
  RoundTrip rt = roundtrip("tcs(global=0.01, local=0.005)", t, 1);
  TcsCounts c = tcs_counts(rt.streams.get(kIndexStream));
  CHECK(c.global == 0);  // frame 0: a keyframe
  CHECK(c.local == 20 + 10);
  auto out = values_of(rt.decoded), in = values_of(t);
  size_t kept = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (out[i] == 0) continue;
    CHECK(out[i] == in[i]);
    ++kept;
  }
  CHECK(kept == 30);

  PipelineStages stages(Pipeline::parse("tcs(global=0.01, local=0.005)"));
  auto decode = [&](std::vector<uint8_t> index) {
    Streams s = rt.streams;
    s.find(kIndexStream)->bytes = std::move(index);
    PipelineStages::TensorState st;
    StageContext ctx;
    ctx.info = &t.info;
    ctx.keyframe = true;
    return stages.decode(t.info, s, true, ctx, st);
  };
  auto code = [&](const std::vector<uint8_t>& index) {
    try {
      decode(index);
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::Mismatch;  // stands for "accepted"
  };
  const auto good = rt.streams.get(kIndexStream);
  std::vector<uint8_t> idx(good.begin(), good.end());
  CHECK(code(idx) == ErrorCode::Mismatch);
  // k_g larger than the tensor.
  std::vector<uint8_t> big = {0xd1, 0x0f};  // LEB128 2001
  big.insert(big.end(), idx.begin() + 1, idx.end());
  CHECK(code(big) == ErrorCode::Corrupt);
  // A global mask of 2000 positions (the whole tensor, from a zero previous output) overlaps
  // every coded position.
  std::vector<uint8_t> all = {0xd0, 0x0f};  // LEB128 2000
  all.insert(all.end(), idx.begin() + 1, idx.end());
  CHECK(code(all) == ErrorCode::Corrupt);
  // Truncated.
  CHECK(code(std::vector<uint8_t>(idx.begin(), idx.begin() + 2)) == ErrorCode::Corrupt);
  CHECK(code({}) == ErrorCode::Corrupt);
}
