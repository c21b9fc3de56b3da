// SPDX-License-Identifier: BSD-3-Clause
// The public API (gradcodec.hpp): the three ways to write a container give the same bytes, the
// Decoder reads them back, and misuse is refused with the documented error codes.
#include <gradcodec/gradcodec.hpp>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <tuple>
#include <unistd.h>
#include <vector>

using namespace gradcodec;

namespace {

struct Data {
  std::vector<float> w = std::vector<float>(4096), b = std::vector<float>(64);
  Data() {
    for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i * 7919 % 1000) - 500) / 1000.0f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = float(i) / 64.0f - 0.5f;
  }
  std::vector<TensorView> views() const {
    return {{"w", {64, 64}, w.data()},
            {"b", {64}, b.data()}};
  }
};

std::vector<uint8_t> encode_to_memory(const EncoderOptions& o, int frames = 1) {
  const Data d;
  std::vector<uint8_t> bytes;
  VectorSink sink(bytes);
  Encoder e = Encoder::to_sink(sink, o);
  for (int f = 0; f < frames; ++f) e.add_frame(d.views());
  e.finish();
  return bytes;
}

std::vector<uint8_t> read_file(const std::string& p) {
  std::vector<uint8_t> out(std::filesystem::file_size(p));
  FILE* f = std::fopen(p.c_str(), "rb");
  REQUIRE(f);
  REQUIRE(std::fread(out.data(), 1, out.size(), f) == out.size());
  std::fclose(f);
  return out;
}

std::string scratch(const char* name) {
  return (std::filesystem::temp_directory_path() / (std::string("gradcodec_facade_") +
                                                    std::to_string(::getpid()) + "_" + name)).string();
}

}  // namespace

TEST_CASE("facade: path, descriptor and memory sink write the same bytes, for any thread count") {
  EncoderOptions o;
  o.preset = GENERATE(as<std::string>{}, "lossless", "topk-1pct", "qsgd4", "randk-1pct", "bird+");
  o.seed = 7;
  const auto mem = encode_to_memory(o);
  REQUIRE(mem.size() > 64);

  const std::string p = scratch("path.gcz");
  {
    const Data d;
    o.threads = 2;
    Encoder e = Encoder::to_path(p, o);
    e.add_frame(d.views());
    const EncodeSummary s = e.finish();
    CHECK(s.output_bytes == mem.size());
    CHECK(s.tensors == 2);
    CHECK(s.frames == 1);
    CHECK(s.input_bytes == (4096 + 64) * 4);
    CHECK(s.float_elements == 4096 + 64);
  }
  CHECK(read_file(p) == mem);
  std::filesystem::remove(p);

  const std::string q = scratch("fd.gcz");
  const int fd = ::open(q.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(fd >= 0);
  {
    const Data d;
    Encoder e = Encoder::to_fd(fd, o);
    e.add_frame(d.views());
    e.finish();
  }
  ::close(fd);
  CHECK(read_file(q) == mem);
  std::filesystem::remove(q);
}

TEST_CASE("facade: the Decoder lists without decoding and decodes what was encoded") {
  EncoderOptions o;
  o.preset = "lossless";
  o.inputs_json = R"([{"path":"a.npz","format":"npz"},{"path":"b.npz","format":"npz"}])";
  const auto bytes = encode_to_memory(o, 2);
  Decoder d = Decoder::from_bytes(bytes, {}, "mem.gcz");
  CHECK(d.frame_count() == 2);
  CHECK(d.pipeline_text() == canonical_pipeline(o));
  CHECK(d.inputs_json() == o.inputs_json);
  CHECK(d.tool() == version());
  const auto infos = d.tensors(1);
  REQUIRE(infos.size() == 2);
  CHECK(infos[0].name == "w");
  CHECK(infos[0].shape == std::vector<uint64_t>{64, 64});
  CHECK(d.find(1, "b") == std::optional<size_t>(1));
  CHECK_FALSE(d.find(1, "nope"));
  const Data ref;
  const Tensor w = d.decode(1, 0);
  REQUIRE(w.data.size() == ref.w.size() * 4);
  CHECK(std::memcmp(w.data.data(), ref.w.data(), w.data.size()) == 0);
  std::vector<std::string> names;
  d.decode_frame(0, [&](Tensor&& t) { names.push_back(t.name()); });
  CHECK(names == std::vector<std::string>{"w", "b"});
}

TEST_CASE("facade: decode_frame of some tensors gives what decode() gives, stateful pipelines too") {
  for (const char* preset : {"qsgd4", "ef-signsgd", "powersgd-r2"}) {
    EncoderOptions o;
    o.preset = preset;
    o.keyframe_interval = 3;
    const auto bytes = encode_to_memory(o, 4);
    for (size_t f : {size_t{0}, size_t{2}, size_t{3}}) {
      // Each from a decoder of its own, so that frame f is replayed from its keyframe.
      Decoder one = Decoder::from_bytes(bytes);
      std::vector<Tensor> want;
      for (size_t i = 0; i < 2; ++i) want.push_back(one.decode(f, i));
      for (const std::vector<size_t>& which : {std::vector<size_t>{1}, std::vector<size_t>{0, 1}, std::vector<size_t>{}}) {
        DecoderOptions threads;
        threads.threads = 2;
        Decoder d = Decoder::from_bytes(bytes, threads);
        std::vector<Tensor> got;
        d.decode_frame(f, which, [&](Tensor&& t) { got.push_back(std::move(t)); });
        REQUIRE(got.size() == which.size());
        for (size_t k = 0; k < which.size(); ++k) {
          const Tensor& w = want[which[k]];
          CHECK(got[k].name() == w.name());
          REQUIRE(got[k].data.size() == w.data.size());
          CHECK(std::memcmp(got[k].data.data(), w.data.data(), w.data.size()) == 0);
        }
        if (!which.empty()) CHECK(d.frames_read() == (f == 2 && d.stateful() ? 3u : 1u));
      }
    }
    Decoder d = Decoder::from_bytes(bytes);
    for (const std::vector<size_t>& bad : {std::vector<size_t>{1, 0}, std::vector<size_t>{0, 0}, std::vector<size_t>{2}}) {
      try {
        d.decode_frame(0, bad, [](Tensor&&) {});
        FAIL("accepted a bad selection");
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::Usage);
      }
    }
  }
}

TEST_CASE("facade: misuse and bad input are refused with their codes") {
  EncoderOptions both;
  both.preset = "lossless";
  both.pipeline = "raw";
  std::vector<uint8_t> bytes;
  VectorSink sink(bytes);
  try {
    (void)Encoder::to_sink(sink, both);
    FAIL("both a preset and a pipeline were accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Usage);
  }
  EncoderOptions bad;
  bad.preset = "no-such-preset";
  CHECK_THROWS_AS(canonical_pipeline(bad), Error);

  // A finished encoder takes no more frames; the container is left as it was.
  EncoderOptions o;
  Encoder e = Encoder::to_sink(sink, o);
  const Data d;
  e.add_frame(d.views());
  const auto s = e.finish();
  const size_t n = bytes.size();
  CHECK(s.output_bytes == n);
  try {
    e.add_frame(d.views());
    FAIL("add_frame after finish was accepted");
  } catch (const Error& err) {
    CHECK(err.code() == ErrorCode::Usage);
  }
  CHECK(bytes.size() == n);

  // A view with elements and no data.
  std::vector<uint8_t> other;
  VectorSink sink2(other);
  Encoder e2 = Encoder::to_sink(sink2, o);
  const TensorView hollow[] = {{"x", DType::F32, {10}, nullptr}};
  CHECK_THROWS_AS(e2.add_frame(hollow), Error);
  CHECK_THROWS_AS(e2.finish(), Error);  // an encoder that failed cannot complete its container

  // A damaged container: Corrupt; a frame or tensor out of range: Usage.
  auto damaged = bytes;
  damaged[damaged.size() / 2] ^= 0x40;
  try {
    Decoder dd = Decoder::from_bytes(damaged);
    for (size_t f = 0; f < dd.frame_count(); ++f) dd.decode_frame(f, [](Tensor&&) {});
    FAIL("a damaged container decoded");
  } catch (const Error& err) {
    CHECK(err.code() == ErrorCode::Corrupt);
  }
  Decoder ok = Decoder::from_bytes(bytes);
  try {
    (void)ok.decode(1, 0);
    FAIL("frame 1 of a one-frame container decoded");
  } catch (const Error& err) {
    CHECK(err.code() == ErrorCode::Usage);
  }
  CHECK_THROWS_AS(ok.decode(0, 2), Error);
}

TEST_CASE("facade: an encoder dropped before finish() leaves no file") {
  const std::string p = scratch("dropped.gcz");
  {
    const Data d;
    Encoder e = Encoder::to_path(p, {});
    e.add_frame(d.views());
  }
  CHECK_FALSE(std::filesystem::exists(p));
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
    CHECK(entry.path().filename().string().rfind(".gradcodec_facade_" + std::to_string(::getpid()) + "_dropped", 0) ==
          std::string::npos);
}

TEST_CASE("facade: inspect() gives the record of `inspect --json` with the container's figures") {
  const std::string p = scratch("inspect.gcz");
  EncoderOptions o;
  o.preset = "topk-1pct";
  o.overwrite = true;
  {
    const Data d;
    Encoder e = Encoder::to_path(p, o);
    e.add_frame(d.views(), "step.npz");
    e.finish();
  }
  const auto j = nlohmann::ordered_json::parse(inspect(p));
  CHECK(j["file"] == p);
  CHECK(j["pipeline"] == canonical_pipeline(o));
  REQUIRE(j["frames"].size() == 1);
  CHECK(j["frames"][0]["source"] == "step.npz");
  REQUIRE(j["frames"][0]["tensors"].size() == 2);
  CHECK(j["frames"][0]["tensors"][0]["name"] == "w");
  CHECK(j["frames"][0]["tensors"][0]["numpy_descr"] == "<f4");
  const auto& totals = j["totals"];
  CHECK(totals["container_bytes"] == std::filesystem::file_size(p));
  CHECK(totals["parameters"] == 4096 + 64);
  // topk(ratio=0.01) keeps max(1, round(1% of n)) values of each tensor: 41 of 4096 and 1 of 64.
  CHECK(j["frames"][0]["tensors"][0]["kept"] == 41);
  CHECK(j["frames"][0]["tensors"][1]["kept"] == 1);
  CHECK(totals["kept"] == 41 + 1);
  const auto metadata_only = nlohmann::ordered_json::parse(inspect(p, {.decode = false}));
  CHECK_FALSE(metadata_only["totals"].contains("kept"));
  std::filesystem::remove(p);
  CHECK_THROWS_AS(inspect(p), Error);
}

TEST_CASE("facade: merge() averages workers' containers (mean) and refuses what does not apply") {
  const Data d;
  std::vector<float> w2(d.w.size()), b2(d.b.size());
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = 1.0f - d.w[i];
  for (size_t i = 0; i < b2.size(); ++i) b2[i] = 3.0f * d.b[i];
  const std::string a = scratch("worker_a.gcz"), b = scratch("worker_b.gcz"), out = scratch("merged.gcz");
  using Worker = std::tuple<std::string, const float*, const float*>;
  for (const auto& [path, w, bias] : {Worker{a, d.w.data(), d.b.data()}, Worker{b, w2.data(), b2.data()}}) {
    EncoderOptions o;
    o.overwrite = true;
    Encoder e = Encoder::to_path(path, o);
    const TensorView frame[] = {{"w", {64, 64}, w}, {"b", {64}, bias}};
    e.add_frame(frame);
    e.finish();
  }
  MergeSettings s;
  s.method = "mean";
  s.overwrite = true;
  const MergeSummary r = merge({a, b}, out, s);
  CHECK(r.frames == 1);
  CHECK(r.tensors == 2);
  CHECK(r.bytes_written == std::filesystem::file_size(out));
  Decoder dec = Decoder::open(out);
  const Tensor w = dec.decode(0, 0);
  REQUIRE(w.data.size() == d.w.size() * 4);
  std::vector<float> got(d.w.size());
  std::memcpy(got.data(), w.data.data(), w.data.size());
  for (size_t i = 0; i < got.size(); i += 97) CHECK(got[i] == Approx((d.w[i] + w2[i]) / 2).margin(1e-6));

  s.method = "no-such-method";
  try {
    (void)merge({a, b}, out, s);
    FAIL("an unknown method was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Usage);
  }
  s.method = "mean";
  try {
    (void)merge({a}, scratch("one.gcz"), s);
    FAIL("one input was merged");
  } catch (const Error& e) {
    CHECK(e.code() != ErrorCode::Internal);
  }
  for (const auto& p : {a, b, out}) std::filesystem::remove(p);
}
