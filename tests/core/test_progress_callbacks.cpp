// SPDX-License-Identifier: BSD-3-Clause
// The progress callbacks the CLI's bar hangs on: EncodeOptions::progress is called once per
// tensor in record order, never twice at once, and changes no byte of the container;
// MergeOptions::progress never decreases and ends at its total, the same for every thread count.
#include <catch2/catch.hpp>

#include "stages/merge_support.hpp"

#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

using namespace gradcodec;
using namespace gradcodec::test;

namespace {

// 12 tensors of mixed sizes (so pool threads finish out of order) and one int32 pass-through.
std::vector<Tensor> frame_of(uint64_t seed) {
  std::vector<Tensor> fr;
  for (size_t i = 0; i < 12; ++i) {
    const uint64_t n = i % 3 == 0 ? 30000 - 1000 * i : 5 + 11 * i;
    char name[16];
    std::snprintf(name, sizeof name, "t%zu", i);  // ("t" + to_string trips GCC 12's -Wstringop-overflow)
    fr.push_back(make_tensor(name, {n}, gaussian(n, seed + i)));
  }
  fr.push_back(make_other("ids", "<i4", {4}, std::vector<uint8_t>(16, 7)));
  return fr;
}

// Encodes two frames; returns the container's bytes and the names the callback saw (if any).
std::vector<uint8_t> encode(unsigned threads, std::vector<std::string>* seen) {
  const std::string path = merge_temp("progress_" + std::to_string(threads) + ".gcz");
  const std::vector<std::vector<Tensor>> frames{frame_of(1), frame_of(100)};
  EncodeOptions eo;
  eo.seed = 9;
  eo.threads = threads;
  std::atomic<int> inside{0};
  bool overlapped = false;
  if (seen)
    eo.progress = [&](const TensorInfo& t) {
      if (inside.fetch_add(1) != 0) overlapped = true;
      seen->push_back(t.name);
      inside.fetch_sub(1);
    };
  SequenceEncoder enc(Pipeline::parse("topk(ratio=0.1) | qsgd(levels=15)"), eo);
  ContainerWriter w(path, true, enc.header("[]"));
  for (const auto& fr : frames) {
    FrameSource src = frame_source(fr);
    enc.encode_frame(src, w);
  }
  w.finish();
  CHECK_FALSE(overlapped);
  return file_bytes(path);
}

}  // namespace

TEST_CASE("EncodeOptions::progress: once per tensor, in record order, the same bytes with or without it",
          "[codec][progress]") {
  const std::vector<uint8_t> plain = encode(1, nullptr);
  std::vector<std::string> want;
  for (int f = 0; f < 2; ++f)
    for (const auto& t : frame_of(1)) want.push_back(t.info.name);  // pass-through included
  for (unsigned threads : {1u, 3u}) {
    INFO(threads << " threads");
    std::vector<std::string> seen;
    CHECK(encode(threads, &seen) == plain);
    CHECK(seen == want);
  }
}

TEST_CASE("MergeOptions::progress: never decreases, ends at its total, every element counted (M + 2) times",
          "[merge][progress]") {
  for (size_t w = 0; w < 3; ++w)
    write_container(merge_temp("pw" + std::to_string(w) + ".gcz"), "fp16", {frame_of(10 * w), frame_of(10 * w + 5)},
                    30 + w);
  std::vector<ContainerReader> readers;
  for (size_t w = 0; w < 3; ++w) readers.push_back(ContainerReader::open(merge_temp("pw" + std::to_string(w) + ".gcz")));
  std::vector<const ContainerReader*> ptrs;
  for (const auto& r : readers) ptrs.push_back(&r);
  uint64_t elements = 0;
  for (const auto& t : frame_of(0)) elements += t.info.elements();
  const uint64_t want_total = 2 * elements * (3 + 2);  // 2 frames, 3 workers' copies + merged + written
  MergeOptions o;
  o.method = MergeMethod::Mean;
  o.threads = 1;
  merge_containers(ptrs, merge_temp("pm_plain.gcz"), true, o);
  for (unsigned threads : {1u, 2u, 4u}) {
    INFO(threads << " threads");
    std::vector<std::pair<uint64_t, uint64_t>> calls;
    std::atomic<int> inside{0};
    bool overlapped = false;
    o.threads = threads;
    o.progress = [&](uint64_t done, uint64_t total) {
      if (inside.fetch_add(1) != 0) overlapped = true;
      calls.emplace_back(done, total);
      inside.fetch_sub(1);
    };
    merge_containers(ptrs, merge_temp("pm.gcz"), true, o);
    CHECK(file_bytes(merge_temp("pm.gcz")) == file_bytes(merge_temp("pm_plain.gcz")));
    CHECK_FALSE(overlapped);
    REQUIRE(!calls.empty());
    for (size_t i = 0; i < calls.size(); ++i) {
      REQUIRE(calls[i].second == want_total);
      if (i) REQUIRE(calls[i].first >= calls[i - 1].first);
    }
    CHECK(calls.back().first == want_total);
  }
}
