// SPDX-License-Identifier: BSD-3-Clause
// delta: codes g_t − (decoded t−1); round-trips a sequence with errors that do not accumulate;
// frame N decodes correctly through a real container (replaying from the last keyframe);
// keyframes code the tensor itself; records stored raw keep the chain in step.
#include <catch2/catch.hpp>

#include "support.hpp"

#include <gradcodec/container.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

using namespace gradcodec;
using namespace gradcodec::test;

namespace {

// A slowly drifting gradient: g_t = base + 0.01·noise_t.
std::vector<Tensor> drifting(size_t n, size_t frames, const std::string& name = "w") {
  auto base = gaussian(n, 1);
  std::vector<Tensor> out;
  for (size_t f = 0; f < frames; ++f) {
    auto noise = gaussian(n, 50 + f, 0.01f);
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = base[i] + noise[i];
    out.push_back(make_tensor(name, {n}, v));
  }
  return out;
}

double max_err(const std::vector<float>& a, const std::vector<float>& b) {
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) e = std::max(e, std::fabs(double(a[i]) - b[i]));
  return e;
}

std::vector<uint8_t> encode_container(const std::string& pipeline, const std::vector<std::vector<Tensor>>& frames,
                                      uint32_t keyframe_interval, NonFinite nonfinite = NonFinite::Refuse) {
  const std::string path = (std::filesystem::temp_directory_path() / "gradcodec_delta_seq.gcz").string();
  {
    EncodeOptions eo;
    eo.seed = 3;
    eo.keyframe_interval = keyframe_interval;
    eo.nonfinite = nonfinite;
    SequenceEncoder enc(Pipeline::parse(pipeline), eo);
    ContainerWriter w(path, true, enc.header("[]"));
    for (const auto& fr : frames) {
      FrameSource src = frame_source(fr);
      enc.encode_frame(src, w);
    }
    w.finish();
  }
  std::ifstream f(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), {});
  std::filesystem::remove(path);
  return bytes;
}

}  // namespace

TEST_CASE("delta round-trips a sequence; its error does not accumulate", "[delta]") {
  auto frames = drifting(1000, 8);
  // Lossless values: g_t comes back to within f32 rounding of (g_t − prev) + prev.
  auto exact = sequence_roundtrip("delta", frames);
  for (size_t f = 0; f < frames.size(); ++f) CHECK(max_err(values_of(exact[f]), values_of(frames[f])) <= 1e-6);
  // fp16 values: the error of frame t is fp16's error on the small difference, not on g_t, and it
  // stays that small at the last frame (closed loop: the encoder predicts from decoded frames).
  auto with = sequence_roundtrip("delta | fp16", frames);
  auto without = sequence_roundtrip("fp16", frames);
  for (size_t f = 1; f < frames.size(); ++f) {
    INFO("frame " << f);
    const double e_delta = max_err(values_of(with[f]), values_of(frames[f]));
    const double e_plain = max_err(values_of(without[f]), values_of(frames[f]));
    CHECK(e_delta <= 0.1 * 0x1p-11 * 4.0);  // |g_t − g_{t−1}| ≤ ~0.1: half an f16 ulp of it, with margin
    CHECK(e_delta * 20 < e_plain);
  }
  // Frame 0 is a keyframe: the tensor itself is coded.
  CHECK(values_of(with[0]) == values_of(without[0]));
}

TEST_CASE("delta decodes frame N of a container; keyframes reset it", "[delta]") {
  std::vector<std::vector<Tensor>> frames;
  auto a = drifting(600, 6, "a.weight"), b = drifting(3, 6, "a.bias");
  for (size_t f = 0; f < 6; ++f) frames.push_back({a[f], b[f]});
  for (const char* pipeline : {"delta | fp16", "delta | topk(ratio=0.5)", "delta"}) {
    for (uint32_t interval : {0u, 2u}) {
      INFO(pipeline << ", keyframe_interval " << interval);
      auto bytes = encode_container(pipeline, frames, interval);
      ContainerReader reader(InputFile::from_bytes(bytes, "delta.gcz"));
      // Reference: every frame decoded in order by one decoder.
      std::vector<std::vector<float>> seq, seq_bias;
      {
        SequenceDecoder dec(reader);
        for (size_t f = 0; f < 6; ++f) seq.push_back(values_of(dec.decode(f, 0)));
        for (size_t f = 0; f < 6; ++f) seq_bias.push_back(values_of(dec.decode(f, 1)));
      }
      for (size_t n = 0; n < 6; ++n) {
        SequenceDecoder dec(reader);  // fresh: frame n alone
        CHECK(values_of(dec.decode(n, 0)) == seq[n]);
        const size_t last_key = interval ? n - n % interval : 0;
        CHECK(dec.frames_read() == n - last_key + 1);
        CHECK(reader.frame(n).keyframe == (n == last_key));
        CHECK(values_of(dec.decode(n, 1)) == seq_bias[n]);  // small: often stored raw
      }
      // The decoded frames track the input: exactly when every record is raw ("delta" alone),
      // within fp16 of the values or differences, or the larger half of the differences.
      const std::string p = pipeline;
      for (size_t n = 0; n < 6; ++n) {
        INFO("frame " << n);
        const double tol = p == "delta" ? 1e-6 : p == "delta | fp16" ? 2e-3 : reader.frame(n).keyframe ? 1.0 : 0.1;
        CHECK(max_err(seq[n], values_of(a[n])) <= tol);
        if (p == "delta") CHECK(max_err(seq_bias[n], values_of(b[n])) <= 1e-6);
        if (p == "delta") CHECK(reader.record(n, 0).storage == Storage::Raw);
      }
    }
  }
}

TEST_CASE("delta with a keyframe codes the tensor itself", "[delta]") {
  auto frames = drifting(500, 3);
  // fp16 of the whole tensor at a keyframe: same as fp16 alone.
  PipelineStages stages(Pipeline::parse("delta | fp16"));
  PipelineStages::TensorState st;
  StageContext ctx;
  ctx.frame = 2;
  ctx.keyframe = true;
  ctx.info = &frames[2].info;
  auto enc = stages.encode(frames[2], ctx, st);
  PipelineStages::TensorState fresh;
  CHECK(values_of(stages.decode(frames[2].info, std::move(enc.streams), true, ctx, fresh)) ==
        values_of(roundtrip("fp16", frames[2]).decoded));
}

TEST_CASE("delta: a difference beyond float32's range is refused, or the frame stored raw", "[delta]") {
  // -2e38 then +2e38: the difference, 4e38, is not a float32. The codec refuses the tensor
  // (Error Input naming it and the stage) or, with NonFinite::Raw, stores frame 1 raw; frame 2
  // then codes its difference to frame 1's exact values again.
  auto frame = [](float x) { return std::vector<Tensor>{make_tensor("w", {64}, std::vector<float>(64, x))}; };
  const std::vector<std::vector<Tensor>> frames = {frame(-2e38f), frame(2e38f), frame(1e38f)};
  try {
    encode_container("delta | sign", frames, 0);
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Input);
    CHECK_THAT(e.what(), Catch::Contains("tensor 'w': delta: the difference to the previous frame is not finite"));
    CHECK_THAT(e.what(), Catch::Contains(kNonfiniteRawAdvice));  // the library's default words
  }
  auto bytes = encode_container("delta | sign", frames, 0, NonFinite::Raw);
  ContainerReader reader(InputFile::from_bytes(bytes, "delta.gcz"));
  SequenceDecoder dec(reader);
  CHECK(reader.record(0, 0).storage == Storage::Pipeline);
  CHECK(reader.record(1, 0).storage == Storage::Raw);
  CHECK(reader.record(2, 0).storage == Storage::Pipeline);
  CHECK(values_of(dec.decode(0, 0)) == values_of(frames[0][0]));
  CHECK(values_of(dec.decode(1, 0)) == values_of(frames[1][0]));
  CHECK(max_err(values_of(dec.decode(2, 0)), values_of(frames[2][0])) <= 1e38 * 1e-6);
}
