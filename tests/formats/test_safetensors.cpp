// SPDX-License-Identifier: BSD-3-Clause
// safetensors reader and writer. Fixtures come from tests/fixtures/fixtures_safetensors.py (hand
// written per the specification, numpy data); written files are verified by the independent strict
// checker tests/fixtures/safetensors_check.py.

#include <catch2/catch.hpp>

#include <gradcodec/error.hpp>
#include <gradcodec/file_io.hpp>
#include <gradcodec/formats/snapshot_io.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numbers>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;
using namespace gradcodec;
using namespace gradcodec::formats;
using nlohmann::json;

namespace {

const std::string kDir = std::string(GRADCODEC_FIXTURE_DIR) + "/safetensors/";
const std::string kChecker = std::string(GRADCODEC_SOURCE_DIR) + "/tests/fixtures/safetensors_check.py";

std::string hex(const Buffer& b) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < b.size(); ++i) {
    s += digits[b.data()[i] >> 4];
    s += digits[b.data()[i] & 15];
  }
  return s;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs the python checker; returns its exit status (-1 if it did not exit normally).
int run_checker(const std::string& file, const std::string& dump = "") {
  std::string cmd = std::string(GRADCODEC_PYTHON) + " " + shell_quote(kChecker) + " " + shell_quote(file);
  if (!dump.empty()) cmd += " --dump " + shell_quote(dump);
  cmd += " 2>/dev/null";
  int st = std::system(cmd.c_str());
  if (st == -1 || !WIFEXITED(st)) return -1;
  return WEXITSTATUS(st);
}

json load_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return json::parse(in);
}

// A fresh empty directory per test case.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    path = fs::temp_directory_path() /
           ("gradcodec-st-" + tag + "-" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

template <class T>
Buffer bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return Buffer(std::move(b));
}

Tensor make(const std::string& name, DType dt, std::vector<uint64_t> shape, Buffer data,
            const std::string& descr = "") {
  Tensor t;
  t.info.name = name;
  t.info.dtype = dt;
  t.info.descr = descr;
  t.info.shape = std::move(shape);
  t.data = std::move(data);
  return t;
}

float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
double f64_from_bits(uint64_t u) {
  double d;
  std::memcpy(&d, &u, 8);
  return d;
}

template <class T>
T element(const Tensor& t, size_t i) {
  T v;
  std::memcpy(&v, t.data.data() + i * sizeof(T), sizeof(T));
  return v;
}

const char* st_dtype_of(const TensorInfo& info) {
  switch (info.dtype) {
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::Other: break;
  }
  static const std::pair<const char*, const char*> map[] = {
      {"|b1", "BOOL"}, {"|u1", "U8"},  {"|i1", "I8"},  {"<u2", "U16"}, {"<i2", "I16"},
      {"<u4", "U32"},  {"<i4", "I32"}, {"<u8", "U64"}, {"<i8", "I64"}, {"<c8", "C64"},
      {"[('F8_E5M2', '|V1')]", "F8_E5M2"}, {"[('F8_E4M3', '|V1')]", "F8_E4M3"},
      {"[('F8_E8M0', '|V1')]", "F8_E8M0"}};
  for (auto& [d, n] : map)
    if (info.descr == d) return n;
  return "?";
}

// Compares a reader's arrays and data with expected.json's entry for the file.
void check_against_expected(const std::string& fname) {
  json exp = load_json(kDir + "expected.json").at(fname);
  auto r = open_snapshot(kDir + fname);
  REQUIRE(r->format() == Format::Safetensors);
  REQUIRE(r->path() == kDir + fname);
  const auto& arrays = r->arrays();
  REQUIRE(arrays.size() == exp.size());
  for (size_t i = 0; i < arrays.size(); ++i) {
    INFO(fname << " tensor " << i);
    CHECK(arrays[i].name == exp[i].at("name").get<std::string>());
    CHECK(std::string(st_dtype_of(arrays[i])) == exp[i].at("dtype").get<std::string>());
    CHECK(arrays[i].shape == exp[i].at("shape").get<std::vector<uint64_t>>());
    CHECK_FALSE(arrays[i].big_endian);
    Tensor t = r->read(i);
    CHECK(t.info.name == arrays[i].name);
    CHECK(t.info.shape == arrays[i].shape);
    CHECK(t.data.size() == exp[i].at("hex").get<std::string>().size() / 2);
    CHECK(hex(t.data) == exp[i].at("hex").get<std::string>());
  }
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Reading well-formed files

TEST_CASE("safetensors: floats F16/BF16/F32/F64 in data-offset order", "[safetensors]") {
  check_against_expected("floats.safetensors");
  auto r = open_snapshot(kDir + "floats.safetensors");
  const auto& a = r->arrays();
  // header order is a.f64, b.bf16, c.f32, d.f16; offsets are c, a, d, b
  REQUIRE(a.size() == 4);
  CHECK(a[0].name == "c.f32");
  CHECK(a[0].dtype == DType::F32);
  CHECK(a[0].shape == std::vector<uint64_t>{3, 4});
  CHECK(a[1].name == "a.f64");
  CHECK(a[1].dtype == DType::F64);
  CHECK(a[2].name == "d.f16");
  CHECK(a[2].dtype == DType::F16);
  CHECK(a[3].name == "b.bf16");
  CHECK(a[3].dtype == DType::BF16);

  Tensor f32 = r->read(0);
  CHECK(element<float>(f32, 0) == -1.0f);
  CHECK(element<float>(f32, 5) == 1.5f);
  CHECK(std::isnan(element<float>(f32, 9)));
  CHECK(element<float>(f32, 10) == std::numeric_limits<float>::infinity());
  CHECK(element<float>(f32, 11) == -std::numeric_limits<float>::infinity());
  Tensor f64 = r->read(1);
  CHECK(element<double>(f64, 0) == std::numbers::pi);
  CHECK(element<double>(f64, 2) == f64_from_bits(1));  // smallest subnormal
  Tensor f16 = r->read(2);
  CHECK(element<uint16_t>(f16, 0) == 0x3C00);  // 1.0
  CHECK(element<uint16_t>(f16, 3) == 0x7BFF);  // 65504
  CHECK(element<uint16_t>(f16, 5) == 0x8000);  // -0.0
  Tensor bf = r->read(3);
  CHECK(element<uint16_t>(bf, 0) == 0x3F80);  // 1.0
  CHECK(element<uint16_t>(bf, 1) == 0xC020);  // -2.5
  CHECK(element<uint16_t>(bf, 2) == 0x3DCD);  // 0.1 rounded to nearest even
  CHECK(element<uint16_t>(bf, 4) == 0x7F80);  // +inf
  CHECK(std::isnan(f32_from_bits(uint32_t{element<uint16_t>(bf, 6)} << 16)));
}

TEST_CASE("safetensors: 0-d and empty tensors", "[safetensors]") {
  check_against_expected("scalar_empty.safetensors");
  auto r = open_snapshot(kDir + "scalar_empty.safetensors");
  const auto& a = r->arrays();
  REQUIRE(a.size() == 4);
  CHECK(a[0].name == "scalar");
  CHECK(a[0].shape.empty());
  CHECK(a[0].elements() == 1);
  CHECK(element<float>(r->read(0), 0) == 7.25f);
  // two empty tensors at the same offset keep their header order
  CHECK(a[1].name == "empty_b");
  CHECK(a[1].elements() == 0);
  CHECK(r->read(1).data.size() == 0);
  CHECK(a[2].name == "empty_a");
  CHECK(a[2].shape == std::vector<uint64_t>{3, 0});
  CHECK(a[2].dtype == DType::F16);
  CHECK(r->read(2).data.empty());
  CHECK(a[3].name == "vec");
}

TEST_CASE("safetensors: an I64 step counter beside floats is listed as Other", "[safetensors]") {
  check_against_expected("step_counter.safetensors");
  auto r = open_snapshot(kDir + "step_counter.safetensors");
  const auto& a = r->arrays();
  REQUIRE(a.size() == 3);
  CHECK(a[2].name == "step");
  CHECK(a[2].dtype == DType::Other);
  CHECK(a[2].descr == "<i8");
  CHECK(a[2].shape.empty());
  CHECK(element<int64_t>(r->read(2), 0) == 1234);
  CHECK(is_float(a[0].dtype));
  CHECK(is_float(a[1].dtype));
}

TEST_CASE("safetensors: padded and unpadded headers", "[safetensors]") {
  check_against_expected("padded.safetensors");
  check_against_expected("unpadded.safetensors");
  // the unpadded file's data is misaligned in the map: read() hands out aligned data
  auto r = open_snapshot(kDir + "unpadded.safetensors");
  Tensor w = r->read(0);
  Tensor x = r->read(1);
  CHECK(reinterpret_cast<uintptr_t>(w.data.data()) % 4 == 0);
  CHECK(reinterpret_cast<uintptr_t>(x.data.data()) % 8 == 0);
  CHECK(element<float>(w, 2) == 3.0f);
  CHECK(element<double>(x, 0) == -1.0);
}

TEST_CASE("safetensors: __metadata__ and non-ASCII names", "[safetensors]") {
  check_against_expected("metadata.safetensors");
  auto r = open_snapshot(kDir + "metadata.safetensors");
  REQUIRE(r->arrays().size() == 2);
  CHECK(r->arrays()[0].name == "enc.\xE5\xB1\xA4" "0.weight");
  // The metadata in file order, values as they are (UTF-8 kept).
  using KV = std::pair<std::string, std::string>;
  CHECK(r->metadata() == std::vector<KV>{{"format", "pt"}, {"step", "42"}, {"note", "gradients \xE2\x80\x93 \xE2\x88\x87"}});
  CHECK(open_snapshot(kDir + "scalar_empty.safetensors")->metadata().empty());  // none in that file
}

TEST_CASE("safetensors: set_metadata replaces the default __metadata__, in the order given", "[safetensors]") {
  TempDir tmp("meta");
  const std::string out = tmp.file("m.safetensors");
  using KV = std::pair<std::string, std::string>;
  const std::vector<KV> meta{{"zeta", "1"}, {"alpha", "\xC3\xA9"}};
  {
    auto w = create_snapshot(out, false);
    w->set_metadata(meta);
    w->add(make("w", DType::F32, {2}, bytes_of(std::vector<float>{1.f, 2.f})));
    w->finish();
  }
  REQUIRE(run_checker(out, tmp.file("dump.json")) == 0);
  json d = load_json(tmp.file("dump.json"));
  CHECK(d.at("metadata") == json{{"zeta", "1"}, {"alpha", "\xC3\xA9"}});
  CHECK(open_snapshot(out)->metadata() == meta);  // and in the file's order
  // Not UTF-8: refused naming the key; after add(): a caller's bug.
  auto w = create_snapshot(tmp.file("bad.safetensors"), false);
  CHECK_THROWS_WITH(w->set_metadata({{"k", "\xFF"}}), Catch::Contains("__metadata__ entry 'k' is not valid UTF-8"));
  w->add(make("w", DType::F32, {1}, bytes_of(std::vector<float>{1.f})));
  CHECK_THROWS_AS(w->set_metadata(meta), Error);
}

TEST_CASE("safetensors: every non-floating dtype becomes Other with a numpy descr", "[safetensors]") {
  check_against_expected("others.safetensors");
  auto r = open_snapshot(kDir + "others.safetensors");
  std::vector<std::string> descrs;
  for (const auto& a : r->arrays()) {
    CHECK(a.dtype == DType::Other);
    descrs.push_back(a.descr);
  }
  CHECK(descrs == std::vector<std::string>{"|b1", "|u1", "|i1", "<u2", "<i2", "<u4", "<i4", "<u8",
                                           "<i8", "<c8", "[('F8_E5M2', '|V1')]",
                                           "[('F8_E4M3', '|V1')]", "[('F8_E8M0', '|V1')]"});
}

TEST_CASE("safetensors: a file without tensors", "[safetensors]") {
  auto r = open_snapshot(kDir + "no_tensors.safetensors");
  CHECK(r->arrays().empty());
}

TEST_CASE("safetensors: data outlives the reader, format detected by magic", "[safetensors]") {
  Tensor t;
  {
    auto r = open_snapshot(kDir + "step_counter.safetensors");
    t = r->read(0);
  }
  CHECK(element<float>(t, 3) == 2.0f);

  TempDir tmp("magic");
  fs::copy_file(kDir + "floats.safetensors", tmp.file("floats.bin"));
  auto r = open_snapshot(tmp.file("floats.bin"));
  CHECK(r->format() == Format::Safetensors);
  CHECK(r->arrays().size() == 4);
}

// ------------------------------------------------------------------------------------------------
// Corrupt and lying files

TEST_CASE("safetensors: corrupt and lying files are refused with Error Input", "[safetensors]") {
  struct Case {
    const char* file;
    const char* what;  // a fragment of the message
  };
  const Case cases[] = {
      {"bad_short.safetensors", "shorter than the 8-byte header size"},
      {"bad_header_beyond_eof.safetensors", "beyond the end of the file"},
      {"bad_header_cap.safetensors", "exceeds the 100 MB cap"},
      {"bad_header_huge.safetensors", "exceeds the 100 MB cap"},
      {"bad_offsets_beyond.safetensors", "beyond the data buffer"},
      {"bad_overlap.safetensors", "overlap tensor 'a'"},
      {"bad_hole.safetensors", "leave a hole of 4 bytes"},
      {"bad_trailing_bytes.safetensors", "cover 12 bytes of the 16-byte data buffer"},
      {"bad_not_from_zero.safetensors", "leave a hole of 4 bytes at buffer offset 0"},
      {"bad_end_before_begin.safetensors", "end before begin"},
      {"bad_shape_size.safetensors", "hold 16 bytes but F32 shape [3] needs 12"},
      {"bad_negative_dim.safetensors", "negative dimension"},
      {"bad_float_dim.safetensors", "non-integer dimension"},
      {"bad_nan_dim.safetensors", "invalid JSON"},
      {"bad_shape_overflow.safetensors", "too many elements"},
      {"bad_size_overflow.safetensors", "too many bytes"},
      {"bad_unknown_dtype.safetensors", "unknown dtype 'F128'"},
      {"bad_control_name.safetensors", "tensor 'w\\x0ax': unknown dtype 'F99'"},
      {"bad_missing_offsets.safetensors", "missing field 'data_offsets'"},
      {"bad_three_offsets.safetensors", "exactly 2 entries"},
      {"bad_dtype_type.safetensors", "dtype has the wrong type"},
      {"bad_entry_type.safetensors", "tensor 'w': entry is not an object"},
      {"bad_duplicate_key.safetensors", "duplicate key 'w'"},
      {"bad_duplicate_field.safetensors", "tensor 'w': duplicate key 'dtype'"},
      {"bad_duplicate_metadata.safetensors", "__metadata__ has a duplicate key 'a'"},
      {"bad_metadata_value.safetensors", "__metadata__ value of 'step' is not a string"},
      {"bad_metadata_type.safetensors", "__metadata__ is not an object"},
      {"bad_invalid_json.safetensors", "invalid JSON"},
      {"bad_trailing_garbage.safetensors", "invalid JSON"},
      {"bad_utf8.safetensors", "not valid UTF-8"},
      {"bad_lone_surrogate.safetensors", "invalid JSON"},
      {"bad_not_object.safetensors", "does not start with '{'"},
      {"bad_leading_space.safetensors", "does not start with '{'"},
      {"bad_empty_header.safetensors", "does not start with '{'"},
      {"bad_truncated.safetensors", "beyond the data buffer"},
      {"bad_truncated_header.safetensors", "beyond the end of the file"},
  };
  for (const Case& c : cases) {
    const std::string path = kDir + c.file;
    INFO(path);
    REQUIRE(fs::exists(path));
    try {
      auto r = open_snapshot(path);
      // nothing may be listed from a refused file
      FAIL("accepted: " << r->arrays().size() << " arrays");
    } catch (const Error& e) {
      const std::string msg = e.what();
      INFO(msg);
      CHECK(e.code() == ErrorCode::Input);
      CHECK(msg.rfind(path + ": ", 0) == 0);  // names the file
      CHECK(msg.find(c.what) != std::string::npos);
      CHECK(msg.find('\n') == std::string::npos);  // one line
    }
  }
}

TEST_CASE("safetensors: the python checker accepts the good fixtures and refuses the bad ones",
          "[safetensors]") {
  for (const auto& entry : fs::directory_iterator(kDir)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".safetensors") continue;
    INFO(name);
    const bool bad = name.rfind("bad_", 0) == 0;
    CHECK(run_checker(entry.path().string()) == (bad ? 1 : 0));
  }
}

// ------------------------------------------------------------------------------------------------
// Writing

namespace {

struct Written {
  Tensor in;                 // what was added
  std::string st_dtype;      // expected safetensors dtype
  std::string file_hex;      // expected bytes in the file
  std::string read_descr;    // descr expected when read back
};

std::vector<Written> writer_cases() {
  std::vector<Written> w;
  auto add = [&](Tensor t, const std::string& st, std::string file_hex = "", std::string descr = "-") {
    Written x;
    x.file_hex = file_hex.empty() ? hex(t.data) : file_hex;
    x.read_descr = descr == "-" ? t.info.descr : descr;
    x.in = std::move(t);
    x.st_dtype = st;
    w.push_back(std::move(x));
  };
  // F32 with NaN (quiet, with payload, negative), infinities, -0, a subnormal
  add(make("layer1.weight", DType::F32, {2, 4},
           bytes_of(std::vector<uint32_t>{0x3F800000, 0x7FC00000, 0x7FC00001, 0xFFC00000, 0x7F800000,
                                          0xFF800000, 0x80000000, 0x00000001})),
      "F32");
  add(make("layer1.bias", DType::F16, {3}, bytes_of(std::vector<uint16_t>{0x7E00, 0xFC00, 0x3555})), "F16");
  add(make("emb", DType::BF16, {2, 2}, bytes_of(std::vector<uint16_t>{0xFFC1, 0x7F80, 0x3F80, 0x0001})),
      "BF16");
  add(make("head", DType::F64, {2},
           bytes_of(std::vector<uint64_t>{0x7FF8000000000123ull, 0xFFF0000000000000ull})),
      "F64");
  add(make("scalar", DType::F32, {}, bytes_of(std::vector<float>{-3.5f})), "F32");
  add(make("empty", DType::F32, {0, 4}, Buffer()), "F32");
  add(make("step", DType::Other, {}, bytes_of(std::vector<int64_t>{1234}), "<i8"), "I64");
  add(make("mask", DType::Other, {3}, bytes_of(std::vector<uint8_t>{1, 0, 1}), "|b1"), "BOOL");
  add(make("fp8", DType::Other, {4}, bytes_of(std::vector<uint8_t>{0x38, 0x7F, 0x80, 0x01}),
           "[('F8_E4M3', '|V1')]"),
      "F8_E4M3");
  // a big-endian int32 from a source that stored it so: written little-endian
  add(make("be_int", DType::Other, {2},
           Buffer(std::vector<uint8_t>{0x00, 0x00, 0x01, 0x02, 0xFF, 0xFF, 0xFF, 0xFE}), ">i4"),
      "I32", "02010000feffffff", "<i4");
  add(make("cplx", DType::Other, {1}, bytes_of(std::vector<float>{1.5f, -2.0f}), "<c8"), "C64");
  // big_endian on a float is dropped: the bytes in memory are little-endian already
  {
    Tensor t = make("f32_from_be", DType::F32, {1}, bytes_of(std::vector<float>{0.25f}));
    t.info.big_endian = true;
    add(std::move(t), "F32");
  }
  add(make("\xE5\xB1\xA4.w", DType::F32, {1}, bytes_of(std::vector<float>{2.0f})), "F32");
  return w;
}

}  // namespace

TEST_CASE("safetensors: writer output passes the strict checker with identical values", "[safetensors]") {
  TempDir tmp("write");
  const std::string out = tmp.file("out.safetensors");
  const auto cases = writer_cases();
  {
    auto w = create_snapshot(out, false);
    for (const auto& c : cases) w->add(c.in);
    w->finish();
    CHECK(w->take_warnings().empty());
  }
  REQUIRE(run_checker(out, tmp.file("dump.json")) == 0);
  json d = load_json(tmp.file("dump.json"));

  // header: __metadata__ first, then the tensors in the order added, padded to 8 bytes
  CHECK(d.at("header_size").get<uint64_t>() % 8 == 0);
  CHECK(d.at("metadata") == json{{"format", "pt"}});
  std::vector<std::string> keys = d.at("header_keys").get<std::vector<std::string>>();
  REQUIRE(keys.size() == cases.size() + 1);
  CHECK(keys[0] == "__metadata__");
  const json& ts = d.at("tensors");
  REQUIRE(ts.size() == cases.size());
  uint64_t offset = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO(cases[i].in.name());
    CHECK(keys[i + 1] == cases[i].in.name());
    CHECK(ts[i].at("name").get<std::string>() == cases[i].in.name());
    CHECK(ts[i].at("dtype").get<std::string>() == cases[i].st_dtype);
    CHECK(ts[i].at("shape").get<std::vector<uint64_t>>() == cases[i].in.shape());
    CHECK(ts[i].at("hex").get<std::string>() == cases[i].file_hex);
    auto offs = ts[i].at("data_offsets").get<std::vector<uint64_t>>();
    CHECK(offs[0] == offset);
    offset = offs[1];
  }
  // numpy's decoding agrees with the bit patterns
  CHECK(ts[0].at("values")[0] == 1.0);
  CHECK(ts[0].at("values")[1] == "nan");
  CHECK(ts[0].at("values")[4] == "inf");
  CHECK(ts[0].at("values")[5] == "-inf");
  CHECK(ts[2].at("values")[2] == 1.0);  // bf16 0x3F80
  CHECK(ts[6].at("values")[0] == 1234);
  CHECK(ts[9].at("values") == json::array({258, -2}));

  // our reader gives back the same tensors
  auto r = open_snapshot(out);
  REQUIRE(r->arrays().size() == cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO(cases[i].in.name());
    const TensorInfo& a = r->arrays()[i];
    CHECK(a.name == cases[i].in.name());
    CHECK(a.dtype == cases[i].in.dtype());
    CHECK(a.shape == cases[i].in.shape());
    if (a.dtype == DType::Other) CHECK(a.descr == cases[i].read_descr);
    CHECK_FALSE(a.big_endian);
    CHECK(hex(r->read(i).data) == cases[i].file_hex);
  }
}

TEST_CASE("safetensors: read, write and read again is lossless for the fixtures", "[safetensors]") {
  TempDir tmp("rewrite");
  for (const char* fname : {"floats.safetensors", "scalar_empty.safetensors", "others.safetensors",
                            "metadata.safetensors", "unpadded.safetensors", "no_tensors.safetensors"}) {
    INFO(fname);
    auto r = open_snapshot(kDir + fname);
    const std::string out = tmp.file(std::string("re_") + fname);
    {
      auto w = create_snapshot(out, false);
      for (size_t i = 0; i < r->arrays().size(); ++i) w->add(r->read(i));
      w->finish();
    }
    CHECK(run_checker(out) == 0);
    auto r2 = open_snapshot(out);
    REQUIRE(r2->arrays().size() == r->arrays().size());
    for (size_t i = 0; i < r->arrays().size(); ++i) {
      const TensorInfo& a = r->arrays()[i];
      const TensorInfo& b = r2->arrays()[i];
      CHECK(a.name == b.name);
      CHECK(a.dtype == b.dtype);
      CHECK(a.descr == b.descr);
      CHECK(a.shape == b.shape);
      CHECK(hex(r->read(i).data) == hex(r2->read(i).data));
    }
  }
}

TEST_CASE("safetensors: an empty snapshot writes a valid file", "[safetensors]") {
  TempDir tmp("empty");
  const std::string out = tmp.file("e.safetensors");
  create_snapshot(out, false)->finish();
  REQUIRE(run_checker(out, tmp.file("dump.json")) == 0);
  json d = load_json(tmp.file("dump.json"));
  CHECK(d.at("tensors").empty());
  CHECK(d.at("header_size").get<uint64_t>() % 8 == 0);
  CHECK(open_snapshot(out)->arrays().empty());
}

TEST_CASE("safetensors: writer refusals leave no file behind", "[safetensors]") {
  TempDir tmp("refuse");
  const std::string out = tmp.file("x.safetensors");
  auto expect_usage = [&](Tensor t, const std::string& fragment) {
    INFO(fragment);
    auto w = create_snapshot(out, false);
    w->add(make("ok", DType::F32, {1}, bytes_of(std::vector<float>{1.0f})));
    try {
      w->add(t);
      FAIL("accepted");
    } catch (const Error& e) {
      const std::string msg = e.what();
      INFO(msg);
      CHECK(e.code() == ErrorCode::Usage);
      CHECK(msg.find(t.name()) != std::string::npos);
      CHECK(msg.find(fragment) != std::string::npos);
    }
  };
  expect_usage(make("z", DType::Other, {1}, Buffer(std::vector<uint8_t>(16)), "<c16"), "'<c16'");
  expect_usage(make("obj", DType::Other, {1}, Buffer(std::vector<uint8_t>(8)), "|O"), "'|O'");
  expect_usage(make("rec", DType::Other, {1}, Buffer(std::vector<uint8_t>(4)), "[('a', '<i4')]"),
               "[('a', '<i4')]");
  expect_usage(make("s", DType::Other, {1}, Buffer(std::vector<uint8_t>(5)), "<U5"), "'<U5'");
  expect_usage(make("ok", DType::F32, {1}, bytes_of(std::vector<float>{2.0f})), "already written");
  expect_usage(make("__metadata__", DType::F32, {1}, bytes_of(std::vector<float>{2.0f})), "reserved");
  // writers destroyed without finish(): nothing left in the directory
  CHECK(fs::is_empty(tmp.path));

  // an existing target is refused without overwrite, replaced with it
  { std::ofstream(out) << "old"; }
  try {
    create_snapshot(out, false);
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Usage);
  }
  {
    auto w = create_snapshot(out, true);
    w->add(make("a", DType::F16, {1}, bytes_of(std::vector<uint16_t>{0x3C00})));
    w->finish();
  }
  CHECK(run_checker(out) == 0);
}

TEST_CASE("safetensors: a tensor whose bytes disagree with its shape is an internal error",
          "[safetensors]") {
  TempDir tmp("internal");
  auto w = create_snapshot(tmp.file("x.safetensors"), false);
  try {
    w->add(make("short", DType::F32, {3}, bytes_of(std::vector<float>{1.0f, 2.0f})));
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Internal);
    CHECK(std::string(e.what()).find("short") != std::string::npos);
  }
}

TEST_CASE("safetensors: tensors announced with expect() are written as they come, the same bytes",
          "[safetensors]") {
  TempDir tmp("expect");
  for (const char* fname : {"floats.safetensors", "scalar_empty.safetensors", "others.safetensors",
                            "metadata.safetensors", "unpadded.safetensors", "no_tensors.safetensors"}) {
    INFO(fname);
    auto r = open_snapshot(kDir + fname);
    const std::string held = tmp.file(std::string("held_") + fname), streamed = tmp.file(std::string("st_") + fname);
    {
      auto w = create_snapshot(held, false);
      for (size_t i = 0; i < r->arrays().size(); ++i) w->add(r->read(i));
      w->finish();
    }
    {
      auto w = create_snapshot(streamed, false);
      w->expect(r->arrays());
      for (size_t i = 0; i < r->arrays().size(); ++i) w->add(r->read(i));
      w->finish();
    }
    std::ifstream a(held, std::ios::binary), b(streamed, std::ios::binary);
    const std::string x((std::istreambuf_iterator<char>(a)), {}), y((std::istreambuf_iterator<char>(b)), {});
    CHECK(!x.empty());
    CHECK(x == y);
    CHECK(run_checker(streamed) == 0);
  }
}

TEST_CASE("safetensors: announced tensors are checked, and a refusal leaves no file behind", "[safetensors]") {
  TempDir tmp("expect_refuse");
  const std::string out = tmp.file("x.safetensors");
  const Tensor a = make("a", DType::F32, {2}, bytes_of(std::vector<float>{1.0f, 2.0f}));
  const Tensor b = make("b", DType::F16, {1}, bytes_of(std::vector<uint16_t>{0x3C00}));
  auto code_of = [&](auto&& steps) {
    auto w = create_snapshot(out, false);
    try {
      steps(*w);
    } catch (const Error& e) {
      INFO(e.what());
      return e.code();
    }
    FAIL("accepted");
    return ErrorCode::Internal;
  };
  // Not what was announced: another name, shape or dtype, one tensor too many, one left out.
  CHECK(code_of([&](SnapshotWriter& w) { w.expect({a.info, b.info}); w.add(b); }) == ErrorCode::Internal);
  CHECK(code_of([&](SnapshotWriter& w) {
          w.expect({a.info});
          w.add(make("a", DType::F32, {1, 2}, bytes_of(std::vector<float>{1.0f, 2.0f})));
        }) == ErrorCode::Internal);
  CHECK(code_of([&](SnapshotWriter& w) {
          w.expect({a.info});
          w.add(make("a", DType::F64, {2}, bytes_of(std::vector<double>{1.0, 2.0})));
        }) == ErrorCode::Internal);
  CHECK(code_of([&](SnapshotWriter& w) { w.expect({a.info}); w.add(a); w.add(b); }) == ErrorCode::Internal);
  CHECK(code_of([&](SnapshotWriter& w) { w.expect({a.info, b.info}); w.add(a); w.finish(); }) == ErrorCode::Internal);
  // Refused when announced, before any data: two of one name, a dtype safetensors cannot hold.
  CHECK(code_of([&](SnapshotWriter& w) { w.expect({a.info, a.info}); }) == ErrorCode::Usage);
  CHECK(code_of([&](SnapshotWriter& w) {
          w.expect({make("z", DType::Other, {1}, Buffer(std::vector<uint8_t>(16)), "<c16").info});
        }) == ErrorCode::Usage);
  // Announcing after adding is a caller's mistake.
  CHECK(code_of([&](SnapshotWriter& w) { w.add(a); w.expect({b.info}); }) == ErrorCode::Internal);
  CHECK(fs::is_empty(tmp.path));
}
