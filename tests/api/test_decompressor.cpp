// SPDX-License-Identifier: BSD-3-Clause
// Compressor::encode and Decompressor (gradcodec.hpp, docs/api.md "Compressor"): a receiver made
// with the sender's options, given the sender's records of each name in order, returns bit for
// bit what the sender's encode()/roundtrip() returned, for stateless, stateful (ef, delta,
// PowerSGD's warm start, Accordion) and solo-frame (tcs, bird, global top-k) pipelines; encode()'s
// bytes are the record as it stands in an Encoder's container; a damaged record (metadata,
// stream, truncated, appended to, another name's, invalid dtype or shape, over the memory limit)
// is refused with Error(Corrupt/Input) and changes nothing.
#include <gradcodec/gradcodec.hpp>

#include "base/checksum.hpp"
#include "gradient_frames.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

using namespace gradcodec;

namespace {

// One rank's gradient bucket in one step.
using Bucket = test::GradFrame;
using test::check_same;
using test::same_bytes;

std::vector<Bucket> make_buckets(size_t k, uint64_t seed) { return test::make_grad_frames(k, seed); }

bool contains(const std::vector<uint8_t>& hay, const std::vector<uint8_t>& needle) {
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end()) != hay.end();
}

CompressorOptions options(const std::string& preset, const std::string& pipeline, uint64_t seed) {
  CompressorOptions o;
  o.preset = preset;
  o.pipeline = pipeline;
  o.seed = seed;
  return o;
}

// The error code decode() throws for `record` as `name` (Internal when it throws none), and its
// message.
ErrorCode refused(Decompressor& d, const std::string& name, const std::vector<uint8_t>& record,
                  std::string* message = nullptr) {
  try {
    d.decode(name, record);
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  return ErrorCode::Internal;
}

// The record's metadata checksum recomputed after an edit of its metadata (a record damaged on
// purpose, which only the fields' own checks can refuse).
void reseal(std::vector<uint8_t>& rec) {
  uint32_t mlen;
  std::memcpy(&mlen, rec.data() + 4, 4);
  const uint64_t sum = xxh3(rec.data(), 8 + mlen);
  std::memcpy(rec.data() + 8 + mlen, &sum, 8);
}

// Where the metadata's fields after the name lie (a float tensor's record: no descr).
struct Fields {
  size_t dtype, ndim, shape;
};
Fields fields_of(const std::vector<uint8_t>& rec) {
  uint16_t name_len;
  std::memcpy(&name_len, rec.data() + 8, 2);
  const size_t dtype = 8 + 2 + name_len;
  return {dtype, dtype + 2, dtype + 3};
}

}  // namespace

TEST_CASE("decompressor: the sender's records decode bit for bit to what encode and roundtrip returned",
          "[compressor][decompressor]") {
  // Presets: stateless, stochastic, sparse with and without error feedback, PowerSGD's warm
  // start, Accordion's variants; pipelines with delta and ef; the solo_frames pipelines.
  struct Case {
    std::string preset, pipeline;
  };
  const Case c = GENERATE(values<Case>({{"lossless", ""},
                                        {"fp16", ""},
                                        {"qsgd4", ""},
                                        {"terngrad", ""},
                                        {"ef-signsgd", ""},
                                        {"topk-1pct", ""},
                                        {"randk-1pct", ""},
                                        {"dgc", ""},
                                        {"sbc", ""},
                                        {"powersgd-r1", ""},
                                        {"powersgd-r2", ""},
                                        {"accordion-powersgd", ""},
                                        {"accordion-topk", ""},
                                        {"", "delta | qsgd | zstd(level=3)"},
                                        {"", "ef | topk(ratio=0.05) | raw | varint"},
                                        {"", "tcs | raw"},
                                        {"", "bird | sign | plain | lzma(stream=index)"},
                                        {"", "ef | topk(ratio=0.05, scope=global) | raw | varint"}}));
  INFO(c.preset << c.pipeline);
  const auto buckets = make_buckets(4, 2);
  const CompressorOptions o = options(c.preset, c.pipeline, 17);
  Compressor sender(o), twin(o);  // twin: roundtrip() of the same calls
  Decompressor receiver(o);
  CHECK(receiver.pipeline_text() == sender.pipeline_text());
  // The Encoder's container of the same frames (same pipeline and seed): encode()'s bytes stand
  // in it, but for a pipeline that plans whole frames (whose container frames hold every
  // tensor). Accordion's too: here its alternatives are first used in their order (the first
  // one at frame 0), so the container numbers them k + 1 as a record on its own does.
  const bool in_container = !sender.solo_frames();
  std::vector<uint8_t> container;
  if (in_container) {
    VectorSink sink(container);
    EncoderOptions eo;
    eo.preset = c.preset;
    eo.pipeline = c.pipeline;
    eo.seed = 17;
    eo.format_minor = 0;  // a record on its own is a 1.0 record (docs/format.md), as 1.0 containers hold them
    Encoder e = Encoder::to_sink(sink, eo);
    for (const auto& b : buckets) e.add_frame(b.views());
    e.finish();
  }
  size_t lossy = 0, variants = 0;  // records of a float tensor made by a control stage's alternative
  for (size_t f = 0; f < buckets.size(); ++f) {
    for (const TensorView& v : buckets[f].views()) {
      INFO("frame " << f << ", " << v.name);
      Tensor sent;
      const std::vector<uint8_t> rec = sender.encode(v.name, v, &sent);
      CHECK(sender.last_bytes() == rec.size());
      check_same(sent, twin.roundtrip(v.name, v));
      CHECK(twin.last_bytes() == rec.size());
      if (in_container) CHECK(contains(container, rec));
      CHECK(receiver.calls(v.name) == f);
      check_same(receiver.decode(v.name, rec), sent);
      CHECK(receiver.calls(v.name) == f + 1);
      if (v.dtype == DType::F32)
        lossy += std::memcmp(sent.data.data(), v.data, sent.data.size()) != 0;
      if (v.dtype != DType::Other) {
        const size_t storage = fields_of(rec).shape + 8 * rec[fields_of(rec).ndim];
        variants += rec[storage] == 0 && rec[storage + 1] != 0;
      }
    }
  }
  // The records went through the pipeline: lossy unless lossless.
  CHECK((lossy > 0) == (c.preset != "lossless"));
  CHECK((variants > 0) == (c.preset.rfind("accordion", 0) == 0));
}

TEST_CASE("decompressor: encode without `decoded` makes the same records", "[compressor][decompressor]") {
  const std::string preset = GENERATE(as<std::string>{}, "qsgd4", "powersgd-r2", "topk-1pct");
  INFO(preset);
  const auto buckets = make_buckets(3, 4);
  const CompressorOptions o = options(preset, "", 5);
  Compressor a(o), b(o);
  Decompressor r(o);
  for (const auto& bk : buckets)
    for (const TensorView& v : bk.views()) {
      Tensor sent;
      const auto rec = a.encode(v.name, v, &sent);
      CHECK(b.encode(v.name, v) == rec);
      check_same(r.decode(v.name, rec), sent);
    }
}

TEST_CASE("decompressor: two senders with different seeds, each decoded by its own receiver",
          "[compressor][decompressor]") {
  // Two ranks of a data-parallel run, each with a seed of its own: PowerSGD's warm start (its
  // first Q from the seed) makes other records; random-k's positions need the sender's seed to
  // decode (a PowerSGD record carries both factors: any seed decodes it).
  const std::string preset = GENERATE(as<std::string>{}, "powersgd-r2", "randk-1pct");
  INFO(preset);
  const auto rank0 = make_buckets(3, 40), rank1 = make_buckets(3, 41);
  Compressor s0(options(preset, "", 100)), s1(options(preset, "", 200));
  Decompressor r0(options(preset, "", 100)), r1(options(preset, "", 200));
  Decompressor wrong(options(preset, "", 200));  // rank 0's records with rank 1's seed
  Compressor s0_other_seed(options(preset, "", 200));
  size_t differ = 0, other_records = 0;
  for (size_t f = 0; f < rank0.size(); ++f) {
    const auto v0 = rank0[f].views(), v1 = rank1[f].views();
    // Each rank encodes its bucket; the records are all-gathered; every rank decodes them all.
    std::vector<std::vector<uint8_t>> gathered[2];
    std::vector<Tensor> sent[2];
    for (size_t i = 0; i < v0.size(); ++i) {
      sent[0].emplace_back();
      sent[1].emplace_back();
      gathered[0].push_back(s0.encode(v0[i].name, v0[i], &sent[0].back()));
      gathered[1].push_back(s1.encode(v1[i].name, v1[i], &sent[1].back()));
      other_records += s0_other_seed.encode(v0[i].name, v0[i]) != gathered[0].back();
    }
    for (size_t i = 0; i < v0.size(); ++i) {
      INFO("frame " << f << ", " << v0[i].name);
      check_same(r0.decode(v0[i].name, gathered[0][i]), sent[0][i]);
      check_same(r1.decode(v1[i].name, gathered[1][i]), sent[1][i]);
      differ += !same_bytes(wrong.decode(v0[i].name, gathered[0][i]), sent[0][i]);
    }
  }
  CHECK(other_records > 0);
  CHECK((differ > 0) == (preset == "randk-1pct"));
}

TEST_CASE("decompressor: names positioned by the order the receiver first sees them", "[compressor][decompressor]") {
  // random-k's positions depend on the tensor's index: a receiver that first sees the names in
  // another order than the sender's first calls decodes other values; after the first calls,
  // any interleaving decodes right.
  const auto buckets = make_buckets(3, 8);
  const CompressorOptions o = options("randk-1pct", "", 3);
  Compressor s(o);
  std::vector<std::vector<std::vector<uint8_t>>> recs(buckets.size());
  std::vector<std::vector<Tensor>> sent(buckets.size());
  for (size_t f = 0; f < buckets.size(); ++f)
    for (const TensorView& v : buckets[f].views()) {
      sent[f].emplace_back();
      recs[f].push_back(s.encode(v.name, v, &sent[f].back()));
    }
  const auto names = buckets[0].views();
  // In order for frame 0, then each name's later records, the last name first.
  Decompressor good(o);
  for (size_t i = 0; i < names.size(); ++i) check_same(good.decode(names[i].name, recs[0][i]), sent[0][i]);
  for (size_t i = names.size(); i-- > 0;)
    for (size_t f = 1; f < buckets.size(); ++f) check_same(good.decode(names[i].name, recs[f][i]), sent[f][i]);
  // The first two names first seen the other way round.
  Decompressor swapped(o);
  const Tensor b0 = swapped.decode(names[1].name, recs[0][1]);
  const Tensor w0 = swapped.decode(names[0].name, recs[0][0]);
  CHECK_FALSE(same_bytes(w0, sent[0][0]));
  CHECK_FALSE(same_bytes(b0, sent[0][1]));
}

TEST_CASE("decompressor: a call the sender refused takes no position", "[compressor][decompressor]") {
  // The sender's first call of "layer.weight" holds NaN: refused (Error Input), no record, and
  // the name does not take the first position, which the receiver gives to the first name it sees.
  const auto buckets = make_buckets(2, 9);
  const CompressorOptions o = options("randk-1pct", "", 6);
  Compressor s(o);
  Decompressor r(o);
  std::vector<float> bad = buckets[0].w;
  bad[3] = std::numeric_limits<float>::quiet_NaN();
  try {
    s.encode("layer.weight", TensorView("layer.weight", {64, 48}, bad.data()));
    FAIL("NaN accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Input);
  }
  CHECK(s.calls("layer.weight") == 0);
  for (const auto& bk : buckets) {
    const auto views = bk.views();
    for (size_t i = views.size(); i-- > 0;) {  // the bias first
      Tensor sent;
      const auto rec = s.encode(views[i].name, views[i], &sent);
      check_same(r.decode(views[i].name, rec), sent);
    }
  }
}

TEST_CASE("decompressor: a damaged record is refused and changes nothing", "[compressor][decompressor]") {
  // Stateful pipelines (PowerSGD's warm start and error memory, ef, delta) and a stateless one;
  // after each refused record the receiver decodes the good one as if nothing had come.
  struct Case {
    std::string preset, pipeline;
  };
  const Case c = GENERATE(values<Case>({{"powersgd-r2", ""},
                                        {"", "ef | topk(ratio=0.05) | raw | varint"},
                                        {"", "delta | qsgd | zstd(level=3)"},
                                        {"topk-1pct", ""}}));
  INFO(c.preset << c.pipeline);
  const auto buckets = make_buckets(4, 12);
  const CompressorOptions o = options(c.preset, c.pipeline, 21);
  Compressor s(o);
  Decompressor r(o);
  const std::string w = "layer.weight", bias = "layer.bias";
  for (size_t f = 0; f < buckets.size(); ++f) {
    const auto views = buckets[f].views();
    std::vector<Tensor> sent(views.size());
    std::vector<std::vector<uint8_t>> recs;
    for (size_t i = 0; i < views.size(); ++i) recs.push_back(s.encode(views[i].name, views[i], &sent[i]));
    if (f >= 1) {
      INFO("frame " << f);
      const std::vector<uint8_t>& good = recs[0];  // layer.weight's record
      const Fields at = fields_of(good);
      std::string msg;
      auto corrupt = [&](std::vector<uint8_t> bad, const std::string& what, ErrorCode code = ErrorCode::Corrupt) {
        INFO(what);
        msg.clear();
        CHECK(refused(r, w, bad, &msg) == code);
        CHECK(msg.find("tensor 'layer.weight'") != std::string::npos);
        CHECK(r.calls(w) == f);
        return msg;
      };
      // A byte of the metadata flipped (its dtype; its name), then of the first and the last stream.
      auto flip = [&](size_t k) {
        auto b = good;
        b[k] ^= 0x10;
        return b;
      };
      CHECK(corrupt(flip(at.dtype), "metadata").find("checksum mismatch") != std::string::npos);
      CHECK(corrupt(flip(11), "name").find("checksum mismatch") != std::string::npos);
      uint32_t mlen;
      std::memcpy(&mlen, good.data() + 4, 4);
      REQUIRE(good.size() > 16 + mlen);
      CHECK(corrupt(flip(16 + mlen), "first stream").find("stream '") != std::string::npos);
      CHECK(corrupt(flip(good.size() - 1), "last stream").find("checksum mismatch") != std::string::npos);
      // Truncated: by a byte, to its metadata, to nothing; a byte appended.
      corrupt(std::vector<uint8_t>(good.begin(), good.end() - 1), "truncated by one");
      corrupt(std::vector<uint8_t>(good.begin(), good.begin() + 16 + mlen - 1), "truncated in the metadata");
      corrupt({}, "empty");
      corrupt(std::vector<uint8_t>(good.begin(), good.begin() + 7), "7 bytes");
      auto longer = good;
      longer.push_back(0);
      CHECK(corrupt(longer, "a byte appended").find("1 bytes after them") != std::string::npos);
      // Invalid dtype and shape, their checksum recomputed: an unknown dtype code, 40 dimensions,
      // a shape whose element count overflows, a float tensor passed through.
      auto edited = [&](size_t k, uint8_t v) {
        auto b = good;
        b[k] = v;
        reseal(b);
        return b;
      };
      CHECK(corrupt(edited(at.dtype, 9), "dtype").find("unknown dtype code 9") != std::string::npos);
      CHECK(corrupt(edited(at.ndim, 40), "ndim").find("40 dimensions") != std::string::npos);
      {
        auto b = good;
        const uint64_t huge = uint64_t{1} << 40;
        std::memcpy(b.data() + at.shape, &huge, 8);
        std::memcpy(b.data() + at.shape + 8, &huge, 8);
        reseal(b);
        CHECK(corrupt(b, "shape overflow").find("overflows") != std::string::npos);
      }
      // A shape of 2^40 elements that would need 4 TiB: over the memory limit, refused before
      // anything is allocated (Input).
      {
        auto b = good;
        const uint64_t big = uint64_t{1} << 34, rows = 64;
        std::memcpy(b.data() + at.shape, &rows, 8);
        std::memcpy(b.data() + at.shape + 8, &big, 8);
        reseal(b);
        CHECK(corrupt(b, "huge shape", ErrorCode::Input).find("memory limit") != std::string::npos);
      }
      // Another name's record, and this record given as another name (one the receiver knows,
      // one it has never seen: the latter takes no position).
      CHECK(corrupt(recs[1], "the bias's record").find("it is the record of tensor 'layer.bias'") != std::string::npos);
      CHECK(refused(r, "never.seen", good) == ErrorCode::Corrupt);
      CHECK(r.calls("never.seen") == 0);
      // The good records still decode, bit for bit.
    }
    for (size_t i = 0; i < views.size(); ++i) {
      INFO("frame " << f << ", " << views[i].name);
      check_same(r.decode(views[i].name, recs[i]), sent[i]);
    }
  }
  // The receiver's own memory limit.
  CompressorOptions small = o;
  small.memory_limit = 1000;
  Decompressor tight(small);
  Compressor s2(o);
  const auto v = buckets[0].views()[0];
  const auto rec = s2.encode(v.name, v);
  CHECK(refused(tight, v.name, rec) == ErrorCode::Input);
  CHECK(tight.calls(v.name) == 0);
}

TEST_CASE("decompressor: reset follows a sender that starts a name again, and a moved receiver goes on", "[compressor][decompressor]") {
  const auto buckets = make_buckets(3, 14);
  const CompressorOptions o = options("powersgd-r2", "", 2);
  Compressor s(o), fresh_sender(o);
  Decompressor r(o);
  const TensorView v0 = buckets[0].views()[0], v1 = buckets[1].views()[0], v2 = buckets[2].views()[0];
  r.decode(v0.name, s.encode(v0.name, v0));
  r.decode(v1.name, s.encode(v1.name, v1));
  CHECK(r.calls(v0.name) == 2);
  // A new sender (its frame 0) after the receiver's reset.
  r.reset(v0.name);
  CHECK(r.calls(v0.name) == 0);
  Tensor sent;
  const auto rec = fresh_sender.encode(v2.name, v2, &sent);
  Decompressor moved(std::move(r));
  Decompressor target(CompressorOptions{});
  target = std::move(moved);
  check_same(target.decode(v2.name, rec), sent);
  CHECK(target.calls(v2.name) == 1);
}
