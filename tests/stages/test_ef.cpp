// SPDX-License-Identifier: BSD-3-Clause
// ef: over a sequence, Σ decoded + final memory = Σ inputs to float64 precision (every dtype,
// also when a record is stored raw); the memory is encoder-side per-tensor state that the
// decoder never needs; β and γ weigh memory and gradient as g ← β·m + γ·g.
#include <catch2/catch.hpp>

#include "sparsify/topk.hpp"
#include "support.hpp"
#include "transform/ef.hpp"

#include <gradcodec/container.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

using namespace gradcodec;
using namespace gradcodec::test;

namespace {

Tensor with_dtype(Tensor t, DType dt) {
  auto v = values_of(t);
  std::vector<uint8_t> b(v.size() * dtype_size(dt));
  from_f32(v.data(), v.size(), dt, b.data());
  t.info.dtype = dt;
  t.data = Buffer(std::move(b));
  return t;
}

struct Run {
  std::vector<std::vector<float>> decoded;        // decoder side, per frame
  std::vector<std::vector<float>> decoded_fresh;  // decoded with a fresh decoder state each frame
  std::vector<double> memory;                     // ef's memory after the last frame
};

// Encodes `frames` of one tensor as the codec does (mirror decode + after_encode, or observe_raw
// for the frames in `raw`), decoding every record on a separate decoder.
Run run(const std::string& pipeline, const std::vector<Tensor>& frames, const std::set<size_t>& raw = {}) {
  PipelineStages stages(Pipeline::parse(pipeline));
  PipelineStages::TensorState enc, dec;
  Run r;
  for (uint32_t f = 0; f < frames.size(); ++f) {
    const Tensor& t = frames[f];
    StageContext ctx;
    ctx.seed = 1;
    ctx.frame = f;
    ctx.keyframe = f == 0;
    ctx.info = &t.info;
    auto e = stages.encode(t, ctx, enc);
    if (raw.count(f)) {
      stages.observe_raw(t, ctx, enc, true);
      stages.observe_raw(t, ctx, dec, false);
      r.decoded.push_back(values_of(t));
      r.decoded_fresh.push_back(values_of(t));
      continue;
    }
    std::vector<float> recon;
    stages.decode(t.info, e.plain, false, ctx, enc, &recon);
    stages.after_encode(recon, ctx, enc);
    PipelineStages::TensorState fresh;
    r.decoded_fresh.push_back(values_of(stages.decode(t.info, e.streams, true, ctx, fresh)));
    r.decoded.push_back(values_of(stages.decode(t.info, std::move(e.streams), true, ctx, dec)));
  }
  r.memory = dynamic_cast<stages::EfMemory&>(*enc.enc.at(0)).m;
  return r;
}

std::vector<Tensor> frames_of(size_t n, size_t count, DType dt) {
  std::vector<Tensor> fr;
  for (size_t f = 0; f < count; ++f) fr.push_back(with_dtype(make_tensor("w", {n}, gaussian(n, 100 + f, 0.01f)), dt));
  return fr;
}

}  // namespace

TEST_CASE("ef: sum of decoded plus final memory equals sum of inputs (float64 tolerance)", "[ef]") {
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
    for (const std::set<size_t>& raw : {std::set<size_t>{}, std::set<size_t>{2}}) {
      INFO(dtype_name(dt) << (raw.empty() ? "" : ", frame 2 stored raw"));
      auto frames = frames_of(500, 6, dt);
      Run r = run("ef | topk(ratio=0.1)", frames, raw);
      REQUIRE(r.memory.size() == 500);
      double worst = 0;
      for (size_t i = 0; i < 500; ++i) {
        double in = 0, out = r.memory[i], scale = std::fabs(r.memory[i]);
        for (size_t f = 0; f < frames.size(); ++f) {
          double g = values_of(frames[f])[i];
          in += g, out += r.decoded[f][i], scale += std::fabs(g) + std::fabs(r.decoded[f][i]);
        }
        worst = std::max(worst, std::fabs(in - out) / scale);
      }
      CHECK(worst <= 1e-14);  // ~12 double roundings of values of that scale
      // The memory is what topk left out: not zero (else the test proves nothing).
      double mem = 0;
      for (double m : r.memory) mem += std::fabs(m);
      CHECK(mem > 0.1);
    }
  }
}

TEST_CASE("ef: the decoder needs none of the memory", "[ef]") {
  auto frames = frames_of(400, 6, DType::F32);
  Run r = run("ef | topk(ratio=0.05)", frames);
  for (size_t f = 0; f < frames.size(); ++f) CHECK(r.decoded_fresh[f] == r.decoded[f]);
  // And through a real container, decoding any frame alone gives the same tensor.
  const std::string path = (std::filesystem::temp_directory_path() / "gradcodec_ef_seq.gcz").string();
  {
    SequenceEncoder enc(Pipeline::parse("ef | topk(ratio=0.05)"), {});
    ContainerWriter w(path, true, enc.header("[]"));
    for (const auto& t : frames) {
      FrameSource src;
      src.count = 1;
      src.info = [&](size_t) { return t.info; };
      src.load = [&](size_t) { return t; };
      enc.encode_frame(src, w);
    }
    w.finish();
  }
  std::ifstream f(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), {});
  std::filesystem::remove(path);
  ContainerReader reader(InputFile::from_bytes(std::move(bytes), "ef.gcz"));
  for (size_t n = 0; n < frames.size(); ++n) {
    SequenceDecoder dec(reader);
    CHECK(values_of(dec.decode(n, 0)) == r.decoded[n]);
  }
}

TEST_CASE("ef(beta, gamma): the sparsifier sees beta*m + gamma*g", "[ef]") {
  auto frames = frames_of(50, 2, DType::F32);
  Run r = run("ef(beta=0.5, gamma=2) | topk(k=5)", frames);
  auto g0 = values_of(frames[0]), g1 = values_of(frames[1]);
  std::vector<double> m(50);
  for (size_t i = 0; i < 50; ++i) m[i] = 2.0 * g0[i] - r.decoded[0][i];
  std::vector<float> input(50);
  for (size_t i = 0; i < 50; ++i) input[i] = static_cast<float>(0.5 * m[i] + 2.0 * g1[i]);
  std::vector<float> expect(50, 0.0f);
  for (uint64_t i : stages::topk_select(input, 5)) expect[i] = input[i];
  CHECK(r.decoded[1] == expect);
  CHECK_THROWS_WITH(Pipeline::parse("ef(beta=-1) | topk(k=1)"), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(Pipeline::parse("ef(gamma=0) | topk(k=1)"), Catch::Contains("out of range"));
}

TEST_CASE("ef: beta*m + gamma*g beyond float32's range stops the pipeline", "[ef]") {
  // gamma = 2 doubles 2e38 to 4e38, not a float32: the stage names itself in Encoded::overflow
  // and there are no streams (the codec refuses the tensor or stores it raw); 1e38 codes.
  auto encode = [](float x) {
    Tensor t = make_tensor("w", {32}, std::vector<float>(32, x));
    PipelineStages stages(Pipeline::parse("ef(gamma=2) | sign"));
    StageContext ctx;
    ctx.info = &t.info;
    PipelineStages::TensorState st;
    return stages.encode(t, ctx, st);
  };
  const auto over = encode(-2e38f);
  CHECK(over.overflow == "ef: beta*m + gamma*g is beyond float32's range (3.4e38)");
  CHECK(over.streams.all().empty());
  const auto fine = encode(1e38f);
  CHECK(fine.overflow.empty());
  CHECK_FALSE(fine.streams.all().empty());
}
