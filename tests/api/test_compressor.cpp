// SPDX-License-Identifier: BSD-3-Clause
// The public API's Compressor (gradcodec.hpp, docs/api.md "Compressor"): calling roundtrip() for
// every tensor of frames F0..Fk in order returns, bit for bit, what a Decoder returns for the
// container an Encoder writes of those frames (same pipeline and seed, keyframe_interval 0), and
// last_bytes() is that record's size; a pipeline whose reducer plans whole frames makes each
// call a frame of its own and matches a container of the name alone; names are independent;
// misuse and non-finite values are refused with the documented error codes.
#include <gradcodec/gradcodec.hpp>

#include "gradient_frames.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

using namespace gradcodec;

namespace {

using Frame = test::GradFrame;
using test::check_same;
using test::same_bytes;

std::vector<Frame> make_frames(size_t k, uint64_t seed = 1) { return test::make_grad_frames(k, seed); }


// A container of `frames` written by an Encoder (in memory), and each record's size.
struct Container {
  std::vector<uint8_t> bytes;
  std::vector<std::vector<uint64_t>> record_bytes;  // [frame][tensor]
};

Container encode(const std::vector<std::vector<TensorView>>& frames, const std::string& preset,
                 const std::string& pipeline, uint64_t seed, NonFinite nonfinite = NonFinite::Refuse) {
  Container c;
  VectorSink sink(c.bytes);
  EncoderOptions o;
  o.preset = preset;
  o.pipeline = pipeline;
  o.seed = seed;
  o.keyframe_interval = 0;
  o.nonfinite = nonfinite;
  o.format_minor = 0;  // a Compressor's record is a 1.0 record (docs/format.md): sizes compare with 1.0's
  Encoder e = Encoder::to_sink(sink, o);
  for (const auto& views : frames) {
    std::vector<uint64_t> sizes;
    for (const TensorSummary& s : e.add_frame(views)) sizes.push_back(s.record_bytes);
    c.record_bytes.push_back(sizes);
  }
  e.finish();
  return c;
}

// The bytes a view covers (TensorView::bytes is set only for DType::Other).
uint64_t view_size(const TensorView& v) {
  return v.dtype == DType::Other ? v.bytes : shape_elements(v.shape) * dtype_size(v.dtype);
}

bool same_bytes(const Tensor& a, const TensorView& v) {
  return a.data.size() == view_size(v) && std::memcmp(a.data.data(), v.data, a.data.size()) == 0;
}

// Every tensor of `frames` through a Compressor, frame by frame in tensor order; checks each
// against the Decoder of the Encoder's container (and last_bytes against its record's size).
void check_matches_container(const std::vector<std::vector<TensorView>>& frames, const std::string& preset,
                             const std::string& pipeline, uint64_t seed, NonFinite nonfinite = NonFinite::Refuse) {
  const Container c = encode(frames, preset, pipeline, seed, nonfinite);
  Decoder d = Decoder::from_bytes(c.bytes);
  REQUIRE(d.frame_count() == frames.size());
  CompressorOptions o;
  o.preset = preset;
  o.pipeline = pipeline;
  o.seed = seed;
  o.nonfinite = nonfinite;
  Compressor comp(o);
  CHECK(comp.pipeline_text() == d.pipeline_text());
  CHECK(comp.stateful() == d.stateful());
  CHECK_FALSE(comp.solo_frames());
  size_t piped = 0, changed = 0;  // frames whose weight record is smaller than it / decodes to other values
  for (size_t f = 0; f < frames.size(); ++f) {
    REQUIRE(d.tensors(f).size() == frames[f].size());
    for (size_t i = 0; i < frames[f].size(); ++i) {
      INFO("frame " << f << ", tensor " << i);
      const TensorView& v = frames[f][i];
      CHECK(comp.calls(v.name) == f);
      const Tensor got = comp.roundtrip(v.name, v);
      check_same(got, d.decode(f, i));
      CHECK(comp.last_bytes() == c.record_bytes[f][i]);
      CHECK(comp.calls(v.name) == f + 1);
      if (i == 0) {
        piped += comp.last_bytes() < view_size(v);
        changed += !same_bytes(got, v);
      }
    }
  }
  // The weight went through the pipeline (not only raw records), lossy unless lossless (the
  // lossless preset, or fpzip's lossless coder).
  CHECK(piped > 0);
  CHECK((changed > 0) == (preset != "lossless" && preset != "fpzip"));
}

std::vector<std::vector<TensorView>> views_of(const std::vector<Frame>& frames) {
  std::vector<std::vector<TensorView>> out;
  for (const auto& f : frames) out.push_back(f.views());
  return out;
}

}  // namespace

TEST_CASE("compressor: bit for bit the Decoder of an Encoder's container, every record's size", "[compressor]") {
  // Lossless; a cast; stochastic quantizers (their random choices depend on the frame and on the
  // tensor's index in it); top-k with and without error feedback; random-k (shared seed); DGC;
  // SBC; PowerSGD's warm start and error memory; Accordion's pipeline variants; zfp and fpzip.
  const std::string preset = GENERATE(as<std::string>{}, "lossless", "fp16", "qsgd4", "terngrad", "ssdm",
                                      "ef-signsgd", "topk-1pct", "randk-1pct", "dgc", "sbc", "powersgd-r1",
                                      "powersgd-r2", "accordion-powersgd", "accordion-topk", "zfp-rate4", "zfp-acc",
                                      "fpzip");
  INFO(preset);
  const auto frames = make_frames(4);
  check_matches_container(views_of(frames), preset, "", 7);
}

TEST_CASE("compressor: pipelines given as text, stateful and stochastic, match the container", "[compressor]") {
  const std::string pipeline =
      GENERATE(as<std::string>{}, "ef | topk(ratio=0.05) | raw | varint", "ef | qsgd(levels=3)",
               "delta | qsgd | zstd(level=3)", "ef | randk(ratio=0.1) | fp16", "terngrad | zstd(level=1)");
  INFO(pipeline);
  const auto frames = make_frames(3, 5);
  check_matches_container(views_of(frames), "", pipeline, 123);
}

TEST_CASE("compressor: the lossless preset returns the tensors themselves", "[compressor]") {
  const auto frames = make_frames(3);
  Compressor comp(CompressorOptions{});
  CHECK(comp.pipeline_text() == canonical_pipeline(EncoderOptions{}));
  CHECK_FALSE(comp.stateful());
  for (const auto& fr : frames)
    for (const TensorView& v : fr.views()) {
      const Tensor t = comp.roundtrip(v.name, v);
      CHECK(same_bytes(t, v));
      CHECK(comp.last_bytes() > 0);
    }
}

TEST_CASE("compressor: a pipeline that plans whole frames makes each call a frame of its own", "[compressor]") {
  // tcs (its masks), topk(scope=global) and bird's attached vectors make a record depend on the
  // other tensors of the frame: each name then matches a container of that name alone.
  const std::string pipeline = GENERATE(as<std::string>{}, "tcs | raw", "tcs | fractional",
                                        "topk(ratio=0.05, scope=global) | raw | varint",
                                        "ef | topk(ratio=0.05, scope=global) | raw | varint",
                                        "bird | sign | plain | lzma(stream=index)");
  INFO(pipeline);
  const auto frames = make_frames(4, 3);
  const auto all = views_of(frames);
  CompressorOptions o;
  o.pipeline = pipeline;
  o.seed = 9;
  Compressor comp(o);
  CHECK(comp.solo_frames());
  std::map<std::string, std::vector<Tensor>> got;
  std::map<std::string, std::vector<uint64_t>> sizes;
  for (const auto& fr : all)
    for (const TensorView& v : fr) {
      got[v.name].push_back(comp.roundtrip(v.name, v));
      sizes[v.name].push_back(comp.last_bytes());
    }
  for (size_t i = 0; i < all[0].size(); ++i) {
    const std::string name = all[0][i].name;
    INFO(name);
    std::vector<std::vector<TensorView>> alone;
    for (const auto& fr : all) alone.push_back({fr[i]});
    const Container c = encode(alone, "", pipeline, 9);
    Decoder d = Decoder::from_bytes(c.bytes);
    for (size_t f = 0; f < all.size(); ++f) {
      INFO("frame " << f);
      check_same(got[name][f], d.decode(f, 0));
      CHECK(sizes[name][f] == c.record_bytes[f][0]);
    }
  }
}

TEST_CASE("compressor: names are independent sequences", "[compressor]") {
  // A stateful and stochastic pipeline: each name's results depend on its own tensors, its
  // index (the order of first calls) and the seed, not on when or with what the others are called.
  const std::string pipeline = GENERATE(as<std::string>{}, "ef | qsgd(levels=3)", "powersgd(rank=2) | raw",
                                        "ef | topk(ratio=0.05) | raw | varint", "tcs | raw");
  INFO(pipeline);
  const auto frames = make_frames(4, 11);
  const auto other = make_frames(4, 12);  // different tensors under the same names
  CompressorOptions o;
  o.pipeline = pipeline;
  o.seed = 3;

  // Frame by frame.
  Compressor a(o);
  std::vector<std::vector<Tensor>> by_frame;
  for (const auto& fr : frames) {
    by_frame.emplace_back();
    for (const TensorView& v : fr.views()) by_frame.back().push_back(a.roundtrip(v.name, v));
  }
  // The same first calls, then each name's remaining frames one name after the other, the
  // last name first.
  Compressor b(o);
  std::vector<std::vector<Tensor>> by_name(frames.size(), std::vector<Tensor>(4));
  const auto all = views_of(frames);
  for (size_t i = 0; i < 4; ++i) by_name[0][i] = b.roundtrip(all[0][i].name, all[0][i]);
  for (size_t i = 4; i-- > 0;)
    for (size_t f = 1; f < frames.size(); ++f) by_name[f][i] = b.roundtrip(all[f][i].name, all[f][i]);
  for (size_t f = 0; f < frames.size(); ++f)
    for (size_t i = 0; i < 4; ++i) {
      INFO("frame " << f << ", tensor " << i);
      CHECK(same_bytes(by_name[f][i], by_frame[f][i]));
    }
  // layer.weight's results do not depend on the other names' tensors.
  Compressor c(o);
  for (size_t f = 0; f < frames.size(); ++f) {
    const auto mixed = other[f].views();
    const Tensor w = c.roundtrip("layer.weight", frames[f].views()[0]);
    for (size_t i = 1; i < 4; ++i) c.roundtrip(mixed[i].name, mixed[i]);
    INFO("frame " << f);
    CHECK(same_bytes(w, by_frame[f][0]));
  }
  CHECK(a.calls("layer.weight") == frames.size());
  CHECK(a.calls("nothing") == 0);
}

TEST_CASE("compressor: the seed reaches the random choices", "[compressor]") {
  const auto frames = make_frames(1);
  const TensorView v = frames[0].views()[0];
  CompressorOptions o;
  o.preset = "qsgd4";
  o.seed = 1;
  Compressor one(o), same(o);
  o.seed = 2;
  Compressor two(o);
  const Tensor a = one.roundtrip(v.name, v);
  CHECK(same_bytes(a, same.roundtrip(v.name, v)));
  CHECK_FALSE(same_bytes(a, two.roundtrip(v.name, v)));
}

TEST_CASE("compressor: a bad preset or pipeline is Error(Usage) when it is made", "[compressor]") {
  auto code_of = [](const CompressorOptions& o) {
    try {
      Compressor c(o);
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::Internal;  // (not thrown)
  };
  CompressorOptions o;
  o.pipeline = "topk(ratio=2) | raw";
  CHECK(code_of(o) == ErrorCode::Usage);
  o.pipeline = "nosuchstage";
  CHECK(code_of(o) == ErrorCode::Usage);
  o.pipeline = "";
  o.preset = "nosuchpreset";
  CHECK(code_of(o) == ErrorCode::Usage);
  o.preset = "topk-1pct";
  o.pipeline = "topk | raw | varint";
  CHECK(code_of(o) == ErrorCode::Usage);
  // A view without data.
  Compressor c(CompressorOptions{});
  const TensorView empty("x", {4}, static_cast<const float*>(nullptr));
  try {
    c.roundtrip("x", empty);
    FAIL("a view without data was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Usage);
  }
}

TEST_CASE("compressor: non-finite values are refused as by the Encoder, and the sequence goes on", "[compressor]") {
  const std::string pipeline = GENERATE(as<std::string>{}, "topk(ratio=0.05) | raw | varint",
                                        "ef | topk(ratio=0.05) | raw | varint", "powersgd | raw", "qsgd");
  INFO(pipeline);
  auto frames = make_frames(3, 21);
  std::vector<float> bad = frames[1].w;
  bad[17] = std::numeric_limits<float>::quiet_NaN();
  bad[18] = std::numeric_limits<float>::infinity();
  const TensorView bad_view("layer.weight", {64, 48}, bad.data());
  CompressorOptions o;
  o.pipeline = pipeline;

  // The Encoder refuses the frame: Error(Input).
  {
    std::vector<uint8_t> bytes;
    VectorSink sink(bytes);
    EncoderOptions eo;
    eo.pipeline = pipeline;
    Encoder e = Encoder::to_sink(sink, eo);
    e.add_frame(frames[0].views());
    auto views = frames[1].views();
    views[0] = bad_view;
    try {
      e.add_frame(views);
      FAIL("the Encoder accepted NaN");
    } catch (const Error& err) {
      CHECK(err.code() == ErrorCode::Input);
      CHECK_THAT(err.what(), Catch::EndsWith(kNonfiniteRawAdvice));
    }
    // A caller whose users spell the raw policy otherwise gives its own words (the CLI, Python).
    eo.nonfinite_advice = "say raw";
    std::vector<uint8_t> bytes2;
    VectorSink sink2(bytes2);
    Encoder e2 = Encoder::to_sink(sink2, eo);
    e2.add_frame(frames[0].views());
    try {
      e2.add_frame(views);
      FAIL("the Encoder accepted NaN");
    } catch (const Error& err) {
      CHECK_THAT(err.what(), Catch::EndsWith("; say raw"));
    }
  }
  // So does the Compressor, and the refused call changes nothing: the name's next calls give
  // what they give without it.
  Compressor with(o), without(o);
  for (const TensorView& v : frames[0].views()) with.roundtrip(v.name, v), without.roundtrip(v.name, v);
  try {
    with.roundtrip("layer.weight", bad_view);
    FAIL("the Compressor accepted NaN");
  } catch (const Error& err) {
    CHECK(err.code() == ErrorCode::Input);
    CHECK(std::string(err.what()).find("non-finite") != std::string::npos);
    // The refusal names this API's option, not the CLI's flag.
    CHECK_THAT(err.what(), Catch::EndsWith("nonfinite = NonFinite::Raw stores such tensors raw"));
    CHECK(std::string(err.what()).find("--nonfinite") == std::string::npos);
  }
  CHECK(with.calls("layer.weight") == 1);
  for (size_t f = 1; f < frames.size(); ++f)
    for (const TensorView& v : frames[f].views()) {
      INFO("frame " << f << " " << v.name);
      CHECK(same_bytes(with.roundtrip(v.name, v), without.roundtrip(v.name, v)));
    }
}

TEST_CASE("compressor: nonfinite=raw stores the tensor raw, as the Encoder does", "[compressor]") {
  const std::string pipeline = GENERATE(as<std::string>{}, "ef | topk(ratio=0.05) | raw | varint", "qsgd",
                                        "powersgd(rank=2) | raw");
  INFO(pipeline);
  auto frames = make_frames(3, 31);
  frames[1].w[5] = std::numeric_limits<float>::quiet_NaN();
  frames[2].h[7] = -std::numeric_limits<double>::infinity();
  check_matches_container(views_of(frames), "", pipeline, 5, NonFinite::Raw);
  // The raw record gives the tensor back as it is, NaN included.
  CompressorOptions o;
  o.pipeline = pipeline;
  o.nonfinite = NonFinite::Raw;
  Compressor comp(o);
  comp.roundtrip("layer.weight", frames[0].views()[0]);
  const Tensor t = comp.roundtrip("layer.weight", frames[1].views()[0]);
  CHECK(same_bytes(t, frames[1].views()[0]));
  CHECK(comp.last_bytes() > frames[1].w.size() * 4);
}

TEST_CASE("compressor: a tensor over the memory limit is Error(Input) and changes nothing", "[compressor]") {
  const auto frames = make_frames(1);
  CompressorOptions o;
  o.preset = "topk-1pct";
  o.memory_limit = 1000;
  Compressor comp(o);
  try {
    comp.roundtrip("layer.weight", frames[0].views()[0]);
    FAIL("accepted over the memory limit");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Input);
  }
  CHECK(comp.calls("layer.weight") == 0);
  CHECK(comp.last_bytes() == 0);
}

TEST_CASE("compressor: movable", "[compressor]") {
  const auto frames = make_frames(2);
  CompressorOptions o;
  o.preset = "powersgd-r2";
  Compressor a(o), ref(o);
  const TensorView v0 = frames[0].views()[0], v1 = frames[1].views()[0];
  CHECK(same_bytes(a.roundtrip(v0.name, v0), ref.roundtrip(v0.name, v0)));
  Compressor b(std::move(a));
  CHECK(b.calls(v0.name) == 1);
  Compressor c(CompressorOptions{});
  c = std::move(b);
  CHECK(same_bytes(c.roundtrip(v1.name, v1), ref.roundtrip(v1.name, v1)));
  CHECK(c.pipeline_text() == ref.pipeline_text());
}
