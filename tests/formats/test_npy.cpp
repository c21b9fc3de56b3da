// SPDX-License-Identifier: BSD-3-Clause
// NPY and directory-of-NPY: reading files as numpy writes them (fixtures from
// tests/fixtures/fixtures_npy.py, expected values in their manifest.json), refusing corrupt ones,
// and writing files numpy loads back bit for bit (checked by tests/fixtures/npy_check.py).
//
// The helpers in namespace npytest are shared with test_npz.cpp (declared again there).
#include <catch2/catch.hpp>

#include <gradcodec/error.hpp>
#include <gradcodec/file_io.hpp>
#include <gradcodec/formats/snapshot_io.hpp>
#include <gradcodec/half.hpp>
#include <gradcodec/tensor.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;
using gradcodec::DType;
using gradcodec::Error;
using gradcodec::ErrorCode;
using gradcodec::Tensor;
using gradcodec::TensorInfo;
using nlohmann::json;
namespace gf = gradcodec::formats;

namespace npytest {

std::string fixture(const std::string& rel) { return std::string(GRADCODEC_FIXTURE_DIR) + "/" + rel; }

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

json manifest(const std::string& format) {
  std::ifstream in(fixture(format + "/manifest.json"));
  REQUIRE(in.good());
  return json::parse(in);
}

// The metadata of `info` is what the manifest entry `e` says.
void check_info(const TensorInfo& info, const json& e) {
  CHECK(info.name == e.at("name").get<std::string>());
  CHECK(gradcodec::dtype_name(info.dtype) == e.at("dtype").get<std::string>());
  CHECK(info.descr == e.at("descr").get<std::string>());
  CHECK(info.big_endian == e.at("big_endian").get<bool>());
  CHECK(info.shape == e.at("shape").get<std::vector<uint64_t>>());
}

// Metadata and every byte of the data (C order, little-endian floats) as the manifest says.
void check_tensor(const Tensor& t, const json& e, const std::string& format) {
  check_info(t.info, e);
  std::vector<uint8_t> want = file_bytes(fixture(format + "/" + e.at("data").get<std::string>()));
  REQUIRE(t.data.size() == want.size());
  CHECK(std::equal(want.begin(), want.end(), t.data.data()));  // memcmp may not take null (empty)
}

// The Error thrown by f; fails the test when f throws nothing.
template <class F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  FAIL("no gradcodec::Error thrown");
  return Error(ErrorCode::Internal, "unreachable");
}

// A fresh directory, removed with everything in it at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "gradcodec-npytest-XXXXXX").string();
    REQUIRE(::mkdtemp(templ.data()) != nullptr);
    path = templ;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& d : fs::directory_iterator(path)) names.push_back(d.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs tests/fixtures/npy_check.py with `args`; its exit status (0 = numpy agrees).
int run_checker(const std::vector<std::string>& args) {
  std::string cmd = quote(GRADCODEC_PYTHON);
  cmd += ' ';
  cmd += quote(std::string(GRADCODEC_SOURCE_DIR) + "/tests/fixtures/npy_check.py");
  for (const auto& a : args) {
    cmd += ' ';
    cmd += quote(a);
  }
  int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Tensor make_tensor(const std::string& name, DType dtype, std::vector<uint64_t> shape,
                   std::vector<uint8_t> bytes, bool big_endian, const std::string& descr) {
  Tensor t;
  t.info.name = name;
  t.info.dtype = dtype;
  t.info.shape = std::move(shape);
  t.info.big_endian = big_endian;
  t.info.descr = descr;
  t.data = gradcodec::Buffer(std::move(bytes));
  return t;
}

template <class T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::string hex(const std::vector<uint8_t>& b) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t c : b) {
    s += digits[c >> 4];
    s += digits[c & 15];
  }
  return s;
}

// A checker spec entry: what numpy must load (bytes in the dtype's own byte order).
json expect_entry(const std::string& name, const std::string& descr, std::vector<uint64_t> shape,
                  const std::vector<uint8_t>& bytes) {
  return json{{"name", name}, {"descr", descr}, {"shape", shape}, {"hex", hex(bytes)}};
}

int check_expect(const std::string& path, const std::string& kind, const json& arrays,
                 const std::string& spec_path) {
  std::ofstream(spec_path) << json{{"path", path}, {"kind", kind}, {"arrays", arrays}}.dump();
  return run_checker({"expect", spec_path});
}

// Special values with exact bit patterns: ±0, ±Inf, subnormals, quiet/signalling NaNs with payload.
std::vector<uint32_t> f32_special_bits() {
  return {0x00000000, 0x80000000, 0x3F800000, 0xBFC00000, 0x7F7FFFFF, 0x00000001,
          0x7F800000, 0xFF800000, 0x7FC00000, 0x7FC12345, 0x7F800001, 0xFFC00000};
}

template <class T>
std::vector<uint8_t> swapped(const std::vector<T>& v) {
  std::vector<uint8_t> b = bytes_of(v);
  for (size_t i = 0; i < b.size(); i += sizeof(T)) std::reverse(b.begin() + i, b.begin() + i + sizeof(T));
  return b;
}

}  // namespace npytest

using namespace npytest;

// ------------------------------------------------------------------------------------------------
// Reading

TEST_CASE("npy: every valid fixture reads as numpy wrote it", "[npy]") {
  json m = manifest("npy");
  const json& valid = m.at("valid");
  // Guard against a fixture script that silently stopped writing files.
  for (const char* must : {"valid/f32_le.npy", "valid/f64_be.npy", "valid/f16_be.npy", "valid/f32_v2.npy",
                           "valid/f64_v3.npy", "valid/f32_fortran.npy", "valid/f64_fortran_be_3d.npy",
                           "valid/scalar_f64.npy", "valid/empty_f32.npy", "valid/i64.npy", "valid/bool.npy",
                           "valid/c64.npy", "valid/object.npy", "valid/structured.npy",
                           "valid/utf8_v3.npy", "valid/keys_any_order.npy", "valid/unpadded.npy"})
    REQUIRE(valid.contains(must));
  REQUIRE(valid.size() >= 40);
  for (const auto& [rel, e] : valid.items()) {
    INFO(rel);
    auto r = gf::open_snapshot(fixture("npy/" + rel));
    CHECK(r->format() == gf::Format::Npy);
    REQUIRE(r->arrays().size() == 1);
    check_info(r->arrays()[0], e);
    check_tensor(r->read(0), e, "npy");
  }
}

TEST_CASE("npy: Fortran order keeps the shape and yields C order", "[npy]") {
  // Independent of the manifest: value (i, j) of ramp((3, 4)) is (4 i + j) * 0.25 - 3.
  auto r = gf::open_snapshot(fixture("npy/valid/f32_fortran.npy"));
  Tensor t = r->read(0);
  REQUIRE(t.shape() == std::vector<uint64_t>{3, 4});
  REQUIRE(t.dtype() == DType::F32);
  std::vector<float> v(12);
  std::memcpy(v.data(), t.data.data(), 48);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) CHECK(v[i * 4 + j] == (4 * i + j) * 0.25f - 3.0f);

  // Big-endian and Fortran at once, 3-D: (i, j, k) of ramp((2, 3, 4)) is (12 i + 4 j + k) / 4 - 3.
  Tensor b = gf::open_snapshot(fixture("npy/valid/f64_fortran_be_3d.npy"))->read(0);
  REQUIRE(b.shape() == std::vector<uint64_t>{2, 3, 4});
  CHECK(b.info.big_endian);
  std::vector<double> d(24);
  std::memcpy(d.data(), b.data.data(), 24 * 8);
  for (int i = 0; i < 24; ++i) CHECK(d[i] == i * 0.25 - 3.0);
}

TEST_CASE("npy: big-endian floats become little-endian, flagged for writers", "[npy]") {
  Tensor le = gf::open_snapshot(fixture("npy/valid/f32_le.npy"))->read(0);
  Tensor be = gf::open_snapshot(fixture("npy/valid/f32_be.npy"))->read(0);
  CHECK_FALSE(le.info.big_endian);
  CHECK(be.info.big_endian);
  CHECK(be.info.descr == ">f4");
  std::vector<uint8_t> want = bytes_of(f32_special_bits());
  REQUIRE(be.data.size() == want.size());
  CHECK(std::memcmp(be.data.data(), want.data(), want.size()) == 0);  // NaN payloads intact
  CHECK(std::memcmp(le.data.data(), want.data(), want.size()) == 0);
}

TEST_CASE("npy: 0-d and empty arrays", "[npy]") {
  Tensor s = gf::open_snapshot(fixture("npy/valid/scalar_f64.npy"))->read(0);
  CHECK(s.shape().empty());
  CHECK(s.elements() == 1);
  double v;
  REQUIRE(s.data.size() == 8);
  std::memcpy(&v, s.data.data(), 8);
  CHECK(v == 3.5);

  Tensor e = gf::open_snapshot(fixture("npy/valid/empty_f32.npy"))->read(0);
  CHECK(e.shape() == std::vector<uint64_t>{0, 3});
  CHECK(e.data.size() == 0);
  Tensor f = gf::open_snapshot(fixture("npy/valid/empty_fortran.npy"))->read(0);
  CHECK(f.shape() == std::vector<uint64_t>{3, 0, 2});
  CHECK(f.data.size() == 0);
}

TEST_CASE("npy: non-float arrays are Other with the descr and bytes verbatim", "[npy]") {
  auto r = gf::open_snapshot(fixture("npy/valid/structured.npy"));
  CHECK(r->arrays()[0].dtype == DType::Other);
  CHECK(r->arrays()[0].descr ==
        "[('a', '<i4'), (('title', 'b'), '<f8', (2,)), ('c', [('x', '|u1'), ('y', '>f4')])]");
  CHECK(gf::open_snapshot(fixture("npy/valid/i16_be.npy"))->arrays()[0].descr == ">i2");
  CHECK_FALSE(gf::open_snapshot(fixture("npy/valid/i16_be.npy"))->arrays()[0].big_endian);
  CHECK(gf::open_snapshot(fixture("npy/valid/longdouble.npy"))->arrays()[0].dtype == DType::Other);

  // An object array's data is its pickle, handed over untouched (protocol 3 starts 0x80 0x03).
  auto o = gf::open_snapshot(fixture("npy/valid/object.npy"));
  CHECK(o->arrays()[0].descr == "|O");
  CHECK(o->arrays()[0].shape == std::vector<uint64_t>{4});
  Tensor t = o->read(0);
  REQUIRE(t.data.size() > 2);
  CHECK(t.data.data()[0] == 0x80);
  std::vector<uint8_t> file = file_bytes(fixture("npy/valid/object.npy"));
  CHECK(std::memcmp(t.data.data(), file.data() + file.size() - t.data.size(), t.data.size()) == 0);
}

TEST_CASE("npy: corrupt and lying files are refused with one line naming the file", "[npy]") {
  json m = manifest("npy");
  const json& errors = m.at("errors");
  for (const char* must : {"corrupt/bad_magic.npy", "corrupt/version_4.npy", "corrupt/header_beyond_eof.npy",
                           "corrupt/header_over_cap.npy", "corrupt/truncated_data.npy",
                           "corrupt/shape_lies.npy", "corrupt/negative_dim.npy",
                           "corrupt/shape_overflow.npy", "corrupt/unknown_descr.npy",
                           "corrupt/code_injection.npy"})
    REQUIRE(errors.contains(must));
  for (const auto& [rel, what] : errors.items()) {
    INFO(rel);
    std::string path = fixture("npy/" + rel);
    Error e = error_of([&] { gf::open_snapshot(path); });
    CHECK(e.code() == ErrorCode::Input);
    std::string msg = e.what();
    CHECK(msg.rfind(path + ": ", 0) == 0);
    CHECK(msg.find(what.get<std::string>()) != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
  }
}

TEST_CASE("npy: a directory of .npy files, in file-name order", "[npy]") {
  json m = manifest("npy");
  const json& want = m.at("dirs").at("dir_ok");
  auto r = gf::open_snapshot(fixture("npy/dir_ok"));
  CHECK(r->format() == gf::Format::NpyDir);
  REQUIRE(r->arrays().size() == want.size());
  REQUIRE(want.size() == 6);
  for (size_t i = 0; i < want.size(); ++i) {
    INFO(want[i].at("name"));
    check_info(r->arrays()[i], want[i]);
    check_tensor(r->read(i), want[i], "npy");
  }
  for (const auto& [name, what] : m.at("dir_errors").items()) {
    const std::string dir = name;  // (a structured binding cannot be captured before C++20)
    INFO(dir);
    Error e = error_of([&] { gf::open_snapshot(fixture("npy/" + dir)); });
    CHECK(e.code() == ErrorCode::Input);
    CHECK(std::string(e.what()).find(fixture("npy/" + dir)) == 0);
    CHECK(std::string(e.what()).find(what.get<std::string>()) != std::string::npos);
  }
}

TEST_CASE("npy: read from standard input", "[npy]") {
  int saved = ::dup(0);
  int f = ::open(fixture("npy/valid/f64_be.npy").c_str(), O_RDONLY);
  REQUIRE(f >= 0);
  REQUIRE(::dup2(f, 0) == 0);
  ::close(f);
  std::clearerr(stdin);
  std::unique_ptr<gf::SnapshotReader> r;
  try {
    r = gf::open_snapshot("-");
  } catch (...) {
    r.reset();
  }
  ::dup2(saved, 0);
  ::close(saved);
  std::clearerr(stdin);
  REQUIRE(r);
  CHECK(r->format() == gf::Format::Npy);
  json e = manifest("npy").at("valid").at("valid/f64_be.npy");
  e["name"] = "arr_0";  // no file name to take a stem from: numpy's name for an unnamed array
  check_tensor(r->read(0), e, "npy");
}

// ------------------------------------------------------------------------------------------------
// Writing

TEST_CASE("npy writer: numpy loads every dtype back bit for bit", "[npy]") {
  TempDir tmp;
  std::vector<uint32_t> f32 = f32_special_bits();
  std::vector<uint64_t> f64 = {0x7FF8000000012345, 0x8000000000000000, 0x0000000000000001,
                               0x3FF0000000000000, 0xFFF0000000000000, 0x7FF0000000000001};
  std::vector<uint16_t> f16 = {0x0000, 0x8000, 0x3C00, 0x0001, 0x7C00, 0xFC00, 0x7E01, 0x7D00};
  std::vector<uint16_t> bf16 = {0x3F80, 0xC040, 0x7F80, 0xFF80, 0x7FC1, 0x0001, 0x8000, 0x4049};
  std::vector<uint32_t> bf16_as_f32;
  for (uint16_t b : bf16) bf16_as_f32.push_back(uint32_t{b} << 16);  // exact upcast
  std::vector<int64_t> steps = {1234, -1};

  struct Case {
    Tensor t;
    json expect;
  };
  std::vector<Case> cases = {
      {make_tensor("f32", DType::F32, {3, 4}, bytes_of(f32), false, ""),
       expect_entry("f32", "<f4", {3, 4}, bytes_of(f32))},
      {make_tensor("f32be", DType::F32, {12}, bytes_of(f32), true, ">f4"),
       expect_entry("f32be", ">f4", {12}, swapped(f32))},
      {make_tensor("f64", DType::F64, {2, 1, 3}, bytes_of(f64), false, ""),
       expect_entry("f64", "<f8", {2, 1, 3}, bytes_of(f64))},
      {make_tensor("f64be", DType::F64, {6}, bytes_of(f64), true, ""),
       expect_entry("f64be", ">f8", {6}, swapped(f64))},
      {make_tensor("f16", DType::F16, {8}, bytes_of(f16), false, ""),
       expect_entry("f16", "<f2", {8}, bytes_of(f16))},
      {make_tensor("f16be", DType::F16, {2, 4}, bytes_of(f16), true, ""),
       expect_entry("f16be", ">f2", {2, 4}, swapped(f16))},
      {make_tensor("bf16", DType::BF16, {2, 4}, bytes_of(bf16), false, ""),
       expect_entry("bf16", "<f4", {2, 4}, bytes_of(bf16_as_f32))},
      {make_tensor("scalar", DType::F32, {}, bytes_of(std::vector<uint32_t>{0x7FC00001}), false, ""),
       expect_entry("scalar", "<f4", {}, bytes_of(std::vector<uint32_t>{0x7FC00001}))},
      {make_tensor("empty", DType::F64, {0, 5}, {}, false, ""), expect_entry("empty", "<f8", {0, 5}, {})},
      {make_tensor("step", DType::Other, {2}, bytes_of(steps), false, "<i8"),
       expect_entry("step", "<i8", {2}, bytes_of(steps))},
      {make_tensor("rec", DType::Other, {1}, {1, 0, 0, 0, 2}, false, "[('a', '<i4'), ('b', '|u1')]"),
       expect_entry("rec", "[('a', '<i4'), ('b', '|u1')]", {1}, {1, 0, 0, 0, 2})},
  };

  SECTION("one .npy file per tensor") {
    std::vector<std::string> specs = {"expect"};
    for (const Case& c : cases) {
      INFO(c.t.name());
      std::string path = tmp / (c.t.name() + ".npy");
      auto w = gf::create_snapshot(path, false);
      w->add(c.t);
      w->finish();
      std::vector<std::string> warnings = w->take_warnings();
      if (c.t.dtype() == DType::BF16) {
        REQUIRE(warnings.size() == 1);
        CHECK(warnings[0] == "tensor bf16: bf16 stored as float32 (numpy has no bfloat16)");
      } else {
        CHECK(warnings.empty());
      }
      specs.push_back(tmp / (c.t.name() + ".json"));
      std::ofstream(specs.back()) << json{{"path", path}, {"kind", "npy"}, {"arrays", {c.expect}}}.dump();
    }
    CHECK(run_checker(specs) == 0);
  }
  SECTION("a directory of .npy files") {
    std::string dir = tmp / "out/";
    auto w = gf::create_snapshot(dir, false);
    json expect = json::array();
    std::vector<std::pair<std::string, json>> sorted;
    for (const Case& c : cases) {
      w->add(c.t);
      sorted.emplace_back(c.t.name() + ".npy", c.expect);
    }
    w->finish();
    CHECK(w->take_warnings().size() == 1);
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [file, e] : sorted) expect.push_back(e);
    CHECK(check_expect(dir, "dir", expect, tmp / "spec.json") == 0);

    // And gradcodec reads its own output back with the same values.
    auto r = gf::open_snapshot(dir);
    REQUIRE(r->arrays().size() == cases.size());
    for (size_t i = 0; i < r->arrays().size(); ++i) {
      Tensor t = r->read(i);
      for (const Case& c : cases) {
        if (c.t.name() != t.name() || c.t.dtype() == DType::BF16) continue;
        INFO(t.name());
        CHECK(t.info.big_endian == c.t.info.big_endian);
        CHECK(t.shape() == c.t.shape());
        REQUIRE(t.data.size() == c.t.data.size());
        CHECK(std::equal(t.data.data(), t.data.data() + t.data.size(), c.t.data.data()));
      }
    }
  }
}

TEST_CASE("npy writer: byte-identical to np.save for C-order arrays", "[npy]") {
  TempDir tmp;
  for (const char* rel : {"valid/f32_le.npy", "valid/f32_be.npy", "valid/f64_be.npy", "valid/f16_le.npy",
                          "valid/scalar_f64.npy", "valid/scalar_f16_be.npy", "valid/empty_f32.npy",
                          "valid/i64.npy", "valid/bool.npy", "valid/c128_be.npy", "valid/unicode.npy",
                          "valid/datetime.npy", "valid/structured.npy", "valid/structured_aligned.npy",
                          "valid/latin1_v1.npy", "valid/utf8_v3.npy", "valid/wide_struct_v2.npy",
                          "valid/growth_pad.npy", "valid/object.npy"}) {
    INFO(rel);
    std::string src = fixture(std::string("npy/") + rel);
    std::string out = tmp / fs::path(rel).filename().string();
    auto r = gf::open_snapshot(src);
    auto w = gf::create_snapshot(out, false);
    w->add(r->read(0));
    w->finish();
    CHECK(file_bytes(out) == file_bytes(src));
  }
}

TEST_CASE("npy writer: every valid fixture round-trips through gradcodec", "[npy]") {
  TempDir tmp;
  json m = manifest("npy");
  std::vector<std::string> pairs = {"same"};  // one numpy run checks them all
  for (const auto& [rel, e] : m.at("valid").items()) {
    INFO(rel);
    std::string out = tmp / fs::path(rel).filename().string();
    auto w = gf::create_snapshot(out, false);
    w->add(gf::open_snapshot(fixture("npy/" + rel))->read(0));
    w->finish();
    pairs.push_back(out);
    pairs.push_back(fixture("npy/" + rel));
  }
  REQUIRE(pairs.size() > 80);
  CHECK(run_checker(pairs) == 0);
}

TEST_CASE("npy writer: refusals leave nothing behind", "[npy]") {
  TempDir tmp;
  Tensor t = make_tensor("x", DType::F32, {2}, bytes_of(std::vector<float>{1, 2}), false, "");
  std::string path = tmp / "x.npy";

  SECTION("not finished: no file, no temporary") {
    {
      auto w = gf::create_snapshot(path, false);
      w->add(t);
    }
    CHECK(tmp.entries().empty());
  }
  SECTION("existing file") {
    std::ofstream(path) << "old";
    Error e = error_of([&] { gf::create_snapshot(path, false); });
    CHECK(e.code() == ErrorCode::Usage);
    CHECK(std::string(e.what()).find(path) == 0);
    CHECK(file_bytes(path) == std::vector<uint8_t>{'o', 'l', 'd'});
    auto w = gf::create_snapshot(path, true);
    w->add(t);
    w->finish();
    CHECK(file_bytes(path).size() == 128 + 8);
  }
  SECTION("one tensor only, and at least one") {
    auto w = gf::create_snapshot(path, false);
    CHECK(error_of([&] { w->finish(); }).code() == ErrorCode::Usage);
    w->add(t);
    Error e = error_of([&] { w->add(t); });
    CHECK(e.code() == ErrorCode::Usage);
    CHECK(std::string(e.what()).find(path) == 0);
  }
  SECTION("tensors NPY cannot hold, or that contradict themselves") {
    auto w = gf::create_snapshot(path, false);
    CHECK(error_of([&] { w->add(make_tensor("o", DType::Other, {1}, {1}, false, "")); }).code() ==
          ErrorCode::Usage);
    CHECK(error_of([&] { w->add(make_tensor("o", DType::Other, {1}, {1}, false, "<q7")); }).code() ==
          ErrorCode::Usage);
    CHECK(error_of([&] { w->add(make_tensor("o", DType::Other, {1}, {1}, false, "'<i1'), 'x': ('")); })
              .code() == ErrorCode::Usage);
    CHECK(error_of([&] { w->add(make_tensor("o", DType::Other, {3}, {1, 2}, false, "|u1")); }).code() ==
          ErrorCode::Internal);
    CHECK(error_of([&] { w->add(make_tensor("f", DType::F32, {3}, {1, 2}, false, "")); }).code() ==
          ErrorCode::Internal);
    w->add(t);  // nothing was written by the refused ones
    w->finish();
    CHECK(check_expect(path, "npy", json::array({expect_entry("x", "<f4", {2}, bytes_of(std::vector<float>{1, 2}))}),
                       tmp / "spec.json") == 0);
  }
}

TEST_CASE("npy directory writer: names stay inside, nothing is clobbered", "[npy]") {
  TempDir tmp;
  std::string dir = tmp / "out";
  Tensor t = make_tensor("a", DType::F32, {1}, bytes_of(std::vector<float>{1}), false, "");

  SECTION("names that would escape the directory") {
    auto w = gf::create_snapshot(dir + "/", false);
    for (const char* bad : {"../evil", "a/b", ".", "..", ""}) {
      INFO(bad);
      Tensor b = t;
      b.info.name = bad;
      Error e = error_of([&] { w->add(b); });
      CHECK(e.code() == ErrorCode::Usage);
      CHECK(std::string(e.what()).find(dir) == 0);
    }
    w->add(t);
    CHECK(error_of([&] { w->add(t); }).code() == ErrorCode::Usage);  // duplicate name
    w->finish();
    CHECK(tmp.entries() == std::vector<std::string>{"out"});
    std::vector<std::string> files;
    for (const auto& d : fs::directory_iterator(dir)) files.push_back(d.path().filename().string());
    CHECK(files == std::vector<std::string>{"a.npy"});
  }
  SECTION("an existing file is refused without overwrite, replaced with it") {
    fs::create_directories(dir);
    std::ofstream(dir + "/a.npy") << "old";
    auto w = gf::create_snapshot(dir, false);  // an existing directory
    Error e = error_of([&] { w->add(t); });
    CHECK(e.code() == ErrorCode::Usage);
    CHECK(std::string(e.what()).find(dir + "/a.npy") == 0);
    auto w2 = gf::create_snapshot(dir, true);
    w2->add(t);
    w2->finish();
    CHECK(file_bytes(dir + "/a.npy").size() == 128 + 4);
  }
  SECTION("not finished: the directory it created is gone") {
    {
      auto w = gf::create_snapshot(dir + "/", false);
      w->add(t);
    }
    CHECK(tmp.entries().empty());
  }
  SECTION("not finished: files already there are untouched") {
    fs::create_directories(dir);
    std::ofstream(dir + "/a.npy") << "old";
    {
      auto w = gf::create_snapshot(dir, true);
      w->add(t);
    }
    CHECK(file_bytes(dir + "/a.npy") == std::vector<uint8_t>{'o', 'l', 'd'});
    CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);
  }
}
