// SPDX-License-Identifier: BSD-3-Clause
// Sharded checkpoints through the library (formats/src/sharded_read.cpp): fixtures by
// tests/fixtures/fixtures_sharded.py, in the fixture directory's sharded/. The CLI test
// tests/cli/cli_sharded.py checks round trips and every refusal; here: the reader's contract —
// the index's order, and lazy opening: a shard is opened only when one of its tensors is read, and
// released when another shard's tensor is read (a shard deleted or rewritten after open() is seen
// only then, which a reader holding every shard mapped from open() would never see).

#include <catch2/catch.hpp>

#include "readers.hpp"

#include <gradcodec/error.hpp>
#include <gradcodec/formats/snapshot_io.hpp>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

using namespace gradcodec;
using namespace gradcodec::formats;
namespace fs = std::filesystem;

namespace {

const std::string kDir = std::string(GRADCODEC_FIXTURE_DIR) + "/sharded/";
const std::vector<std::string> kOrder = {"layers.2.w", "layers.10.w", "embed", "layers.2.b", "head.h16",
                                         "head.bf16", "steps", "layers.10.b", "empty", "head.f64"};
const std::string kShard1 = "model-00001-of-00002.safetensors", kShard2 = "model-00002-of-00002.safetensors";

std::vector<std::string> names_of(const SnapshotReader& r) {
  std::vector<std::string> out;
  for (const TensorInfo& t : r.arrays()) out.push_back(t.name);
  return out;
}

size_t index_of(const SnapshotReader& r, const std::string& name) {
  for (size_t i = 0; i < r.arrays().size(); ++i)
    if (r.arrays()[i].name == name) return i;
  FAIL("no tensor " << name);
  return 0;
}

std::vector<uint8_t> bytes_of(const Tensor& t) { return std::vector<uint8_t>(t.data.data(), t.data.data() + t.data.size()); }

// A copy of the safetensors set in a fresh directory, to delete or rewrite shards in.
struct Scratch {
  fs::path dir;
  Scratch() {
    dir = fs::temp_directory_path() / ("gradcodec_sharded_" + std::to_string(::getpid()) + "_" +
                                       std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (const auto& e : fs::directory_iterator(kDir + "st")) fs::copy_file(e.path(), dir / e.path().filename());
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string index() const { return (dir / "model.safetensors.index.json").string(); }
};

// The shard's own bytes of tensor `name`, read from the shard file alone.
std::vector<uint8_t> shard_bytes(const std::string& shard, const std::string& name) {
  auto r = open_snapshot(shard);
  return bytes_of(r->read(index_of(*r, name)));
}

}  // namespace

TEST_CASE("sharded: the index's tensors in its order, with the shards' dtypes and metadata", "[sharded]") {
  REQUIRE(fs::exists(kDir + "st/model.safetensors.index.json"));
  auto r = open_snapshot(kDir + "st/model.safetensors.index.json");
  CHECK(r->format() == Format::Sharded);
  CHECK(std::string(format_name(r->format())) == "sharded");
  CHECK(names_of(*r) == kOrder);  // neither sorted nor grouped by shard
  CHECK(r->arrays()[index_of(*r, "head.h16")].dtype == DType::F16);
  CHECK(r->arrays()[index_of(*r, "head.bf16")].dtype == DType::BF16);
  CHECK(r->arrays()[index_of(*r, "head.f64")].shape == std::vector<uint64_t>{2, 2, 2});
  CHECK(r->arrays()[index_of(*r, "steps")].dtype == DType::Other);
  CHECK(r->metadata() == std::vector<std::pair<std::string, std::string>>{{"format", "pt"}});
  CHECK(sharded_shard_opens(*r) == 0);  // open() checked every shard, and holds none
  for (size_t i = 0; i < kOrder.size(); ++i) {
    const bool first = i == 0 || i == 2 || i == 3 || i == 6 || i == 8 || i == 9;
    CHECK(bytes_of(r->read(i)) == shard_bytes(kDir + "st/" + (first ? kShard1 : kShard2), kOrder[i]));
  }
}

TEST_CASE("sharded: a shard is not opened before one of its tensors is read", "[sharded]") {
  REQUIRE(fs::exists(kDir + "st/model.safetensors.index.json"));
  Scratch s;
  const std::vector<uint8_t> embed = shard_bytes((s.dir / kShard1).string(), "embed");
  auto r = open_snapshot(s.index());
  REQUIRE(sharded_shard_opens(*r) == 0);
  fs::remove(s.dir / kShard2);  // after open(): a reader that kept it mapped would still read it
  for (const char* name : {"layers.2.w", "embed", "layers.2.b", "steps", "empty", "head.f64"})
    CHECK_NOTHROW(r->read(index_of(*r, name)));
  CHECK(bytes_of(r->read(index_of(*r, "embed"))) == embed);
  CHECK(sharded_shard_opens(*r) == 1);  // shard 1, once, for all its tensors read in a row
  try {
    r->read(index_of(*r, "layers.10.w"));
    FAIL("a shard deleted after open() was read");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Input);
    CHECK_THAT(e.what(), Catch::Contains("shard '" + kShard2 + "'") && Catch::Contains("cannot open"));
  }
}

TEST_CASE("sharded: reading another shard's tensor releases the shard that was open", "[sharded]") {
  REQUIRE(fs::exists(kDir + "st/model.safetensors.index.json"));
  Scratch s;
  const std::vector<uint8_t> w10 = shard_bytes((s.dir / kShard2).string(), "layers.10.w");
  auto r = open_snapshot(s.index());
  Tensor held = r->read(index_of(*r, "layers.10.w"));  // shard 2
  CHECK(sharded_shard_opens(*r) == 1);
  CHECK_NOTHROW(r->read(index_of(*r, "layers.2.w")));  // shard 1: shard 2 released
  CHECK(sharded_shard_opens(*r) == 2);
  fs::remove(s.dir / kShard2);
  CHECK(bytes_of(held) == w10);  // a tensor read before keeps its bytes (its mapping stays alive)
  CHECK_THROWS_AS(r->read(index_of(*r, "head.h16")), Error);  // shard 2 is gone: it was not kept
  CHECK_NOTHROW(r->read(index_of(*r, "embed")));
}

TEST_CASE("sharded: a shard rewritten after open() is refused when it is read", "[sharded]") {
  REQUIRE(fs::exists(kDir + "st/model.safetensors.index.json"));
  Scratch s;
  auto r = open_snapshot(s.index());
  // shard 1 swapped for shard 2's content: layers.2.w is no longer there
  fs::copy_file(s.dir / kShard2, s.dir / kShard1, fs::copy_options::overwrite_existing);
  try {
    r->read(0);
    FAIL("a rewritten shard was read");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Input);
    CHECK_THAT(e.what(), Catch::Contains("changed since it was opened") && Catch::Contains("'layers.2.w'"));
  }
}

TEST_CASE("sharded: torch.save shards give the same tensors as safetensors shards", "[sharded]") {
  INFO("the .bin shards need python3-torch (tests/fixtures/fixtures_sharded.py)");
  REQUIRE(fs::exists(kDir + "pt/pytorch_model.bin.index.json"));
  auto pt = open_snapshot(kDir + "pt/pytorch_model.bin.index.json");
  auto st = open_snapshot(kDir + "st/model.safetensors.index.json");
  CHECK(pt->format() == Format::Sharded);
  CHECK(names_of(*pt) == kOrder);
  CHECK(pt->metadata().empty());  // torch shards have none
  CHECK(sharded_shard_opens(*pt) == 0);
  for (size_t i = 0; i < kOrder.size(); ++i) {
    INFO(kOrder[i]);
    CHECK(pt->arrays()[i].dtype == st->arrays()[i].dtype);
    CHECK(pt->arrays()[i].shape == st->arrays()[i].shape);
    CHECK(bytes_of(pt->read(i)) == bytes_of(st->read(i)));
  }
  CHECK(sharded_shard_opens(*pt) == 7);  // 1 2 1 1 2 2 1 2 1 1: a switch each time the shard changes
}
