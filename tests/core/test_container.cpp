// SPDX-License-Identifier: BSD-3-Clause
// The .gcz container: what is written is read back; every truncation and every single-bit flip
// of a small container is refused as corrupt (never a crash); one record decodes alone.
#include <catch2/catch.hpp>

#include <algorithm>

#include "support.hpp"

#include <gradcodec/container.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <filesystem>
#include <fstream>

using namespace gradcodec;
using namespace gradcodec::test;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("gradcodec_test_" + name)).string();
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// Encodes `frames` (each a list of tensors) with a pipeline into a container in memory.
std::vector<uint8_t> make_container(const std::string& pipeline, const std::vector<std::vector<Tensor>>& frames,
                                    uint64_t seed = 5, unsigned threads = 1) {
  std::string path = temp_path("c_" + std::to_string(std::hash<std::string>{}(pipeline)) + "_" +
                               std::to_string(threads) + ".gcz");
  std::filesystem::remove(path);
  EncodeOptions eo;
  eo.seed = seed;
  eo.threads = threads;
  SequenceEncoder enc(Pipeline::parse(pipeline), eo);
  ContainerWriter w(path, true, enc.header(R"([{"path":"mem","format":"npz"}])"));
  for (const auto& fr : frames) {
    FrameSource src;
    src.count = fr.size();
    src.info = [&fr](size_t i) { return fr[i].info; };
    src.load = [&fr](size_t i) { return fr[i]; };
    src.source = "mem";
    enc.encode_frame(src, w);
  }
  w.finish();
  auto bytes = read_all(path);
  std::filesystem::remove(path);
  return bytes;
}

// Decodes everything in a container held in memory, on `threads` decode threads.
std::vector<std::vector<Tensor>> decode_all(std::vector<uint8_t> bytes, unsigned threads = 1) {
  ContainerReader r(InputFile::from_bytes(std::move(bytes), "mem.gcz"));
  DecodeOptions opt;
  opt.threads = threads;
  SequenceDecoder d(r, opt);
  std::vector<std::vector<Tensor>> out(r.frame_count());
  for (size_t f = 0; f < r.frame_count(); ++f) d.decode_frame(f, [&](Tensor&& t) { out[f].push_back(std::move(t)); });
  return out;
}

std::vector<std::vector<Tensor>> small_frames() {
  const Tensor other = make_other("step", "<i8", {}, {7, 0, 0, 0, 0, 0, 0, 0});
  return {{make_tensor("a.weight", {4, 8}, gaussian(32, 1)), make_tensor("a.bias", {4}, gaussian(4, 2)), other},
          {make_tensor("a.weight", {4, 8}, std::vector<float>(32, 0.25f)), make_tensor("a.bias", {4}, gaussian(4, 4))}};
}

}  // namespace

TEST_CASE("container: header, frames, records and streams read back as written", "[container]") {
  auto frames = small_frames();
  auto bytes = make_container("zstd(level=1)", frames, 99);
  ContainerReader r(InputFile::from_bytes(bytes, "mem.gcz"));
  CHECK(r.header().seed == 99);
  CHECK(r.header().tool == tool_version());
  CHECK(r.header().pipeline_text == "raw | zstd(level=1)");
  CHECK(Pipeline::from_json(r.header().pipeline_json).text() == "raw | zstd(level=1)");
  REQUIRE(r.frame_count() == 2);
  CHECK(r.frame(0).keyframe);
  CHECK_FALSE(r.frame(1).keyframe);
  REQUIRE(r.record_count(0) == 3);
  REQUIRE(r.record_count(1) == 2);
  RecordMeta w = r.record(0, 0);
  CHECK(w.info.name == "a.weight");
  CHECK(w.info.shape == std::vector<uint64_t>{4, 8});
  CHECK(w.info.dtype == DType::F32);
  RecordMeta bias = r.record(0, 1);
  CHECK(bias.storage == Storage::Raw);  // 16 bytes cannot shrink: stored raw, never larger
  CHECK(bias.stream_bytes() == 16);
  RecordMeta step = r.record(0, 2);
  CHECK(step.storage == Storage::PassThrough);
  CHECK(step.info.descr == "<i8");
  RecordMeta flat = r.record(1, 0);
  CHECK(flat.storage == Storage::Pipeline);
  CHECK(flat.stream_bytes() < 128);  // a constant tensor compresses
  auto dec = decode_all(bytes);
  REQUIRE(dec.size() == 2);
  for (size_t f = 0; f < 2; ++f) {
    REQUIRE(dec[f].size() == frames[f].size());
    for (size_t i = 0; i < dec[f].size(); ++i) {
      CHECK(dec[f][i].info.name == frames[f][i].info.name);
      CHECK(dec[f][i].info.descr == frames[f][i].info.descr);
      REQUIRE(dec[f][i].data.size() == frames[f][i].data.size());
      CHECK(std::equal(dec[f][i].data.data(), dec[f][i].data.data() + dec[f][i].data.size(), frames[f][i].data.data()));
    }
  }
}

TEST_CASE("container writer: checksums computed ahead (the encoder's workers) give the same bytes", "[container]") {
  const Tensor t = make_tensor("w", {3, 5}, gaussian(15, 3));
  Streams streams;
  streams.add("value", 4).bytes.assign(t.data.data(), t.data.data() + t.data.size());
  streams.add("side").bytes = {1, 2, 3};
  std::vector<uint64_t> sums = stream_checksums(streams);
  REQUIRE(sums.size() == 2);
  ContainerHeader header = SequenceEncoder(Pipeline::parse("raw"), EncodeOptions{}).header("[]");
  CHECK(sums[0] != sums[1]);
  header.format_minor = GENERATE(0, 1);
  INFO("format 1." << header.format_minor);
  auto write = [&](bool ahead) {
    const std::string path = temp_path(ahead ? "sums_ahead.gcz" : "sums_inline.gcz");
    ContainerWriter w(path, true, header);
    w.begin_frame({});
    if (ahead) w.add(t.info, Storage::Pipeline, 0, streams, sums);
    else w.add(t.info, Storage::Pipeline, 0, streams);
    w.finish();
    auto bytes = read_all(path);
    std::filesystem::remove(path);
    return bytes;
  };
  const auto inline_bytes = write(false);
  CHECK(write(true) == inline_bytes);
  ContainerReader r(InputFile::from_bytes(inline_bytes, "mem.gcz"));
  const RecordMeta m = r.record(0, 0);
  REQUIRE(m.streams.size() == 2);
  if (header.format_minor == 0) {  // a checksum per stream
    CHECK_FALSE(m.whole_check);
    CHECK(m.streams[0].checksum == sums[0]);
    CHECK(m.streams[1].checksum == sums[1]);
  } else {  // one check per record, of the streams' checksums
    CHECK(m.whole_check);
    CHECK(m.check == record_check(sums));
    std::vector<uint64_t> swapped = {sums[1], sums[0]};
    CHECK(m.check != record_check(swapped));
  }
  // One checksum short: refused as an internal error, nothing written.
  const std::string path = temp_path("sums_short.gcz");
  ContainerWriter w(path, true, header);
  w.begin_frame({});
  try {
    w.add(t.info, Storage::Pipeline, 0, streams, std::span<const uint64_t>(sums).first(1));
    FAIL("a missing checksum was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Internal);
  }
}

TEST_CASE("container: every truncation is refused as corrupt", "[container][corrupt]") {
  auto bytes = make_container("zstd(level=1)", small_frames());
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    std::vector<uint8_t> t(bytes.begin(), bytes.begin() + cut);
    try {
      decode_all(t);
      FAIL("truncation to " << cut << " bytes was accepted");
    } catch (const Error& e) {
      REQUIRE(e.code() == ErrorCode::Corrupt);
      REQUIRE(std::string(e.what()).find("mem.gcz") != std::string::npos);
    }
  }
}

TEST_CASE("container: every single-bit flip is refused as corrupt", "[container][corrupt]") {
  auto bytes = make_container("zstd(level=1)", small_frames());
  for (size_t pos = 0; pos < bytes.size(); ++pos) {
    for (int bit = 0; bit < 8; ++bit) {
      auto t = bytes;
      t[pos] ^= static_cast<uint8_t>(1u << bit);
      try {
        decode_all(t);
        FAIL("flip of bit " << bit << " of byte " << pos << " was accepted");
      } catch (const Error& e) {
        REQUIRE(e.code() == ErrorCode::Corrupt);
      }
    }
  }
}

TEST_CASE("container: one tensor of one frame decodes without touching the others", "[container]") {
  auto frames = small_frames();
  auto bytes = make_container("zstd(level=1)", frames);
  ContainerReader clean(InputFile::from_bytes(bytes, "mem.gcz"));
  // Damage the streams of frame 0's weight: frame 1's weight must still decode (stateless).
  RecordMeta damaged = clean.record(0, 0);
  auto bad = bytes;
  bad[damaged.streams[0].offset] ^= 0xff;
  ContainerReader r(InputFile::from_bytes(bad, "mem.gcz"));
  SequenceDecoder d(r);
  Tensor t = d.decode(1, 0);
  CHECK(d.frames_read() == 1);
  CHECK(std::memcmp(t.data.data(), frames[1][0].data.data(), t.data.size()) == 0);
  CHECK_THROWS_AS(d.decode(0, 0), Error);
}

TEST_CASE("container: same input, pipeline and seed give the same bytes for 1 and 2 threads", "[container]") {
  std::vector<std::vector<Tensor>> frames(1);
  for (int i = 0; i < 9; ++i) frames[0].push_back(make_tensor("t" + std::to_string(i), {50, 40}, gaussian(2000, i)));
  auto one = make_container("fp16 | zstd", frames, 3, 1);
  auto two = make_container("fp16 | zstd", frames, 3, 2);
  auto again = make_container("fp16 | zstd", frames, 3, 2);
  CHECK(one == two);
  CHECK(two == again);
}

TEST_CASE("decode_frame: the same tensors in the same order for 1, 2, 3 and 5 threads", "[container]") {
  // Tensors 1000× apart in size, so the workers finish out of order; a pass-through array; a
  // stateless pipeline with one frame and a stateful one (error feedback) over three frames.
  const Tensor other = make_other("step", "<i8", {}, {9, 0, 0, 0, 0, 0, 0, 0});
  const std::vector<uint64_t> rows = {300, 2, 40, 1, 250, 3, 60, 5, 200};
  std::vector<std::vector<Tensor>> frames(3);
  for (size_t f = 0; f < frames.size(); ++f) {
    for (size_t i = 0; i < rows.size(); ++i)
      frames[f].push_back(
          make_tensor("t" + std::to_string(i), {rows[i], 96}, gaussian(rows[i] * 96, 10 * f + i)));
    frames[f].insert(frames[f].begin() + 4, other);
  }
  for (const char* pipeline : {"fp16 | zstd", "ef | sign(scale=l1)"}) {
    INFO(pipeline);
    const auto bytes = make_container(pipeline, frames, 3);
    const auto one = decode_all(bytes, 1);
    REQUIRE(one.size() == 3);
    REQUIRE(one[2].size() == rows.size() + 1);
    for (unsigned threads : {2u, 3u, 5u}) {
      INFO(threads << " threads");
      const auto many = decode_all(bytes, threads);
      REQUIRE(many.size() == one.size());
      for (size_t f = 0; f < one.size(); ++f) {
        REQUIRE(many[f].size() == one[f].size());
        for (size_t i = 0; i < one[f].size(); ++i) {
          CHECK(many[f][i].name() == one[f][i].name());
          CHECK(many[f][i].info.shape == one[f][i].info.shape);
          CHECK(many[f][i].dtype() == one[f][i].dtype());
          REQUIRE(many[f][i].data.size() == one[f][i].data.size());
          CHECK(std::memcmp(many[f][i].data.data(), one[f][i].data.data(), one[f][i].data.size()) == 0);
        }
      }
    }
  }
}

TEST_CASE("decode_frame: a damaged container fails at its first damaged record for any thread count",
          "[container][corrupt]") {
  std::vector<std::vector<Tensor>> frames(1);
  for (int i = 0; i < 12; ++i)
    frames[0].push_back(make_tensor("t" + std::to_string(i), {uint64_t(12 - i) * 40, 50}, gaussian((12 - i) * 2000, i)));
  auto bytes = make_container("fp16 | zstd", frames, 3);
  {
    ContainerReader clean(InputFile::from_bytes(bytes, "mem.gcz"));
    for (size_t i : {4u, 7u}) bytes[clean.record(0, i).streams[0].offset + 3] ^= 0x10;
  }
  std::string first_error;
  for (unsigned threads : {1u, 2u, 3u, 5u}) {
    INFO(threads << " threads");
    ContainerReader r(InputFile::from_bytes(bytes, "mem.gcz"));
    DecodeOptions opt;
    opt.threads = threads;
    SequenceDecoder d(r, opt);
    std::vector<std::string> sunk;
    try {
      d.decode_frame(0, [&](Tensor&& t) { sunk.push_back(t.name()); });
      FAIL("the damaged frame decoded");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Corrupt);
      if (threads == 1) first_error = e.what();
      CHECK(e.what() == first_error);
    }
    CHECK(sunk == std::vector<std::string>{"t0", "t1", "t2", "t3"});
  }
  CHECK(first_error.find("checksum") != std::string::npos);
}

TEST_CASE("bird+'s frame plan: the same bytes for 1, 2, 3 and 5 threads; the first weight's error wins",
          "[container][bird]") {
  // bird/bird+ sample every weight with an attached bias in a frame plan before the records are
  // made, on `threads` workers taking weights from a queue. Weights 1000× apart in size (so the
  // workers finish out of order), two frames (the second keyed on the first's state).
  std::vector<std::vector<Tensor>> frames(2);
  const std::vector<std::pair<uint64_t, uint64_t>> dims = {{4, 9}, {64, 576}, {8, 72}, {256, 1152}, {16, 144},
                                                           {32, 288}, {2, 18}, {128, 1152}};
  for (size_t f = 0; f < frames.size(); ++f)
    for (size_t i = 0; i < dims.size(); ++i) {
      const auto [o, c] = dims[i];
      const std::string name = "layer" + std::to_string(i);
      frames[f].push_back(make_tensor(name + ".weight", {o, c}, gaussian(o * c, 100 * f + i, 0.01f)));
      frames[f].push_back(make_tensor(name + ".bias", {o}, gaussian(o, 200 * f + i, 0.01f)));
    }
  const auto one = make_container("bird+(gamma=1.4)", frames, 7, 1);
  for (unsigned threads : {2u, 3u, 5u}) {
    INFO(threads << " threads");
    CHECK(make_container("bird+(gamma=1.4)", frames, 7, threads) == one);
  }
  // A weight that fails to load: whatever the thread count, the lowest-numbered failing weight's
  // error is the one reported. Weights 1 (64×576) and 3 (256×1152, the largest) fail: the queue
  // takes the largest weights first, so weight 3 fails first, and the workers still do the
  // weights before it in the frame (skipping those after it) until weight 1 fails too.
  for (unsigned threads : {1u, 2u, 3u, 5u}) {
    INFO(threads << " threads");
    EncodeOptions eo;
    eo.seed = 7;
    eo.threads = threads;
    SequenceEncoder enc(Pipeline::parse("bird+(gamma=1.4)"), eo);
    const std::string path = temp_path("plan_error.gcz");
    ContainerWriter w(path, true, enc.header("[]"));
    const auto& fr = frames[0];
    FrameSource src;
    src.count = fr.size();
    src.info = [&fr](size_t i) { return fr[i].info; };
    src.load = [&fr](size_t i) {
      if (i == 2 || i == 6) fail(ErrorCode::Input, "cannot load tensor " + std::to_string(i));
      return fr[i];
    };
    src.source = "mem";
    try {
      enc.encode_frame(src, w);
      FAIL("the frame encoded");
    } catch (const Error& e) {
      CHECK(std::string(e.what()) == "cannot load tensor 2");
    }
  }
}

TEST_CASE("raw records decode as views of the container when aligned, as exact copies otherwise",
          "[container]") {
  // A tensor with a NaN under --nonfinite=raw is stored raw. Its decoded bytes are the record's,
  // read in place (no copy) when they sit at an address aligned for the dtype; else copied into
  // aligned memory. Names and input paths of 1..8 characters move the record's offset through
  // every alignment (1.0: the name is in the record's metadata; 1.1: the path in the header).
  size_t views = 0;
  for (size_t len = 1; len <= 8; ++len)
    for (DType dt : {DType::F32, DType::F64, DType::F16}) {
      INFO("name length " << len << " dtype " << dtype_name(dt));
      std::vector<float> v = gaussian(3000, len);
      v[17] = std::numeric_limits<float>::quiet_NaN();
      Tensor f32 = make_tensor(std::string(len, 'w'), {3000}, v);
      Tensor t = f32;
      if (dt != DType::F32) {
        t.info.dtype = dt;
        std::vector<uint8_t> bytes(3000 * dtype_size(dt));
        from_f32(v.data(), v.size(), dt, bytes.data());
        t.data = Buffer(std::move(bytes));
      }
      EncodeOptions eo;
      eo.seed = 1;
      eo.nonfinite = NonFinite::Raw;
      SequenceEncoder enc(Pipeline::parse("topk(ratio=0.1) | fp16 | varint"), eo);
      const std::string path = temp_path("raw_view.gcz");
      {
        ContainerWriter w(path, true, enc.header("[{\"path\":\"" + std::string(len, 'p') + "\"}]"));
        FrameSource src;
        src.count = 1;
        src.info = [&t](size_t) { return t.info; };
        src.load = [&t](size_t) { return t; };
        src.source = "mem";
        const auto outcomes = enc.encode_frame(src, w);
        REQUIRE(outcomes[0].storage == Storage::Raw);
        w.finish();
      }
      ContainerReader r = ContainerReader::open(path);
      SequenceDecoder d(r);
      const Tensor a = d.decode(0, 0), b = d.decode(0, 0);
      REQUIRE(a.data.size() == t.data.size());
      CHECK(std::memcmp(a.data.data(), t.data.data(), t.data.size()) == 0);
      CHECK(reinterpret_cast<uintptr_t>(a.data.data()) % dtype_size(dt) == 0);
      views += a.data.data() == b.data.data();  // two decodes, one place: the container's bytes
      std::filesystem::remove(path);
    }
  CHECK(views > 0);
  CHECK(views < 24);  // some offsets are misaligned for f32/f64 and were copied
}

TEST_CASE("container writer: nothing is left behind on failure, no overwrite without force", "[container]") {
  std::string path = temp_path("exists.gcz");
  { std::ofstream(path) << "keep me"; }
  SequenceEncoder enc(Pipeline::parse("zstd"), {});
  CHECK_THROWS_AS(ContainerWriter(path, false, enc.header("[]")), Error);
  {
    ContainerWriter w(path, true, enc.header("[]"));
    w.begin_frame({0, true, "x"});
    // abandoned without finish(): the existing file is untouched and no temporary remains
  }
  CHECK(read_all(path) == std::vector<uint8_t>{'k', 'e', 'e', 'p', ' ', 'm', 'e'});
  size_t temps = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
    temps += e.path().filename().string().rfind(".gradcodec_test_exists.gcz.tmp", 0) == 0;
  CHECK(temps == 0);
  std::filesystem::remove(path);
}

namespace {
void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}
// Decodes every tensor of frame 0; the first error's message, or "" when all decode.
std::string decode_error(const ContainerReader& r, std::vector<Tensor>* out = nullptr) {
  try {
    SequenceDecoder d(r);
    d.decode_frame(0, [&](Tensor&& t) {
      if (out) out->push_back(std::move(t));
    });
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Corrupt);
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("container: zstd streams are read from the file in chunks, checked before their last chunk",
          "[container][corrupt]") {
  // A stream longer than the reader's 1 MiB chunk, one shorter, one empty tensor.
  std::vector<std::vector<Tensor>> frames = {{make_tensor("big", {400000}, gaussian(400000, 3, 1e-3f)),
                                              make_tensor("small", {5, 7}, gaussian(35, 4)),
                                              make_tensor("empty", {0}, {})}};
  for (const std::string& pipeline : {Pipeline::preset("lossless").text(), std::string("zstd(level=1)")}) {
    INFO(pipeline);
    const auto bytes = make_container(pipeline, frames);
    const std::string path = temp_path("chunks.gcz");
    write_file(path, bytes);
    const ContainerReader file = ContainerReader::open(path);
    const ContainerReader mem(InputFile::from_bytes(bytes, "mem.gcz"));
    // The chunks are the stream's bytes, whatever their size, from the file and from memory.
    for (size_t i = 0; i < 3; ++i) {
      const RecordMeta m = file.record(0, i);
      for (size_t k = 0; k < m.streams.size(); ++k) {
        const std::span<const uint8_t> whole = mem.stream_bytes(m, k);
        for (const ContainerReader* r : {&file, &mem})
          for (size_t chunk : {size_t{1}, size_t{1000}, size_t{1} << 20}) {
            INFO("tensor " << i << " stream " << k << " chunks of " << chunk);
            ContainerReader::StreamChunks c = r->stream_chunks(m, k, chunk);
            REQUIRE(c.size() == whole.size());
            std::vector<uint8_t> got;
            size_t count = 0;
            for (std::span<const uint8_t> s = c.next(); !s.empty(); s = c.next(), ++count) {
              CHECK(s.size() <= std::max<size_t>(chunk, 64));
              if (count == 0) CHECK(s.size() >= std::min<size_t>(whole.size(), 64));
              got.insert(got.end(), s.begin(), s.end());
            }
            CHECK(c.next().empty());
            c.finish();
            CHECK(std::equal(got.begin(), got.end(), whole.begin(), whole.end()));
          }
      }
    }
    // Decoded from the file (in chunks) and from memory (in place): the input, bit for bit.
    std::vector<Tensor> from_file, from_mem;
    CHECK(decode_error(file, &from_file).empty());
    CHECK(decode_error(mem, &from_mem).empty());
    REQUIRE(from_file.size() == 3);
    REQUIRE(from_mem.size() == 3);
    for (size_t i = 0; i < 3; ++i) {
      REQUIRE(from_file[i].data.size() == frames[0][i].data.size());
      REQUIRE(from_mem[i].data.size() == frames[0][i].data.size());
      if (frames[0][i].data.size() == 0) continue;  // the empty tensor (memcmp takes no null pointers)
      CHECK(std::memcmp(from_file[i].data.data(), frames[0][i].data.data(), from_file[i].data.size()) == 0);
      CHECK(std::memcmp(from_mem[i].data.data(), frames[0][i].data.data(), from_mem[i].data.size()) == 0);
    }
    // A damaged byte anywhere in the big stream — in its first chunk, where zstd meets it long
    // before the checksum is known, in the middle, in its last byte — is reported as the stream's
    // checksum mismatch, from the file and from memory; the small tensor still decodes alone.
    const RecordMeta big = file.record(0, 0);
    REQUIRE(big.streams.size() == 1);
    REQUIRE(big.streams[0].size > (size_t{1} << 20));
    for (uint64_t at : {uint64_t{0}, uint64_t{5}, uint64_t{200}, big.streams[0].size / 2, big.streams[0].size - 1}) {
      INFO("damage at byte " << at << " of the stream");
      auto bad = bytes;
      bad[big.streams[0].offset + at] ^= 0x5a;
      write_file(path, bad);
      const ContainerReader r = ContainerReader::open(path);
      // (1.1 checks the record as a whole, 1.0 each stream.)
      const std::string want = (big.whole_check ? std::string("record of tensor big")
                                                : "stream '" + big.streams[0].name + "' of tensor big") +
                               " at offset " + std::to_string(big.streams[0].offset) + ": checksum mismatch";
      CHECK_THAT(decode_error(r), Catch::Contains(want));
      CHECK_THAT(decode_error(ContainerReader(InputFile::from_bytes(bad, "mem.gcz"))), Catch::Contains(want));
      ContainerReader::StreamChunks c = r.stream_chunks(big, 0, 4096);
      c.next();
      CHECK_THROWS_WITH(c.finish(), Catch::Contains(want));
      ContainerReader::StreamChunks all = r.stream_chunks(big, 0, 4096);  // no finish(): the last next() checks
      CHECK_THROWS_WITH([&] { while (!all.next().empty()) {} }(), Catch::Contains(want));
      SequenceDecoder d(r);
      const Tensor small = d.decode(0, 1);
      CHECK(std::memcmp(small.data.data(), frames[0][1].data.data(), small.data.size()) == 0);
    }
    // The file shrinks under an open reader: a read past its new end is a container error (exit
    // 3, as for any damaged container), never a crash (reading through the mapping would fault).
    write_file(path, bytes);
    const ContainerReader r = ContainerReader::open(path);
    std::filesystem::resize_file(path, big.streams[0].offset + 10);
    try {
      r.stream_chunks(big, 0).next();
      FAIL("a read past the end of the shrunk file was accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Corrupt);
      CHECK_THAT(e.what(), Catch::Contains(path + ": the file shrank (or could not be read) while it was being read"));
    }
    std::filesystem::remove(path);
  }
}
