// SPDX-License-Identifier: BSD-3-Clause
// Generated over the registry: every quantizer composes with every sparsifier and index coder
// (and every low-rank stage) registered — "SPARSIFIER | QUANTIZER | INDEXCODER" round-trips to a
// finite tensor that is zero outside the sparsifier's kept positions. Stages not registered yet
// are simply absent from the table; chains the grammar refuses (an index coder after an implicit
// index, say) are skipped and counted. Also: every quantizer of this project's quantize/ folder
// refuses a stream one byte short, one byte long, or missing, with Error(Corrupt, "<stage>: ...").
#include <catch2/catch.hpp>

#include "stages/quantize_support.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

using namespace gradcodec;
using namespace gradcodec::test;

namespace {

// The stage's own segment of its canonical example ("topk(ratio=0.01)"), so stages with required
// parameters get working values; the bare name when the example does not show it.
std::string stage_text(const StageEntry& e) {
  const std::string text = Pipeline::parse(e.example).text();
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(" | ", start);
    if (end == std::string::npos) end = text.size();
    const std::string seg = text.substr(start, end - start);
    if (seg.substr(0, seg.find('(')) == e.name) return seg;
    start = end + 3;
  }
  return e.name;
}

std::vector<std::string> texts_of(StageKind k) {
  std::vector<std::string> out;
  for (const auto& e : stage_table())
    if (e.kind == k) out.push_back(stage_text(e));
  return out;
}

bool refused(const std::string& text) {
  try {
    Pipeline::parse(text);
    return false;
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Usage) throw;
    return true;
  }
}

}  // namespace

TEST_CASE("every quantizer composes with every sparsifier and index coder", "[quantize][registry]") {
  const std::vector<Tensor> tensors = {make_tensor("layer.weight", {16, 8, 3, 3}, gaussian(16 * 8 * 9, 91)),
                                       make_tensor("fc.weight", {40, 25}, gaussian(1000, 92, 0.01f))};
  const auto quantizers = texts_of(StageKind::Quantizer);
  auto coders = texts_of(StageKind::IndexCoder);
  coders.insert(coders.begin(), "");  // the implied coder (varint), or none for implicit indices
  int runs = 0, skipped = 0;
  for (const auto& sp : texts_of(StageKind::Sparsifier)) {
    for (const auto& t : tensors) {
      const std::vector<float> kept = values_of(roundtrip(sp + " | raw", t, 5).decoded);
      for (const auto& ic : coders) {
        const std::string tail = ic.empty() ? "" : " | " + ic;
        if (refused(sp + " | raw" + tail)) {
          ++skipped;
          continue;
        }
        // A lossy index coder (bloom's false positives) may put values elsewhere: then only
        // finiteness is checked.
        const bool exact_positions = values_of(roundtrip(sp + " | raw" + tail, t, 5).decoded) == kept;
        for (const auto& q : quantizers) {
          const std::string text = sp + " | " + q + tail;
          INFO(text << " on " << shape_string(t.shape()));
          if (refused(text)) {
            ++skipped;
            continue;
          }
          RoundTrip r = roundtrip(text, t, 5);
          REQUIRE(r.decoded.info.shape == t.info.shape);
          const auto out = values_of(r.decoded);
          for (size_t i = 0; i < out.size(); ++i) {
            REQUIRE(std::isfinite(out[i]));
            if (exact_positions && kept[i] == 0) REQUIRE(out[i] == 0);
          }
          ++runs;
        }
      }
    }
  }
  for (const auto& lr : texts_of(StageKind::LowRank)) {
    for (const auto& q : quantizers) {
      for (const auto& t : tensors) {
        const std::string text = lr + " | " + q;
        INFO(text);
        if (refused(text)) continue;
        RoundTrip r = roundtrip(text, t, 5);
        for (float x : values_of(r.decoded)) REQUIRE(std::isfinite(x));
        ++runs;
      }
    }
  }
  WARN("quantizer compositions run: " << runs << ", refused by the grammar: " << skipped);
  CHECK(runs >= 0);
}

TEST_CASE("quantizer decoders refuse streams of the wrong size or missing", "[quantize][registry]") {
  const std::vector<std::string> texts = {"qsgd(levels=7, bucket=64)", "qsgd(levels=7, coding=elias)", "terngrad",
                                          "sign", "sign(scale=none)", "onebit", "onebit(per=tensor)", "ssdm",
                                          "sbc", "intN(bits=5)", "fractional(P=6)"};
  std::vector<float> v = gaussian(15 * 11, 3);
  v[7] = 0.0f;  // fractional's side stream exists only with zeros
  Tensor dense = make_tensor("w", {15, 11}, v);
  SparseInput sparse;
  sparse.n = 1000;
  for (uint64_t i = 0; i < v.size(); ++i) sparse.index.push_back(6 * i + 1);
  sparse.values = v;
  for (const auto& text : texts) {
    const std::string name = text.substr(0, text.find('('));
    for (bool is_sparse : {false, true}) {
      auto q = make_quantizer(text);
      TensorInfo info = is_sparse ? TensorInfo{"s", DType::F32, "", false, {sparse.n}} : dense.info;
      Payload p;
      p.info = &info;
      p.n = info.elements();
      if (is_sparse) {
        p.sparse = true, p.universe = sparse.n, p.index = sparse.index, p.values = sparse.values;
      } else {
        p.source = &dense;
      }
      Streams s;
      q->encode(p, s, quant_ctx(info, 1));
      auto decode = [&](const Streams& in) {
        return decode_with(*q, in, info, is_sparse, p.index, 1, false, 1);
      };
      REQUIRE(decode(s).size() == p.value_count());
      auto corrupt = [&](const Streams& in, const std::string& what) {
        INFO(text << (is_sparse ? " sparse: " : " dense: ") << what);
        try {
          decode(in);
          FAIL("accepted");
        } catch (const Error& e) {
          CHECK(e.code() == ErrorCode::Corrupt);
          CHECK(std::string(e.what()).rfind(name + ":", 0) == 0);
        }
      };
      for (const auto& st : s.all()) {
        Streams longer = s;
        longer.find(st.name)->bytes.push_back(0);
        corrupt(longer, st.name + " one byte long");
        if (!st.bytes.empty()) {
          Streams shorter = s;
          shorter.find(st.name)->bytes.pop_back();
          corrupt(shorter, st.name + " one byte short");
        }
        if (name == "fractional" && st.name == "side") continue;  // optional: absent = no zeros
        Streams missing;
        for (const auto& other : s.all())
          if (other.name != st.name) missing.add(other.name) = other;
        corrupt(missing, st.name + " missing");
      }
    }
  }
}

TEST_CASE("quantizer presets expand as published and run", "[quantize][registry]") {
  const std::vector<std::pair<std::string, std::string>> presets = {
      {"qsgd8", "qsgd(levels=127, bucket=512)"}, {"qsgd4", "qsgd(levels=7, bucket=512)"},
      {"qsgd2", "qsgd(levels=1, bucket=512)"},   {"terngrad", "terngrad(clip=2.5)"},
      {"signsgd", "sign(scale=none)"},           {"ssdm", "ssdm"},
      {"ef-signsgd", "ef | sign(scale=l1)"},     {"onebit", "ef | onebit"},
      {"sbc", "topk(ratio=0.01, by_sign=true) | sbc | golomb"}};
  std::vector<Tensor> frames;
  for (uint64_t f = 0; f < 3; ++f) frames.push_back(make_tensor("fc.weight", {64, 50}, gaussian(3200, 40 + f)));
  for (const auto& [name, text] : presets) {
    INFO(name);
    REQUIRE(find_preset(name));
    CHECK(Pipeline::preset(name).text() == Pipeline::parse(text).text());
    for (const Tensor& out : sequence_roundtrip(Pipeline::preset(name).text(), frames))
      for (float x : values_of(out)) REQUIRE(std::isfinite(x));
  }
}

TEST_CASE("quantizer decoders survive random bytes: a value count or Corrupt, never a crash", "[quantize][registry]") {
  const std::vector<std::string> texts = {"qsgd(levels=7, bucket=64)", "qsgd(levels=1000, coding=elias)", "terngrad",
                                          "sign", "onebit", "ssdm", "sbc", "intN(bits=7)", "fractional(P=6)"};
  Tensor dense = make_tensor("w", {12, 10}, gaussian(120, 8));
  Rng rng(2024);
  for (const auto& text : texts) {
    auto q = make_quantizer(text);
    Payload p;
    p.source = &dense, p.info = &dense.info, p.n = 120;
    Streams good;
    q->encode(p, good, quant_ctx(dense.info, 1));
    int decoded = 0;
    for (int trial = 0; trial < 500; ++trial) {
      // Each stream: its true size, or up to 3 bytes off either way; random contents.
      Streams s;
      for (const auto& st : good.all()) {
        const int64_t size = std::max<int64_t>(0, int64_t(st.bytes.size()) + (trial % 2 ? int64_t(rng.below(7)) - 3 : 0));
        auto& b = s.add(st.name).bytes;
        for (int64_t i = 0; i < size; ++i) b.push_back(static_cast<uint8_t>(rng.next_u64()));
      }
      try {
        auto v = decode_with(*q, s, dense.info, false, {}, 1, false, 1);
        REQUIRE(v.size() == 120);
        ++decoded;
      } catch (const Error& e) {
        REQUIRE(e.code() == ErrorCode::Corrupt);
      }
    }
    INFO(text);
    // Where every fixed-width code is valid, random bytes of the right sizes decode; Elias codes
    // and fractional's unused interval codes (6, 7 for P = 6) make random streams corrupt.
    if (text.find("elias") == std::string::npos && text.find("fractional") == std::string::npos) CHECK(decoded > 0);
  }
}

TEST_CASE("a quantizer that screens NaN/Inf counts them exactly as it codes an f32 tensor", "[quantize][registry]") {
  // A dense pipeline whose quantizer reads the f32 source first (sign, qsgd) counts its NaN/Inf
  // in the same pass (the codec then skips its own count): the exact number, no streams, for
  // non-finite values in the vectorised body and in the tail; 0 for a finite tensor, including
  // values near the f32 maximum (their squares would overflow an f32 sum, not a double one;
  // those a stage cannot represent are its overflow, not NaN/Inf: next test case).
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> clean = gaussian(1003, 41);
  std::vector<std::string> screening;
  for (const std::string& q : texts_of(StageKind::Quantizer)) {
    if (refused(q)) continue;
    PipelineStages stages(Pipeline::parse(q));
    if (!stages.screens_nonfinite()) continue;
    screening.push_back(q.substr(0, q.find('(')));
    INFO(q);
    auto encode = [&](const std::vector<float>& v) {
      Tensor t = make_tensor("w", {1003}, v);
      StageContext ctx;
      ctx.info = &t.info;
      PipelineStages::TensorState st;
      return stages.encode(t, ctx, st);
    };
    for (const std::vector<size_t>& at : {std::vector<size_t>{0}, {517, 518}, {1002}, {5, 600, 1001}}) {
      std::vector<float> v = clean;
      for (size_t k = 0; k < at.size(); ++k) v[at[k]] = k % 3 == 0 ? nan : (k % 3 == 1 ? inf : -inf);
      CAPTURE(at);
      const auto enc = encode(v);
      CHECK(enc.nonfinite == at.size());
      CHECK(enc.streams.all().empty());
    }
    CHECK(encode(clean).nonfinite == 0);
    std::vector<float> big = clean;
    for (auto& x : big) x = x < 0 ? -3e38f : 3e38f;
    const auto enc = encode(big);
    CHECK(enc.nonfinite == 0);
    CHECK(enc.streams.all().empty() == !enc.overflow.empty());
    // An f64 source whose value is beyond the f32 range (Inf once converted): the codec counts
    // the f64 values (none is non-finite) and the quantizer codes it as it always did.
    {
      std::vector<double> d(clean.begin(), clean.end());
      d[10] = 1e39;
      Tensor t = make_tensor("w", {1003}, clean);
      t.info.dtype = DType::F64;
      std::vector<uint8_t> bytes(d.size() * 8);
      std::memcpy(bytes.data(), d.data(), bytes.size());
      t.data = Buffer(std::move(bytes));
      StageContext ctx;
      ctx.info = &t.info;
      PipelineStages::TensorState st;
      const auto e64 = stages.encode(t, ctx, st);
      CHECK(e64.nonfinite == 0);
      CHECK_FALSE(e64.streams.all().empty());
    }
    // Behind a transform (its output is not the source) the codec counts instead.
    CHECK_FALSE(PipelineStages(Pipeline::parse("ef | " + q)).screens_nonfinite());
  }
  std::sort(screening.begin(), screening.end());
  CHECK(screening == std::vector<std::string>{"bf16", "fp16", "qsgd", "sign"});
}

TEST_CASE("a quantizer given finite values it cannot represent stops with Payload::overflow", "[quantize][registry]") {
  // Finite values whose norm is beyond float32 (qsgd, ssdm) or which are beyond a half type's
  // range would decode as Inf/NaN: the stage names itself in Encoded::overflow and the pipeline
  // gives no streams (the codec then refuses the tensor or stores it raw). Every other quantizer
  // decodes the same inputs to finite values. Nothing overflows on ordinary values.
  const std::vector<float> clean = gaussian(1003, 43);
  std::vector<float> big = clean, spike = clean, edge = clean;
  for (auto& x : big) x = x < 0 ? -3e38f : 3e38f;
  spike[5] = 2e38f, spike[700] = -2e38f;  // two values: an L2 norm of 2.8e38 fits float32
  for (auto& x : edge) x = x < 0 ? -3e37f : 3e37f;
  std::vector<std::string> overflowed;
  for (const std::string& q : texts_of(StageKind::Quantizer)) {
    if (refused(q)) continue;
    const std::string name = q.substr(0, q.find('('));
    PipelineStages stages(Pipeline::parse(q));
    const std::vector<float>* inputs[] = {&clean, &big, &spike, &edge};
    for (const std::vector<float>* v : inputs) {
      INFO(q << " on input " << (v == &clean ? "clean" : v == &big ? "big" : v == &spike ? "spike" : "edge"));
      Tensor t = make_tensor("w", {1003}, *v);
      StageContext ctx;
      ctx.info = &t.info;
      PipelineStages::TensorState st, dst;
      auto enc = stages.encode(t, ctx, st);
      CHECK(enc.nonfinite == 0);
      if (!enc.overflow.empty()) {
        CHECK(enc.overflow.rfind(name + ": ", 0) == 0);
        CHECK(enc.streams.all().empty());
        if (v == &big) overflowed.push_back(name);
        CHECK(v != &clean);
        CHECK((v != &spike || name == "fp16"));  // two values near 2e38: only fp16 cannot hold them
        continue;
      }
      const Tensor out = stages.decode(t.info, std::move(enc.streams), true, ctx, dst);
      for (float x : values_of(out)) REQUIRE(std::isfinite(x));
    }
  }
  std::sort(overflowed.begin(), overflowed.end());
  CHECK(overflowed == std::vector<std::string>{"fp16", "qsgd", "ssdm"});
}

TEST_CASE("fp16 and bf16 count the finite values that would round to Inf", "[quantize]") {
  // float16: 65519.99 rounds down to 65504, 65520 (half-way, to even) up to Inf. bfloat16: its
  // largest finite value is 0x7f7f (3.3895e38); FLT_MAX rounds to Inf. NaN/Inf in the input are
  // counted as such (Encoded::nonfinite), not as overflow.
  auto encode = [](const std::string& q, const std::vector<float>& v) {
    PipelineStages stages(Pipeline::parse(q));
    Tensor t = make_tensor("w", {v.size()}, v);
    StageContext ctx;
    ctx.info = &t.info;
    PipelineStages::TensorState st;
    return stages.encode(t, ctx, st);
  };
  std::vector<float> v = gaussian(40, 5);
  v[3] = 65504.0f, v[9] = 65519.99f, v[17] = -65519.99f;
  CHECK(encode("fp16", v).overflow.empty());
  v[20] = 65520.0f, v[33] = -1e10f, v[39] = FLT_MAX;  // the last in the loop's tail
  auto e = encode("fp16", v);
  CHECK(e.overflow == "fp16: 3 value(s) would round to ±Inf, beyond float16's range (largest finite 65504)");
  CHECK(e.streams.all().empty());
  CHECK(e.nonfinite == 0);
  v[1] = std::numeric_limits<float>::infinity();
  e = encode("fp16", v);
  CHECK(e.nonfinite == 1);  // the codec refuses (or stores raw) the tensor for its Inf first
  std::vector<float> w = gaussian(40, 6);
  w[7] = 3.3895e38f, w[8] = -1e38f;
  CHECK(encode("bf16", w).overflow.empty());
  w[30] = -FLT_MAX;
  CHECK(encode("bf16", w).overflow ==
        "bf16: 1 value(s) would round to ±Inf, beyond bfloat16's range (largest finite 3.39e38)");
}
