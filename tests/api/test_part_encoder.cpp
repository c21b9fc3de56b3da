// SPDX-License-Identifier: BSD-3-Clause
// PartEncoder (gradcodec.hpp, docs/scale-out.md): a container written in parts, as the ranks of an
// MPI job write it, holds the bytes one Encoder writes, for every preset and any split of the
// tensors; parts that do not fit together are refused.
#include <gradcodec/gradcodec.hpp>
#include <gradcodec/plugin/registry.hpp>

#include "api/gradient_frames.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace gradcodec;

namespace {

const std::vector<test::GradFrame>& frames() {
  static const auto f = test::make_grad_frames(3, 11);
  return f;
}

FrameSource source_of(const std::vector<TensorView>& views) {
  FrameSource src;
  src.count = views.size();
  src.source = "frame";
  src.info = [&views](size_t k) {
    // What Encoder::add_frame makes of a view, built from the view's own fields.
    TensorInfo info;
    info.name = views[k].name;
    info.dtype = views[k].dtype;
    info.shape = views[k].shape;
    info.descr = views[k].descr;
    return info;
  };
  src.load = [&views, info = src.info](size_t k) {
    Tensor t;
    t.info = info(k);
    const uint64_t n = views[k].dtype == DType::Other ? views[k].bytes : t.info.elements() * dtype_size(t.info.dtype);
    const auto* p = static_cast<const uint8_t*>(views[k].data);
    t.data = Buffer(std::vector<uint8_t>(p, p + n));
    return t;
  };
  return src;
}

std::vector<uint8_t> whole(const EncoderOptions& o) {
  std::vector<uint8_t> bytes;
  VectorSink sink(bytes);
  Encoder e = Encoder::to_sink(sink, o);
  for (const auto& f : frames()) {
    const auto views = f.views();
    e.add_frame(source_of(views));
  }
  e.finish();
  return bytes;
}

// The container made by `n` parts, part p owning the tensors owner(name) == p; part `lead` lead.
std::vector<uint8_t> in_parts(const EncoderOptions& o, int n, const std::function<int(const std::string&)>& owner,
                              int lead = 0, EncodeSummary* summary = nullptr) {
  std::vector<PartEncoder> parts;
  for (int p = 0; p < n; ++p) parts.emplace_back(o, [p, owner](const std::string& name) { return owner(name) == p; });
  for (const auto& f : frames()) {
    const auto views = f.views();
    const FrameSource src = source_of(views);
    for (auto& part : parts) part.add_frame(src);
  }
  std::vector<std::vector<uint8_t>> described;
  for (const auto& part : parts) described.push_back(part.describe());
  std::vector<uint8_t> file;
  std::vector<bool> written;
  for (int p = 0; p < n; ++p) {
    const EncodeSummary s = parts[p].write(described, p == lead, [&](uint64_t at, std::span<const uint8_t> b) {
      if (file.size() < at + b.size()) file.resize(at + b.size()), written.resize(at + b.size());
      for (size_t k = 0; k < b.size(); ++k) {
        REQUIRE_FALSE(written[at + k]);  // no byte is written twice
        written[at + k] = true;
      }
      if (!b.empty()) std::memcpy(file.data() + at, b.data(), b.size());
    });
    if (summary) *summary = s;
  }
  for (bool w : written) REQUIRE(w);  // nor left out
  return file;
}

}  // namespace

TEST_CASE("part encoder: parts write the bytes one Encoder writes, for every preset and 1, 2 or 3 parts") {
  for (const auto& preset : preset_table()) {
    EncoderOptions o;
    o.preset = preset.name;
    o.seed = 5;
    o.keyframe_interval = 2;
    o.inputs_json = R"([{"path":"a"},{"path":"b"},{"path":"c"}])";
    INFO("preset " << preset.name);
    const auto expected = whole(o);
    for (int n = 1; n <= 3; ++n) {
      INFO(n << " parts");
      // Round robin over the tensors' places in a frame, and the other way round.
      const std::vector<std::string> names = {"layer.weight", "layer.bias", "head.weight", "steps"};
      auto place = [&](const std::string& name) { return int(std::find(names.begin(), names.end(), name) - names.begin()); };
      CHECK(in_parts(o, n, [&](const std::string& s) { return place(s) % n; }) == expected);
      CHECK(in_parts(o, n, [&](const std::string& s) { return (3 - place(s)) % n; }, n - 1) == expected);
    }
  }
}

TEST_CASE("part encoder: the summary counts every part's tensors") {
  EncoderOptions o;
  o.preset = "topk-1pct";
  EncodeSummary s;
  const auto bytes = in_parts(o, 2, [](const std::string& name) { return name == "layer.weight" ? 1 : 0; }, 0, &s);
  CHECK(s.frames == 3);
  CHECK(s.tensors == 12);
  CHECK(s.output_bytes == bytes.size());
  CHECK(s.float_elements == 3 * (64 * 48 + 48 + 10 * 48));
  CHECK(s.input_bytes == 3 * ((64 * 48 + 48) * 4 + 10 * 48 * 8 + 16));
}

TEST_CASE("part encoder: parts that do not fit together are refused") {
  EncoderOptions o;
  o.preset = "qsgd4";
  const auto views = frames()[0].views();
  const FrameSource src = source_of(views);
  PartEncoder a(o, [](const std::string&) { return true; });
  PartEncoder b(o, [](const std::string& name) { return name == "layer.bias"; });
  PartEncoder c(o, [](const std::string& name) { return name != "layer.bias"; });
  a.add_frame(src);
  b.add_frame(src);
  const auto ignore = [](uint64_t, std::span<const uint8_t>) {};
  auto code_of = [&](const std::vector<std::vector<uint8_t>>& parts) {
    try {
      a.write(parts, true, ignore);
    } catch (const Error& e) {
      return int(e.code());
    }
    return 0;
  };
  // A tensor claimed by two parts.
  CHECK(code_of({a.describe(), b.describe()}) == int(ErrorCode::Internal));
  // A tensor of the frame that no part holds (c has no frame yet: the frame counts differ).
  CHECK(code_of({b.describe(), c.describe()}) == int(ErrorCode::Internal));
  c.add_frame(src);
  CHECK(code_of({b.describe(), c.describe()}) == 0);
  // Records missing before the last of a frame.
  CHECK(code_of({b.describe()}) == int(ErrorCode::Internal));
}
