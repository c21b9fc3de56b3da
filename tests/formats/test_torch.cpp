// SPDX-License-Identifier: BSD-3-Clause
// torch.save reader and writer through the library: fixtures by real torch.save
// (tests/fixtures/fixtures_torch.py, in the fixture directory's torch/). The CLI test
// tests/cli/cli_torch_files.py checks values against torch.load; here: the reader's contract
// (format, names, dtypes, contiguous storages read in place, views copied) and the pickle reader
// on hand-written pickles.

#include <catch2/catch.hpp>

#include "pickle_restricted.hpp"

#include <gradcodec/error.hpp>
#include <gradcodec/file_io.hpp>
#include <gradcodec/formats/snapshot_io.hpp>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

using namespace gradcodec;
using namespace gradcodec::formats;

namespace {

const std::string kDir = std::string(GRADCODEC_FIXTURE_DIR) + "/torch/";

std::vector<std::string> names_of(const SnapshotReader& r) {
  std::vector<std::string> out;
  for (const TensorInfo& t : r.arrays()) out.push_back(t.name);
  return out;
}

std::vector<uint8_t> bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

}  // namespace

TEST_CASE("torch: a nested dict of every float dtype, named by its paths", "[torch]") {
  INFO("the fixtures need python3-torch (tests/fixtures/fixtures_torch.py)");
  REQUIRE(std::filesystem::exists(kDir + "nested.pt"));
  auto r = open_snapshot(kDir + "nested.pt");
  CHECK(r->format() == Format::Torch);
  CHECK(std::string(format_name(r->format())) == "torch");
  CHECK(names_of(*r) == std::vector<std::string>{"layer1.weight", "layer1.bias", "blocks.0", "blocks.1.0",
                                                 "blocks.1.1", "head.weight"});
  CHECK(r->arrays()[2].dtype == DType::F16);
  CHECK(r->arrays()[3].dtype == DType::BF16);
  CHECK(r->arrays()[4].dtype == DType::F64);
  CHECK(r->arrays()[4].shape == std::vector<uint64_t>{2, 3});
  // contiguous and aligned: a view into the mapped file, no copy
  Tensor t = r->read(0);
  CHECK(t.data.size() == 4 * 3 * 4);
  CHECK(reinterpret_cast<uintptr_t>(t.data.data()) % 64 == 0);
}

TEST_CASE("torch: views share a storage; strided ones are copied in C order", "[torch]") {
  INFO("the fixtures need python3-torch (tests/fixtures/fixtures_torch.py)");
  REQUIRE(std::filesystem::exists(kDir + "views.pt"));
  auto r = open_snapshot(kDir + "views.pt");
  REQUIRE(names_of(*r) == std::vector<std::string>{"whole", "tail", "t", "step", "col", "expanded", "bf16_t"});
  Tensor whole = r->read(0), tail = r->read(1), t = r->read(2), col = r->read(4), expanded = r->read(5);
  const float* w = reinterpret_cast<const float*>(whole.data.data());  // 6 x 8
  CHECK(tail.data.data() == whole.data.data() + 2 * 8 * 4);            // in place, at the storage offset
  REQUIRE(t.shape() == std::vector<uint64_t>{8, 6});
  const float* tt = reinterpret_cast<const float*>(t.data.data());
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 6; ++j) CHECK(std::memcmp(&tt[i * 6 + j], &w[j * 8 + i], 4) == 0);
  const float* c = reinterpret_cast<const float*>(col.data.data());
  for (int i = 0; i < 6; ++i) CHECK(std::memcmp(&c[i], &w[i * 8 + 5], 4) == 0);
  REQUIRE(expanded.shape() == std::vector<uint64_t>{4, 3});
  const float* e = reinterpret_cast<const float*>(expanded.data.data());
  for (int i = 0; i < 12; ++i) CHECK(std::memcmp(&e[i], &w[0], 4) == 0);
}

TEST_CASE("torch: the pickle reader makes data, never calls", "[torch]") {
  using pickle::read_torch_pickle;
  // {'a': [1, 2.5, None], 'b': {}} — no tensor: three non-tensor values noted
  const std::string ok_pickle = std::string("\x80\x02}(X\x01\x00\x00\x00" "a](K\x01G\x40\x04", 17) +
                               std::string(6, '\0') + "Ne" + std::string("X\x01\x00\x00\x00" "b}u.", 9);
  auto ok = bytes(ok_pickle);
  pickle::Result r = read_torch_pickle(ok.data(), ok.size(), "t", "root");
  CHECK(r.tensors.empty());
  CHECK(r.skipped == 3);
  CHECK(r.first_skipped == "a.0");
  auto refuse = [](const std::string& p, const std::string& contains) {
    std::vector<uint8_t> b(p.begin(), p.end());
    try {
      read_torch_pickle(b.data(), b.size(), "t", "root");
      FAIL("accepted: " << contains);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Input);
      CHECK_THAT(e.what(), Catch::Contains(contains));
    }
  };
  refuse("\x80\x02" "cos\nsystem\n" "N\x85R.", "'os.system'");
  refuse("\x80\x02" "(ios\nsystem\n.", "INST");
  refuse(std::string("\x80\x02\x82\x01.", 5), "EXT1");
  refuse("\x80\x02" "ctorch\nFloatStorage\n)R.", "never called");
  refuse("\x80\x02]", "without STOP");
  refuse("\x80\x02h\x05.", "never stored");
  refuse(std::string("\x80\x02" "ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00" "storage"
                     "ctorch\nFloatStorage\n" "X\x01\x00\x00\x00" "0" "X\x03\x00\x00\x00" "cpu"
                     "K\x02tQK\x01K\x02\x85K\x01\x85\x89)tR.", 100),
         "reaches beyond storage '0' of 2 elements");
}

TEST_CASE("torch: decode's writer output reads back through the reader", "[torch]") {
  const std::string out = (std::filesystem::temp_directory_path() / "gradcodec_test_torch_w.pt").string();
  std::filesystem::remove(out);
  std::vector<float> v{1.5f, -2.0f, 0.0f, 3.25f, 4.0f, 5.0f};
  Tensor t;
  t.info.name = "layer.w";
  t.info.dtype = DType::F32;
  t.info.shape = {2, 3};
  t.data = Buffer(std::vector<uint8_t>(reinterpret_cast<uint8_t*>(v.data()), reinterpret_cast<uint8_t*>(v.data() + 6)));
  Tensor s;
  s.info.name = "count";
  s.info.dtype = DType::Other;
  s.info.descr = "<i8";
  s.info.shape = {};
  s.data = Buffer(std::vector<uint8_t>{7, 0, 0, 0, 0, 0, 0, 0});
  {
    auto w = create_snapshot(out, false);
    w->add(t);
    w->add(s);
    w->finish();
  }
  auto r = open_snapshot(out);
  CHECK(r->format() == Format::Torch);
  REQUIRE(names_of(*r) == std::vector<std::string>{"layer.w", "count"});
  Tensor back = r->read(0);
  CHECK(std::memcmp(back.data.data(), v.data(), 24) == 0);
  CHECK(r->arrays()[1].descr == "<i8");
  CHECK(r->read(1).data.data()[0] == 7);
  std::filesystem::remove(out);
}
