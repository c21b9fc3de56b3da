// SPDX-License-Identifier: BSD-3-Clause
// accordion: on synthetic sequences whose gradient norm drops (or rises) by more than eta, the
// tensor switches to `mild` for the next interval and back to `aggressive` afterwards, per tensor
// and per interval (interval = 1 and 2); the choice is recorded per tensor per frame as the
// record's pipeline variant, so the decoder decodes with the named stage and gets exactly what
// the encoder's mirror decoder got (frame N alone too); eq. 2 itself; the refusals of
// alternatives that are not one shared reducer; the presets expand as published.
#include <catch2/catch.hpp>

#include "lowrank/accordion.hpp"
#include "sequence_support.hpp"

#include <cmath>

using namespace gradcodec;
using namespace gradcodec::test;

namespace {

const std::string kPowerSgd = R"x(accordion(mild="powersgd(rank=2)", aggressive="powersgd(rank=1)", eta=0.5))x";

// A tensor whose frame f is scale(f) · (pattern + 5% noise): its norm follows scale(f).
Tensor scaled(const std::string& name, uint64_t seed, size_t f, float scale) {
  auto base = gaussian(32 * 24, seed);
  auto noise = gaussian(32 * 24, seed * 1000 + f, 0.05f);
  for (size_t i = 0; i < base.size(); ++i) base[i] = scale * (base[i] + noise[i]);
  return make_tensor(name, {32, 24}, base);
}

// The stage text each record of tensor i names, frame by frame.
std::vector<std::string> choices(const ContainerReader& r, size_t i) {
  std::vector<std::string> out;
  for (size_t f = 0; f < r.frame_count(); ++f) {
    RecordMeta m = r.record(f, i);
    REQUIRE(m.storage == Storage::Pipeline);
    REQUIRE(m.variant >= 1);  // never the header's pipeline (which holds accordion itself)
    const std::string text = Pipeline::from_json(r.variants()[m.variant]).text();
    CHECK(text.find("accordion") == std::string::npos);
    out.push_back(text.find("rank=2") != std::string::npos ? "mild" : "aggressive");
  }
  return out;
}

using V = std::vector<std::string>;
const std::string M = "mild", A = "aggressive";

}  // namespace

TEST_CASE("accordion_critical is eq. 2 with a zero old norm critical", "[accordion]") {
  using stages::accordion_critical;
  CHECK(accordion_critical(10, 2, 0.5));       // dropped by 80%
  CHECK(accordion_critical(10, 5, 0.5));       // exactly eta
  CHECK_FALSE(accordion_critical(10, 6, 0.5)); // 40%
  CHECK(accordion_critical(2, 10, 0.5));       // |old − new| / old: a rise counts too
  CHECK(accordion_critical(0, 1, 0.5));
  CHECK_FALSE(accordion_critical(1, 1, 0.5));  // no change
  CHECK(accordion_critical(1, 1, 0.0));        // eta = 0: always mild
}

TEST_CASE("accordion switches to mild after a norm drop and back afterwards, per tensor", "[accordion]") {
  // Tensor 0: norm 10 until frame 5, then 2 (a drop of 80% > eta), rising again at frame 9.
  // Tensor 1: constant norm.
  const size_t frames = 12;
  auto scale0 = [](size_t f) { return f < 5 ? 1.0f : f < 9 ? 0.2f : 1.0f; };
  std::vector<std::vector<Tensor>> seq(frames);
  for (size_t f = 0; f < frames; ++f) seq[f] = {scaled("a.weight", 3, f, scale0(f)), scaled("b.weight", 4, f, 1.0f)};
  auto enc = encode_sequence(kPowerSgd, seq);
  ContainerReader r(InputFile::from_bytes(enc.bytes, "acc.gcz"));
  // Interval j uses mild when |‖Δ_{j−2}‖ − ‖Δ_{j−1}‖| / ‖Δ_{j−2}‖ ≥ 0.5; intervals 0 and 1 are mild.
  // Frame 5 is the first at norm 2: frame 6 compares frames 4 and 5 → mild; frame 7 compares 5
  // and 6 (both 2) → aggressive; frame 10 compares 8 (2) and 9 (10) → mild; then aggressive.
  CHECK(choices(r, 0) == V{M, M, A, A, A, A, M, A, A, A, M, A});
  CHECK(choices(r, 1) == V{M, M, A, A, A, A, A, A, A, A, A, A});

  // The decoder needs nothing else: it decodes every record with the stage the record names and
  // gets what the encoder's mirror got (the in-memory round trip of tensor 0: tensor index 0 and
  // seed 3 as in the container, so the same initial Q), also frame by frame alone.
  const auto decoded = decode_all(r);
  std::vector<Tensor> first;
  for (size_t f = 0; f < frames; ++f) first.push_back(seq[f][0]);
  const auto mem = sequence_roundtrip(kPowerSgd, first, 3);
  for (size_t i = 0; i < 2; ++i) {
    for (size_t f = 0; f < frames; ++f) {
      INFO("tensor " << i << " frame " << f);
      if (i == 0) CHECK(decoded[f][i] == values_of(mem[f]));
      SequenceDecoder alone(r);
      CHECK(values_of(alone.decode(f, i)) == decoded[f][i]);
    }
  }
  // Rank 2 frames cost twice the rank 1 frames (the choice is real).
  for (size_t f = 0; f < frames; ++f) {
    const uint64_t v = stream_bytes(enc.outcomes[f][0], {"value"});
    CHECK(v == 4 * (32 + 24) * (choices(r, 0)[f] == M ? 2u : 1u));
  }
}

TEST_CASE("accordion accumulates over intervals of several frames", "[accordion]") {
  const size_t frames = 12;
  std::vector<std::vector<Tensor>> seq(frames);
  for (size_t f = 0; f < frames; ++f) seq[f] = {scaled("w", 7, f, f < 6 ? 1.0f : 0.2f)};
  auto enc = encode_sequence(
      R"x(accordion(mild="powersgd(rank=2)", aggressive="powersgd(rank=1)", eta=0.5, interval=2))x", seq);
  ContainerReader r(InputFile::from_bytes(enc.bytes, "acc.gcz"));
  // Intervals {0,1} {2,3}: mild; {4,5}: Δ0 vs Δ1, aggressive; {6,7}: Δ1 vs Δ2, aggressive;
  // {8,9}: Δ2 (norm ≈ 20) vs Δ3 (≈ 4), mild; {10,11}: Δ3 vs Δ4, aggressive.
  CHECK(choices(r, 0) == V{M, M, M, M, A, A, A, A, M, M, A, A});
}

TEST_CASE("accordion over top-k with error feedback; keyframes; threads", "[accordion]") {
  const std::string text = Pipeline::preset("accordion-topk").text();
  CHECK(text.find("varint") != std::string::npos);  // typed by the stage it wraps: a sparsifier
  std::vector<std::vector<Tensor>> seq(8);
  for (size_t f = 0; f < 8; ++f)
    seq[f] = {scaled("w", 9, f, f < 4 ? 1.0f : 0.1f), make_tensor("bias", {24}, gaussian(24, f))};
  for (uint32_t interval : {0u, 3u}) {
    auto one = encode_sequence(text, seq, interval, 1, 1);
    CHECK(encode_sequence(text, seq, interval, 1, 2).bytes == one.bytes);
    ContainerReader r(InputFile::from_bytes(one.bytes, "acc.gcz"));
    const auto decoded = decode_all(r);
    int coded = 0;
    for (size_t f = 0; f < 8; ++f) {
      RecordMeta m = r.record(f, 0);
      if (m.storage == Storage::Pipeline) {  // top-99% frames are larger than the tensor: stored raw
        const std::string stage = Pipeline::from_json(r.variants()[m.variant]).text();
        CHECK(stage.rfind("ef | topk(ratio=0.1) | raw | varint", 0) == 0);
        ++coded;
      }
      SequenceDecoder alone(r);
      CHECK(values_of(alone.decode(f, 0)) == decoded[f][0]);
      CHECK(values_of(alone.decode(f, 1)) == decoded[f][1]);
    }
    CHECK(coded >= 2);
  }
}

TEST_CASE("accordion: a record that names the header pipeline (accordion itself) is corrupt", "[accordion]") {
  const Tensor t = scaled("w", 5, 0, 1.0f);
  PipelineStages stages(Pipeline::parse(kPowerSgd));
  PipelineStages::TensorState enc_state, dec_state;
  StageContext ctx;
  ctx.info = &t.info;
  auto enc = stages.encode(t, ctx, enc_state);
  REQUIRE(enc.variant == 0);  // frame 0: mild
  CHECK(stages.variant(0).pipeline().text() == "powersgd(rank=2) | raw");
  CHECK(stages.variant(1).pipeline().text() == "powersgd | raw");
  try {
    stages.decode(t.info, enc.streams, true, ctx, dec_state);
    FAIL("decoded");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Corrupt);
    CHECK(std::string(e.what()).find("accordion: the record does not name the stage it applied") != std::string::npos);
  }
  CHECK(values_of(stages.variant(0).decode(t.info, enc.streams, true, ctx, dec_state)).size() == t.elements());
}

TEST_CASE("accordion refuses alternatives that are not one shared reducer", "[accordion]") {
  auto refused = [](const std::string& text) {
    try {
      Pipeline::parse(text);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Usage);
      return std::string(e.what());
    }
    FAIL("accepted: " << text);
    return std::string();
  };
  CHECK(refused(R"x(accordion(mild="powersgd(rank=2)", aggressive="topk(ratio=0.1)"))x").find("the same stage") !=
        std::string::npos);
  CHECK(refused(R"x(accordion(mild="topk(ratio=0.5) | fp16", aggressive="topk(ratio=0.1)"))x")
            .find("one sparsifier or low-rank stage") != std::string::npos);
  refused(R"x(accordion(mild="fp16", aggressive="fp16"))x");
  refused(R"x(accordion(mild="powersgd(rank=2)"))x");  // aggressive is required
  refused(R"x(accordion(mild="powersgd(rank=2)", aggressive="powersgd(rank=1)") | golomb)x");  // low-rank: no index
  CHECK_NOTHROW(Pipeline::parse(R"x(accordion(mild="topk(ratio=0.5)", aggressive="topk(ratio=0.1)") | golomb)x"));
  CHECK(Pipeline::preset("accordion-powersgd").text() ==
        Pipeline::parse(R"x(accordion(mild="powersgd(rank=2)", aggressive="powersgd(rank=1)", eta=0.5))x").text());
}
