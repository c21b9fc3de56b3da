// SPDX-License-Identifier: BSD-3-Clause
// NPZ: archives as np.savez / np.savez_compressed write them (fixtures from
// tests/fixtures/fixtures_npz.py), corrupt and lying archives, and archives numpy loads back.
#include <catch2/catch.hpp>

#include <algorithm>

#include <gradcodec/error.hpp>
#include <gradcodec/formats/snapshot_io.hpp>

#include "readers.hpp"
#include <gradcodec/tensor.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <filesystem>
#include <fstream>
#include <string>
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

// Shared helpers, defined in test_npy.cpp.
namespace npytest {
std::string fixture(const std::string& rel);
std::vector<uint8_t> file_bytes(const std::string& path);
json manifest(const std::string& format);
void check_info(const TensorInfo& info, const json& e);
void check_tensor(const Tensor& t, const json& e, const std::string& format);
int run_checker(const std::vector<std::string>& args);
Tensor make_tensor(const std::string& name, DType dtype, std::vector<uint64_t> shape,
                   std::vector<uint8_t> bytes, bool big_endian, const std::string& descr);
json expect_entry(const std::string& name, const std::string& descr, std::vector<uint64_t> shape,
                  const std::vector<uint8_t>& bytes);
int check_expect(const std::string& path, const std::string& kind, const json& arrays,
                 const std::string& spec_path);
std::vector<uint32_t> f32_special_bits();
}  // namespace npytest

using namespace npytest;

namespace {

template <class F>
Error npz_error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  FAIL("no gradcodec::Error thrown");
  return Error(ErrorCode::Internal, "unreachable");
}

struct NpzTempDir {
  fs::path path;
  NpzTempDir() {
    std::string templ = (fs::temp_directory_path() / "gradcodec-npztest-XXXXXX").string();
    REQUIRE(::mkdtemp(templ.data()) != nullptr);
    path = templ;
  }
  ~NpzTempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
  size_t count() const { return static_cast<size_t>(std::distance(fs::directory_iterator(path), {})); }
};

template <class T>
std::vector<uint8_t> raw(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Points file descriptor `fd` (0 or 1) at `path` for the lifetime of the object.
struct Redirect {
  int fd, saved;
  Redirect(int which, const std::string& path, int flags) : fd(which), saved(::dup(which)) {
    int f = ::open(path.c_str(), flags, 0644);
    REQUIRE(f >= 0);
    REQUIRE(::dup2(f, fd) == fd);
    ::close(f);
  }
  ~Redirect() {
    ::dup2(saved, fd);
    ::close(saved);
  }
};

}  // namespace

// ------------------------------------------------------------------------------------------------
// Reading

TEST_CASE("npz: savez, savez_compressed and streamed archives read as numpy wrote them", "[npz]") {
  json m = manifest("npz");
  const json& valid = m.at("valid");
  for (const char* must : {"savez.npz", "savez_compressed.npz", "streamed.npz", "large.npz",
                           "positional.npz", "empty_archive.npz", "with_dir_entry.npz",
                           "trailing_bytes.npz"})
    REQUIRE(valid.contains(must));
  REQUIRE(valid.at("savez.npz").size() == 13);
  for (const auto& [file, entries] : valid.items()) {
    INFO(file);
    auto r = gf::open_snapshot(fixture("npz/" + file));
    CHECK(r->format() == gf::Format::Npz);
    REQUIRE(r->arrays().size() == entries.size());
    for (size_t i = 0; i < entries.size(); ++i) {  // archive order, names without ".npy"
      INFO(entries[i].at("name"));
      check_info(r->arrays()[i], entries[i]);
      check_tensor(r->read(i), entries[i], "npz");
    }
  }
}

TEST_CASE("npz: numpy's zip64 members, the step counter and the pickle", "[npz]") {
  auto r = gf::open_snapshot(fixture("npz/savez.npz"));
  const auto& a = r->arrays();
  REQUIRE(a.size() == 13);
  CHECK(a[0].name == "layer1.0.conv1.weight");
  CHECK(a[0].dtype == DType::F32);
  CHECK(a[2].name == "fc.weight");  // Fortran order: shape kept
  CHECK(a[2].shape == std::vector<uint64_t>{3, 5});
  CHECK(a[6].name == "step");
  CHECK(a[6].dtype == DType::Other);
  CHECK(a[6].descr == "<i8");
  Tensor step = r->read(6);
  int64_t v;
  REQUIRE(step.data.size() == 8);
  std::memcpy(&v, step.data.data(), 8);
  CHECK(v == 1234);
  CHECK(a[10].descr == "|O");
  CHECK(r->read(10).data.data()[0] == 0x80);  // the pickle, verbatim
  CHECK(a[11].name == "nested/name");
  CHECK(a[12].name == "gewicht_ä");
}

TEST_CASE("npz: open reads only headers, read inflates one member", "[npz]") {
  // The second member's deflate stream is damaged halfway: listing works, the first member reads,
  // the damaged one fails only when read.
  std::string path = fixture("npz/corrupt/damaged_deflate.npz");
  auto r = gf::open_snapshot(path);
  REQUIRE(r->arrays().size() == 2);
  CHECK(r->arrays()[1].shape == std::vector<uint64_t>{1 << 16});
  CHECK(r->read(0).data.size() == 16);
  Error e = npz_error_of([&] { r->read(1); });
  CHECK(e.code() == ErrorCode::Input);
  CHECK(std::string(e.what()).find(path + ": member 'big.npy': ") == 0);
}

TEST_CASE("npz: corrupt and lying archives are refused at open", "[npz]") {
  json m = manifest("npz");
  const json& errors = m.at("open_errors");
  for (const char* must : {"corrupt/duplicate.npz", "corrupt/not_npy_member.npz", "corrupt/declared_bomb.npz",
                           "corrupt/member_truncated.npz", "corrupt/member_header_beyond.npz",
                           "corrupt/not_zip.npz", "corrupt/member_trailing_junk.npz"})
    REQUIRE(errors.contains(must));
  for (const auto& [rel, what] : errors.items()) {
    INFO(rel);
    std::string path = fixture("npz/" + rel);
    Error e = npz_error_of([&] { gf::open_snapshot(path); });
    CHECK(e.code() == ErrorCode::Input);
    std::string msg = e.what();
    CHECK(msg.rfind(path + ": ", 0) == 0);
    CHECK(msg.find(what.get<std::string>()) != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
  }
}

TEST_CASE("npz: damaged data and decompression bombs are refused at read", "[npz]") {
  json m = manifest("npz");
  const json& errors = m.at("read_errors");
  for (const char* must : {"corrupt/bad_crc.npz", "corrupt/hidden_bomb.npz", "corrupt/damaged_deflate.npz"})
    REQUIRE(errors.contains(must));
  for (const auto& [rel, spec] : errors.items()) {
    INFO(rel);
    std::string path = fixture("npz/" + rel);
    auto r = gf::open_snapshot(path);
    size_t index = r->arrays().size();
    for (size_t i = 0; i < r->arrays().size(); ++i)
      if (r->arrays()[i].name == spec.at("member").get<std::string>()) index = i;
    REQUIRE(index < r->arrays().size());
    Error e = npz_error_of([&] { r->read(index); });
    CHECK(e.code() == ErrorCode::Input);
    std::string msg = e.what();
    CHECK(msg.rfind(path + ": member '" + spec.at("member").get<std::string>() + ".npy': ", 0) == 0);
    CHECK(msg.find(spec.at("what").get<std::string>()) != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
  }
}

TEST_CASE("npz: read from standard input", "[npz]") {
  std::string path = fixture("npz/savez_compressed.npz");
  std::unique_ptr<gf::SnapshotReader> r;
  {
    Redirect in(0, path, O_RDONLY);
    std::clearerr(stdin);
    r = gf::open_snapshot("-");
  }
  std::clearerr(stdin);
  CHECK(r->format() == gf::Format::Npz);
  json m = manifest("npz");
  const json& entries = m.at("valid").at("savez_compressed.npz");
  REQUIRE(r->arrays().size() == entries.size());
  for (size_t i = 0; i < entries.size(); ++i) check_tensor(r->read(i), entries[i], "npz");
}

// ------------------------------------------------------------------------------------------------
// Writing

TEST_CASE("npz writer: numpy loads every archive back as the original", "[npz]") {
  NpzTempDir tmp;
  // (with_dir_entry.npz is left out: its directory entry is not an array and is not written.)
  for (const char* file : {"savez.npz", "savez_compressed.npz", "streamed.npz", "large.npz",
                           "positional.npz"}) {
    INFO(file);
    std::string out = tmp / file;
    auto r = gf::open_snapshot(fixture(std::string("npz/") + file));
    auto w = gf::create_snapshot(out, false);
    for (size_t i = 0; i < r->arrays().size(); ++i) w->add(r->read(i));
    w->finish();
    CHECK(w->take_warnings().empty());
    // Names, order, dtype with byte order, shape, every bit; stored members dated like numpy's.
    CHECK(run_checker({"same", out, fixture(std::string("npz/") + file)}) == 0);
    // And gradcodec reads its own archive back identically.
    auto back = gf::open_snapshot(out);
    REQUIRE(back->arrays().size() == r->arrays().size());
    for (size_t i = 0; i < r->arrays().size(); ++i) {
      Tensor a = r->read(i), b = back->read(i);
      CHECK(a.info.name == b.info.name);
      CHECK(a.info.descr == b.info.descr);
      CHECK(a.info.shape == b.info.shape);
      REQUIRE(a.data.size() == b.data.size());
      CHECK(std::equal(a.data.data(), a.data.data() + a.data.size(), b.data.data()));
    }
  }
}

TEST_CASE("npz writer: bf16, byte order, special values and names", "[npz]") {
  NpzTempDir tmp;
  std::string out = tmp / "snap.npz";
  std::vector<uint32_t> f32 = f32_special_bits();
  std::vector<uint16_t> bf16 = {0x3F80, 0x7FC1, 0xFF80, 0x0001};
  std::vector<uint32_t> up;
  for (uint16_t b : bf16) up.push_back(uint32_t{b} << 16);
  std::vector<uint8_t> f32be = raw(f32);
  for (size_t i = 0; i < f32be.size(); i += 4) std::reverse(f32be.begin() + i, f32be.begin() + i + 4);

  auto w = gf::create_snapshot(out, false);
  w->add(make_tensor("layer1.0.weight", DType::F32, {3, 4}, raw(f32), false, ""));
  w->add(make_tensor("bf", DType::BF16, {2, 2}, raw(bf16), false, ""));
  w->add(make_tensor("be", DType::F32, {12}, raw(f32), true, ">f4"));
  w->add(make_tensor("gewicht_ä", DType::F32, {}, raw(std::vector<float>{2.5f}), false, ""));
  w->add(make_tensor("a/b", DType::F64, {0}, {}, false, ""));
  w->add(make_tensor("step", DType::Other, {}, raw(std::vector<int64_t>{42}), false, "<i8"));
  w->finish();
  std::vector<std::string> warnings = w->take_warnings();
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] == "tensor bf: bf16 stored as float32 (numpy has no bfloat16)");
  json expect = json::array({expect_entry("layer1.0.weight", "<f4", {3, 4}, raw(f32)),
                             expect_entry("bf", "<f4", {2, 2}, raw(up)),
                             expect_entry("be", ">f4", {12}, f32be),
                             expect_entry("gewicht_ä", "<f4", {}, raw(std::vector<float>{2.5f})),
                             expect_entry("a/b", "<f8", {0}, {}),
                             expect_entry("step", "<i8", {}, raw(std::vector<int64_t>{42}))});
  CHECK(check_expect(out, "npz", expect, tmp / "spec.json") == 0);
}

TEST_CASE("npz writer: '-' writes the archive to standard output", "[npz]") {
  NpzTempDir tmp;
  std::string captured = tmp / "stdout.npz";
  std::vector<float> v = {1.5f, -2.0f};
  {
    auto w = gf::create_snapshot("-", false);
    w->add(make_tensor("x", DType::F32, {2}, raw(v), false, ""));
    std::fflush(stdout);
    Redirect out(1, captured, O_WRONLY | O_CREAT | O_TRUNC);
    w->finish();
    std::fflush(stdout);
  }
  CHECK(check_expect(captured, "npz", json::array({expect_entry("x", "<f4", {2}, raw(v))}), tmp / "spec.json") == 0);
  CHECK(tmp.count() == 2);  // no temporary left beside: captured output and the spec
}

TEST_CASE("npz writer: atomic, and refuses what it cannot write", "[npz]") {
  NpzTempDir tmp;
  std::string out = tmp / "o.npz";
  Tensor t = make_tensor("x", DType::F32, {1}, raw(std::vector<float>{1}), false, "");

  SECTION("not finished: no file, no temporary") {
    {
      auto w = gf::create_snapshot(out, false);
      w->add(t);
    }
    CHECK(tmp.count() == 0);
  }
  SECTION("an existing file") {
    std::ofstream(out) << "old";
    Error e = npz_error_of([&] { gf::create_snapshot(out, false); });
    CHECK(e.code() == ErrorCode::Usage);
    CHECK(std::string(e.what()).find(out) == 0);
    auto w = gf::create_snapshot(out, true);
    w->add(t);
    w->finish();
    CHECK(run_checker({"same", out, out}) == 0);
    CHECK(tmp.count() == 1);
  }
  SECTION("duplicate and escaping names; '' is member .npy, as np.savez writes it") {
    auto w = gf::create_snapshot(out, false);
    w->add(t);
    CHECK(npz_error_of([&] { w->add(t); }).code() == ErrorCode::Usage);
    for (const char* bad : {"/abs", "..", "../up", "a/../../b"}) {
      INFO(bad);
      Tensor b = t;
      b.info.name = bad;
      Error e = npz_error_of([&] { w->add(b); });
      CHECK(e.code() == ErrorCode::Usage);
      CHECK(std::string(e.what()).find(out) == 0);
    }
    CHECK(npz_error_of([&] { w->add(make_tensor("o", DType::Other, {1}, {1}, false, "")); }).code() ==
          ErrorCode::Usage);
    Tensor unnamed = t;
    unnamed.info.name = "";
    w->add(unnamed);
    w->finish();
    CHECK(check_expect(out, "npz",
                       json::array({expect_entry("x", "<f4", {1}, raw(std::vector<float>{1})),
                                    expect_entry("", "<f4", {1}, raw(std::vector<float>{1}))}),
                       tmp / "spec.json") == 0);
  }
  SECTION("no tensor: an empty archive, as np.savez() writes") {
    auto w = gf::create_snapshot(out, false);
    w->finish();
    CHECK(file_bytes(out) == file_bytes(fixture("npz/empty_archive.npz")));
    CHECK(gf::open_snapshot(out)->arrays().empty());
  }
}

namespace {

// A contiguous range of `bytes` addresses whose pages all alias one `window`-byte memory file:
// a destination for a single read of more than 4 GiB that costs `window` bytes of memory. Only
// fit for data whose every window is the same (here: zeros).
struct AliasedRange {
  uint8_t* base = nullptr;
  size_t bytes = 0;
  int fd = -1;
  AliasedRange(size_t n, size_t window) : bytes(n) {
    fd = ::memfd_create("gradcodec-test-window", 0);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(window)) == 0);
    void* r = ::mmap(nullptr, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    REQUIRE(r != MAP_FAILED);
    base = static_cast<uint8_t*>(r);
    for (size_t at = 0; at < n; at += window) {
      void* m = ::mmap(base + at, std::min(window, n - at), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
      REQUIRE(m == base + at);
    }
  }
  ~AliasedRange() {
    ::munmap(base, bytes);
    ::close(fd);
  }
};

}  // namespace

TEST_CASE("npz: a deflated ZIP64 member of more than 4 GiB with a data descriptor is read whole", "[npz]") {
  // np.savez_compressed of a float32 array over 4 GiB: libzip 1.7 asked for it in one read left
  // bytes uninflated and the member seemed to "inflate to more than its declared size". The
  // member (4 GiB + 8 bytes of zeros, a 4 MB file) is inflated by the reader's own read path in
  // one request into a destination of 4 GiB of addresses backed by 64 MiB of memory.
  const uint64_t array_bytes = (uint64_t{4} << 30) + 8;
  fs::path dir = fs::path(GRADCODEC_FIXTURE_DIR) / "npz_big";
  fs::create_directories(dir);
  const fs::path npz = dir / "big.npz";
  const std::string cmd = std::string("'") + GRADCODEC_PYTHON + "' '" + GRADCODEC_SOURCE_DIR +
                          "/tests/fixtures/big_npz.py' '" + npz.string() + "' " + std::to_string(array_bytes);
  REQUIRE(std::system(cmd.c_str()) == 0);
  auto r = gf::open_snapshot(npz.string());
  REQUIRE(r->arrays().size() == 1);
  CHECK(r->arrays()[0].name == "big");
  CHECK(r->arrays()[0].dtype == DType::F32);
  CHECK(r->arrays()[0].shape == std::vector<uint64_t>{array_bytes / 4});
  REQUIRE(gf::npz_array_bytes(*r, 0) == array_bytes);
  const size_t window = size_t{64} << 20;
  AliasedRange dst(array_bytes, window);
  std::memset(dst.base, 0xA5, window);  // every byte the inflation writes turns to zero
  gf::read_npz_array_into(*r, 0, dst.base);
  CHECK(std::all_of(dst.base, dst.base + window, [](uint8_t b) { return b == 0; }));
  CHECK(std::all_of(dst.base + array_bytes - 8, dst.base + array_bytes, [](uint8_t b) { return b == 0; }));
  fs::remove(npz);
}
