// SPDX-License-Identifier: BSD-3-Clause
// HDF5 reader and writer: fixtures written by h5py (tests/fixtures/fixtures_hdf5.py, expectations
// in <fixtures>/hdf5/expected.json) and files written by gradcodec checked by h5py
// (tests/fixtures/hdf5_check_written.py).
#include <catch2/catch.hpp>

#include <gradcodec/error.hpp>
#include <gradcodec/file_io.hpp>
#include <gradcodec/formats/snapshot_io.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <vector>

using gradcodec::Buffer;
using gradcodec::DType;
using gradcodec::Error;
using gradcodec::ErrorCode;
using gradcodec::Tensor;
using gradcodec::TensorInfo;
using gradcodec::formats::Format;
using gradcodec::formats::SnapshotReader;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kDir = std::string(GRADCODEC_FIXTURE_DIR) + "/hdf5";

const json& expected() {
  static const json j = [] {
    std::ifstream in(kDir + "/expected.json");
    REQUIRE(in.good());
    return json::parse(in);
  }();
  return j;
}

std::string hex(const uint8_t* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  s.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}
std::string hex(const Buffer& b) { return hex(b.data(), b.size()); }

std::string dtype_key(const TensorInfo& info) { return gradcodec::dtype_name(info.dtype); }

// Opens through standard input: the reader gets an in-memory image named "<stdin>".
std::unique_ptr<SnapshotReader> open_via_stdin(const std::string& path) {
  REQUIRE(std::freopen(path.c_str(), "rb", stdin) != nullptr);
  return gradcodec::formats::open_snapshot("-");
}

std::unique_ptr<SnapshotReader> open_either(const std::string& path, bool via_stdin) {
  return via_stdin ? open_via_stdin(path) : gradcodec::formats::open_snapshot(path);
}

void check_one_line(const Error& e) { CHECK(std::string(e.what()).find('\n') == std::string::npos); }

void check_against_expectations(const std::string& file, const json& arrays, bool via_stdin) {
  INFO(file << (via_stdin ? " (stdin)" : " (path)"));
  auto r = open_either(kDir + "/" + file, via_stdin);
  CHECK(r->format() == Format::Hdf5);
  CHECK(r->path() == (via_stdin ? std::string("<stdin>") : kDir + "/" + file));
  const auto& infos = r->arrays();
  REQUIRE(infos.size() == arrays.size());
  for (size_t i = 0; i < infos.size(); ++i) {
    const json& e = arrays[i];
    const TensorInfo& info = infos[i];
    INFO("array " << i << ": " << e["name"].get<std::string>());
    CHECK(info.name == e["name"].get<std::string>());
    CHECK(dtype_key(info) == (e["dtype"] == "other" ? std::string("other") : e["dtype"].get<std::string>()));
    CHECK(info.descr == e["descr"].get<std::string>());
    CHECK(info.shape == e["shape"].get<std::vector<uint64_t>>());
    CHECK(info.big_endian == e["big_endian"].get<bool>());
    if (e.contains("error")) {
      try {
        (void)r->read(i);
        FAIL("read() should have failed");
      } catch (const Error& err) {
        CHECK(err.code() == ErrorCode::Input);
        std::string msg = err.what();
        CHECK_THAT(msg, Catch::Contains(e["error"].get<std::string>()));
        CHECK_THAT(msg, Catch::Contains("/" + [&] {
                     std::string n = e["name"].get<std::string>();
                     std::replace(n.begin(), n.end(), '.', '/');
                     return n;
                   }()));
        CHECK_THAT(msg, Catch::StartsWith(r->path() + ": "));
        check_one_line(err);
      }
    } else {
      Tensor t = r->read(i);
      CHECK(t.info.name == info.name);
      CHECK(t.info.shape == info.shape);
      CHECK(t.info.dtype == info.dtype);
      CHECK(hex(t.data) == e["hex"].get<std::string>());
    }
  }
}

// ---- writer helpers ----

template <typename T>
Buffer bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return Buffer(std::move(b));
}

Tensor make(const std::string& name, DType d, std::vector<uint64_t> shape, Buffer data, std::string descr = "",
            bool big_endian = false) {
  Tensor t;
  t.info.name = name;
  t.info.dtype = d;
  t.info.shape = std::move(shape);
  t.info.descr = std::move(descr);
  t.info.big_endian = big_endian;
  t.data = std::move(data);
  return t;
}

// The expectation entry for the checker: data as little-endian bytes.
json expect_entry(const Tensor& t, const std::string& le_hex) {
  return json{{"name", t.name()},
              {"dtype", gradcodec::dtype_name(t.dtype())},
              {"descr", t.info.descr},
              {"shape", t.shape()},
              {"big_endian", t.info.big_endian},
              {"hex", le_hex}};
}
json expect_entry(const Tensor& t) { return expect_entry(t, hex(t.data)); }

fs::path scratch(const std::string& name) {
  fs::path p = fs::path(GRADCODEC_FIXTURE_DIR) / "hdf5_written" / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

int run_checker(const fs::path& h5, const json& expect) {
  fs::path ej = h5;
  ej += ".expected.json";
  std::ofstream(ej) << expect.dump(1);
  std::string cmd = std::string("'") + GRADCODEC_PYTHON + "' '" + GRADCODEC_SOURCE_DIR +
                    "/tests/fixtures/hdf5_check_written.py' '" + h5.string() + "' '" + ej.string() + "'";
  int rc = std::system(cmd.c_str());
  if (rc == -1) return -1;
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

void write_all(const fs::path& out, const std::vector<Tensor>& ts, bool overwrite = false) {
  auto w = gradcodec::formats::create_snapshot(out.string(), overwrite);
  for (const auto& t : ts) w->add(t);
  w->finish();
}

std::vector<std::string> dir_entries(const fs::path& d) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(d)) v.push_back(e.path().filename().string());
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

TEST_CASE("hdf5: fixtures read by path match h5py's view", "[hdf5]") {
  for (const auto& [file, arrays] : expected()["files"].items()) check_against_expectations(file, arrays, false);
}

TEST_CASE("hdf5: fixtures read from standard input (memory image) match h5py's view", "[hdf5]") {
  for (const auto& [file, arrays] : expected()["files"].items()) check_against_expectations(file, arrays, true);
}

TEST_CASE("hdf5: nested groups are named with dots, in h5py's order", "[hdf5]") {
  auto r = gradcodec::formats::open_snapshot(kDir + "/nested.h5");
  std::vector<std::string> names;
  for (const auto& a : r->arrays()) names.push_back(a.name);
  // By name, depth first: "10" sorts before "2"; the group a/ comes before a_b; the hard link
  // zz_alias to /top is listed once; soft and external links and empty groups are not arrays.
  CHECK(names == std::vector<std::string>{"a.b", "a_b", "layer1.0.bn.running_mean", "layer1.0.conv1.bias",
                                          "layer1.0.conv1.weight", "layer1.10.x", "layer1.2.x", "top"});
  // Every link not read under its own name is named: the second hard link too (it was dropped
  // without a word, and decode writes only /top).
  CHECK(r->notes() ==
        std::vector<std::string>{"external link /external_link is not followed (other files are never opened)",
                                 "soft link /soft_link -> /top is not followed (a dataset it names is read under its own name)",
                                 "hard link /zz_alias names the same dataset as /top, which is read once, under that name"});
}

TEST_CASE("hdf5: a group reachable through two hard links is read once, and the other name is noted", "[hdf5]") {
  auto r = gradcodec::formats::open_snapshot(kDir + "/group_alias.h5");
  std::vector<std::string> names;
  for (const auto& a : r->arrays()) names.push_back(a.name);
  CHECK(names == std::vector<std::string>{"a.w"});
  CHECK(r->notes() == std::vector<std::string>{
                          "hard link /b names the same group as /a, whose datasets are read once, under that name"});
}

TEST_CASE("hdf5: scalar, empty and H5S_NULL datasets", "[hdf5]") {
  auto r = gradcodec::formats::open_snapshot(kDir + "/scalar_empty.h5");
  for (size_t i = 0; i < r->arrays().size(); ++i) {
    const auto& a = r->arrays()[i];
    Tensor t = r->read(i);
    if (a.name == "scalar_f32") {
      REQUIRE(t.data.size() == 4);
      float v;
      std::memcpy(&v, t.data.data(), 4);
      CHECK(v == 3.5f);
      CHECK(a.shape.empty());
    }
    CHECK(a.name.rfind("null_", 0) != 0);  // a null dataspace is no array (it was read as shape [0])
    if (a.name == "empty_3d") {
      CHECK(a.shape == std::vector<uint64_t>{3, 0, 2});
      CHECK(t.data.empty());
    }
  }
  // h5py.Empty has no shape: skipped, and each one named in the notes the CLI shows as warnings.
  CHECK(r->notes() == std::vector<std::string>{
                          "skipping dataset /null_f4: its dataspace is null (h5py.Empty), which has no shape and no data",
                          "skipping dataset /null_i2: its dataspace is null (h5py.Empty), which has no shape and no data"});
}

TEST_CASE("hdf5: corrupt files give one-line input errors, never a crash", "[hdf5]") {
  for (bool via_stdin : {false, true}) {
    for (const auto& [file, e] : expected()["corrupt"].items()) {
      std::string path = kDir + "/corrupt/" + file;
      INFO(file << (via_stdin ? " (stdin)" : " (path)"));
      std::string stage = e["stage"];
      std::string want = e["message"];
      std::string shown = via_stdin ? "<stdin>" : path;
      try {
        auto r = open_either(path, via_stdin);
        CHECK(stage == "read");
        bool failed = false;
        for (size_t i = 0; i < r->arrays().size(); ++i) {
          try {
            (void)r->read(i);
          } catch (const Error& err) {
            failed = true;
            CHECK(err.code() == ErrorCode::Input);
            CHECK_THAT(std::string(err.what()), Catch::StartsWith(shown + ": dataset /"));
            CHECK_THAT(std::string(err.what()), Catch::Contains(want));
            check_one_line(err);
          }
        }
        CHECK(failed);
      } catch (const Error& err) {
        CHECK(stage == "open");
        CHECK(err.code() == ErrorCode::Input);
        CHECK_THAT(std::string(err.what()), Catch::StartsWith(shown + ": "));
        CHECK_THAT(std::string(err.what()), Catch::Contains(want));
        check_one_line(err);
      }
    }
  }
}

TEST_CASE("hdf5: concurrent readers in several threads are safe", "[hdf5]") {
  const json& files = expected()["files"];
  std::vector<std::string> names = {"chunked.h5", "mixed.h5", "endian.h5", "nested.h5"};
  std::vector<int> bad(names.size() * 2, 0);
  std::vector<std::thread> threads;
  for (size_t k = 0; k < names.size() * 2; ++k) {
    threads.emplace_back([&, k] {
      const std::string& file = names[k % names.size()];
      const json& arrays = files[file];
      try {
        for (int rep = 0; rep < 5; ++rep) {
          auto r = gradcodec::formats::open_snapshot(kDir + "/" + file);
          for (size_t i = 0; i < r->arrays().size(); ++i) {
            if (arrays[i].contains("error")) continue;
            if (hex(r->read(i).data) != arrays[i]["hex"].get<std::string>()) ++bad[k];
          }
        }
      } catch (...) {
        ++bad[k];
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int b : bad) CHECK(b == 0);
}

TEST_CASE("hdf5: writer output is read back identically by h5py", "[hdf5]") {
  fs::path dir = scratch("values");
  std::vector<Tensor> ts;
  json expect = json::array();
  auto add = [&](Tensor t, std::string le_hex = "") {
    expect.push_back(le_hex.empty() ? expect_entry(t) : expect_entry(t, le_hex));
    ts.push_back(std::move(t));
  };
  // Floats with special bit patterns: quiet and signalling NaNs with payloads, ±Inf, -0, subnormals.
  std::vector<uint32_t> f32 = {0x3F800000, 0x7FC00001, 0xFFC12345, 0x7F800001, 0xFF800000, 0x7F800000,
                               0x80000000, 0x00000001, 0x7F7FFFFF, 0xC0490FDB, 0x12345678, 0xBF000000};
  std::vector<uint16_t> f16 = {0x3C00, 0x7E01, 0x7D01, 0xFC00, 0x8000, 0x0001, 0x7BFF, 0xC248};
  std::vector<uint16_t> bf16 = {0x3F80, 0x4049, 0x7FC1, 0x7F81, 0xFF80, 0x8000, 0x0001, 0x7F7F};
  std::vector<uint64_t> f64 = {0x3FF0000000000000, 0x7FF8000000000123, 0x7FF0000000000001, 0xFFF0000000000000,
                               0x8000000000000000, 0x0000000000000001};
  add(make("layer1.0.conv1.weight", DType::F32, {3, 4}, bytes_of(f32)));
  add(make("layer1.0.conv1.bias", DType::F16, {8}, bytes_of(f16)));
  add(make("layer1.1.bf", DType::BF16, {2, 4}, bytes_of(bf16)));
  add(make("layer2.w64", DType::F64, {6}, bytes_of(f64)));
  add(make("be.f32", DType::F32, {12}, bytes_of(f32), "<f4", true));
  add(make("be.f16", DType::F16, {8}, bytes_of(f16), "<f2", true));
  add(make("be.bf16", DType::BF16, {8}, bytes_of(bf16), "", true));
  add(make("be.f64", DType::F64, {3, 2}, bytes_of(f64), "<f8", true));
  add(make("scalar", DType::F32, {}, bytes_of(std::vector<float>{2.5f})));
  // Names with an empty part: one dataset of that name in the root group, read back as it was.
  add(make(".hidden", DType::F32, {1}, bytes_of(std::vector<float>{1.5f})));
  add(make("layer1..odd", DType::F32, {1}, bytes_of(std::vector<float>{-1.5f})));
  add(make("trailing.", DType::F32, {1}, bytes_of(std::vector<float>{3.f})));
  add(make("empty.a", DType::F32, {0}, Buffer()));
  add(make("empty.b", DType::F64, {2, 0, 3}, Buffer()));
  // Pass-through dtypes.
  add(make("step", DType::Other, {}, bytes_of(std::vector<int64_t>{1234}), "<i8"));
  add(make("ints.i1", DType::Other, {3}, bytes_of(std::vector<int8_t>{-128, 0, 127}), "|i1"));
  add(make("ints.u2", DType::Other, {2}, bytes_of(std::vector<uint16_t>{1, 65535}), "<u2"));
  add(make("ints.u4_be", DType::Other, {2}, bytes_of(std::vector<uint32_t>{1, 0xDEADBEEF}), "<u4", true));
  // Big-endian bytes described as such (as an .npy of dtype >i4 would hold them).
  {
    Tensor t = make("ints.i4_descr_be", DType::Other, {2},
                    Buffer(std::vector<uint8_t>{0, 0, 0, 1, 0xFF, 0xFF, 0xFF, 0xFE}), ">i4");
    json e = expect_entry(t, "01000000feffffff");
    e["descr"] = "<i4";
    e["big_endian"] = true;
    expect.push_back(e);
    ts.push_back(std::move(t));
  }
  add(make("mask", DType::Other, {2, 2}, bytes_of(std::vector<uint8_t>{1, 0, 0, 1}), "|b1"));
  add(make("c8", DType::Other, {2}, bytes_of(std::vector<float>{1.f, 2.f, -0.5f, 0.25f}), "<c8"));
  add(make("c16_be", DType::Other, {1}, bytes_of(std::vector<double>{3.0, -4.0}), "<c16", true));
  add(make("label", DType::Other, {2}, Buffer(std::vector<uint8_t>{'h', 'e', 'l', 'l', 'o', 'h', 'i', 0, 0, 0}),
           "|S5"));
  {
    std::vector<uint8_t> rec(2 * (4 + 16));
    for (size_t i = 0; i < rec.size(); ++i) rec[i] = static_cast<uint8_t>(i * 13 + 1);
    add(make("record", DType::Other, {2}, Buffer(rec), "[('a', '<i4'), ('b', '<f8', (2,))]"));
  }
  write_all(dir / "out.h5", ts);
  CHECK(run_checker(dir / "out.h5", expect) == 0);

  // And our reader gets the same tensors back (in h5py's name order).
  auto r = gradcodec::formats::open_snapshot((dir / "out.h5").string());
  REQUIRE(r->arrays().size() == ts.size());
  for (size_t i = 0; i < r->arrays().size(); ++i) {
    const auto& info = r->arrays()[i];
    auto it = std::find_if(expect.begin(), expect.end(), [&](const json& e) { return e["name"] == info.name; });
    REQUIRE(it != expect.end());
    INFO(info.name);
    CHECK(gradcodec::dtype_name(info.dtype) == (*it)["dtype"].get<std::string>());
    CHECK(info.shape == (*it)["shape"].get<std::vector<uint64_t>>());
    CHECK(info.big_endian == (*it)["big_endian"].get<bool>());
    if (info.dtype == DType::Other) CHECK(info.descr == (*it)["descr"].get<std::string>());
    CHECK(hex(r->read(i).data) == (*it)["hex"].get<std::string>());
  }
}

TEST_CASE("hdf5: every readable fixture array survives a write and a re-read", "[hdf5]") {
  fs::path dir = scratch("roundtrip");
  for (const auto& [file, arrays] : expected()["files"].items()) {
    INFO(file);
    auto r = gradcodec::formats::open_snapshot(kDir + "/" + file);
    std::vector<Tensor> ts;
    json expect = json::array();
    for (size_t i = 0; i < r->arrays().size(); ++i) {
      if (arrays[i].contains("error")) continue;
      ts.push_back(r->read(i));
      expect.push_back(expect_entry(ts.back()));
    }
    fs::path out = dir / file;
    write_all(out, ts);
    CHECK(run_checker(out, expect) == 0);
    auto back = gradcodec::formats::open_snapshot(out.string());
    REQUIRE(back->arrays().size() == ts.size());
    for (size_t i = 0; i < ts.size(); ++i) {
      const auto& a = back->arrays()[i];
      auto it = std::find_if(ts.begin(), ts.end(), [&](const Tensor& t) { return t.name() == a.name; });
      REQUIRE(it != ts.end());
      INFO(a.name);
      CHECK(a.dtype == it->dtype());
      CHECK(a.descr == it->info.descr);
      CHECK(a.shape == it->shape());
      CHECK(a.big_endian == it->info.big_endian);
      CHECK(hex(back->read(i).data) == hex(it->data));
    }
  }
}

TEST_CASE("hdf5: writer refuses names that collide as groups and datasets", "[hdf5]") {
  fs::path dir = scratch("conflicts");
  Tensor one = make("x", DType::F32, {1}, bytes_of(std::vector<float>{1.f}));
  auto expect_usage = [&](std::vector<std::string> names, std::vector<std::string> mentioned) {
    auto w = gradcodec::formats::create_snapshot((dir / "c.h5").string(), true);
    try {
      for (const auto& n : names) {
        Tensor t = one;
        t.info.name = n;
        w->add(t);
      }
      FAIL("add() should have refused");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Usage);
      for (const auto& m : mentioned) CHECK_THAT(std::string(e.what()), Catch::Contains("'" + m + "'"));
      check_one_line(e);
    }
  };
  expect_usage({"a", "a.b"}, {"a", "a.b"});
  expect_usage({"a.b.c", "a.b"}, {"a.b", "a.b.c"});
  expect_usage({"dup", "dup"}, {"dup"});
  expect_usage({"p.q", "p/q"}, {"p.q", "p/q"});
  // Empty parts with a '/' (no literal name can hold them), and names HDF5 reserves.
  expect_usage({"a/.b"}, {"a/.b"});
  expect_usage({"/lead"}, {"/lead"});
  expect_usage({"."}, {"."});
  expect_usage({".."}, {".."});
  expect_usage({""}, {""});
  // A literal root name colliding with a nested one is still one name per path.
  expect_usage({"a..b", "a..b"}, {"a..b"});
  // Nothing was committed by the failed writers.
  CHECK_FALSE(fs::exists(dir / "c.h5"));
  CHECK(dir_entries(dir).empty());
}

TEST_CASE("hdf5: writer refuses dtypes it cannot map, naming tensor and descr", "[hdf5]") {
  fs::path dir = scratch("bad_dtypes");
  for (std::string descr : {"|O", "<M8[ns]", "<U3", "[('a', '<i4')", "<i3", "{'names': ['a']}"}) {
    INFO(descr);
    auto w = gradcodec::formats::create_snapshot((dir / "d.h5").string(), false);
    Tensor t = make("obj", DType::Other, {1}, Buffer(std::vector<uint8_t>(8)), descr);
    try {
      w->add(t);
      FAIL("add() should have refused");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Usage);
      CHECK_THAT(std::string(e.what()), Catch::Contains("'obj'"));
      CHECK_THAT(std::string(e.what()), Catch::Contains(descr));
    }
  }
  CHECK(dir_entries(dir).empty());
}

TEST_CASE("hdf5: writer output is atomic and never clobbers without overwrite", "[hdf5]") {
  fs::path dir = scratch("atomic");
  fs::path out = dir / "snap.h5";
  Tensor a = make("a", DType::F32, {2}, bytes_of(std::vector<float>{1.f, 2.f}));
  Tensor b = make("b", DType::F32, {1}, bytes_of(std::vector<float>{3.f}));

  {  // abandoned before finish(): nothing left behind
    auto w = gradcodec::formats::create_snapshot(out.string(), false);
    w->add(a);
  }
  CHECK(dir_entries(dir).empty());

  write_all(out, {a});
  CHECK(dir_entries(dir) == std::vector<std::string>{"snap.h5"});

  // Without overwrite an existing file is refused up front.
  try {
    write_all(out, {b});
    FAIL("should refuse to replace");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Usage);
  }
  // With overwrite the old file stays whole until finish() renames the new one over it.
  {
    auto w = gradcodec::formats::create_snapshot(out.string(), true);
    w->add(b);
    auto r = gradcodec::formats::open_snapshot(out.string());
    REQUIRE(r->arrays().size() == 1);
    CHECK(r->arrays()[0].name == "a");
    w->finish();
  }
  auto r = gradcodec::formats::open_snapshot(out.string());
  REQUIRE(r->arrays().size() == 1);
  CHECK(r->arrays()[0].name == "b");
  CHECK(dir_entries(dir) == std::vector<std::string>{"snap.h5"});
}

TEST_CASE("hdf5: bf16 written as a custom float is reported by h5py as float32 with exact values",
          "[hdf5]") {
  fs::path dir = scratch("bf16");
  std::vector<uint16_t> bits = {0x3F80, 0xC049, 0x7FC0, 0x0080};
  Tensor t = make("g.bf", DType::BF16, {4}, bytes_of(bits));
  auto w = gradcodec::formats::create_snapshot((dir / "bf.h5").string(), false);
  w->add(t);
  w->finish();
  auto warnings = w->take_warnings();
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains("'g.bf'"));
  CHECK_THAT(warnings[0], Catch::Contains("float32"));
  CHECK(run_checker(dir / "bf.h5", json::array({expect_entry(t)})) == 0);
}

TEST_CASE("hdf5: dataset names with control characters keep error messages on one line", "[hdf5]") {
  auto r = gradcodec::formats::open_snapshot(kDir + "/odd_names.h5");
  REQUIRE(r->arrays().size() == 2);
  CHECK(r->arrays()[0].name == "line\nbreak");  // the name itself is kept as the file has it
  CHECK(r->arrays()[1].name == "with space");
  try {
    (void)r->read(0);
    FAIL("variable-length data should not be readable");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Input);
    CHECK_THAT(std::string(e.what()), Catch::Contains("/line?break"));
    check_one_line(e);
  }
  CHECK(r->read(1).data.size() == 12);
}

TEST_CASE("hdf5: concurrent writers in several threads are safe", "[hdf5]") {
  fs::path dir = scratch("threads");
  std::vector<int> bad(4, 0);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      try {
        for (int rep = 0; rep < 5; ++rep) {
          std::vector<float> v(1000);
          for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(k * 10000 + rep * 1000 + static_cast<int>(i));
          std::string file = "t";  // (built stepwise: g++ 12 warns falsely on "lit" + to_string())
          file += std::to_string(k);
          file += "_";
          file += std::to_string(rep);
          fs::path out = dir / (file + ".h5");
          write_all(out, {make("g.w", DType::F32, {10, 100}, bytes_of(v)),
                          make("g.b", DType::F64, {2}, bytes_of(std::vector<double>{1.0 * k, 2.0 * rep}), "", true)});
          auto r = gradcodec::formats::open_snapshot(out.string());
          if (r->arrays().size() != 2 || hex(r->read(1).data) != hex(bytes_of(v))) ++bad[k];
        }
      } catch (...) {
        ++bad[static_cast<size_t>(k)];
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int b : bad) CHECK(b == 0);
}

TEST_CASE("hdf5: a file truncated after it was opened fails the read, naming the dataset, never zeros", "[hdf5]") {
  // libhdf5 reads what lies past the end of a file that shrank as zeros, without an error: the
  // reader must notice that the file is no longer the one it opened.
  fs::path dir = scratch("truncated_while_open");
  fs::path h5 = dir / "g.h5";
  std::vector<Tensor> ts;
  for (int k = 0; k < 4; ++k) {
    std::vector<float> v(4096);
    for (size_t i = 0; i < v.size(); ++i) v[i] = 1.0f + static_cast<float>(i % 97) + static_cast<float>(k);
    std::string name(1, 'w');  // (not "w" + std::to_string(k): GCC 12's false -Wstringop-overflow)
    name += std::to_string(k);
    ts.push_back(make(name, DType::F32, {4096}, bytes_of(v)));
  }
  write_all(h5, ts);
  auto r = gradcodec::formats::open_snapshot(h5.string());
  REQUIRE(r->arrays().size() == 4);
  Tensor first = r->read(0);  // unchanged file: read exactly
  CHECK(hex(first.data) == hex(ts[0].data));
  const auto size = fs::file_size(h5);
  fs::resize_file(h5, size / 2);  // the last datasets' data now lies past the end of the file
  const size_t last = r->arrays().size() - 1;
  try {
    Tensor t = r->read(last);
    FAIL("read " << t.data.size() << " bytes of a truncated file; all zero: "
                 << std::all_of(t.data.data(), t.data.data() + t.data.size(), [](uint8_t b) { return b == 0; }));
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Input);
    const std::string msg = e.what();
    CHECK_THAT(msg, Catch::StartsWith(h5.string() + ": dataset /" + r->arrays()[last].name + ": the file changed"));
    CHECK_THAT(msg, Catch::Contains(std::to_string(size) + " bytes when opened, " + std::to_string(size / 2) + " now"));
    check_one_line(e);
  }
}
