// SPDX-License-Identifier: BSD-3-Clause
// merge (gradcodec/merge.hpp, lib/aggregate/*): majority and mean exact on constructed cases,
// cascade unbiased over seeds, hop bit counts, container merge round trips and determinism for
// any thread count, refusals, and TCS's "previous aggregated update" after a merge (issue 9 item 5).
#include "aggregate/cascade.hpp"
#include "aggregate/majority.hpp"
#include "merge_support.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>

using namespace gradcodec;
using namespace gradcodec::test;

namespace {

std::vector<std::span<const float>> spans(const std::vector<std::vector<float>>& w) {
  return std::vector<std::span<const float>>(w.begin(), w.end());
}

int error_code(const std::function<void()>& f, std::string* what = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (what) *what = e.what();
    return static_cast<int>(e.code());
  }
  return 0;
}

}  // namespace

TEST_CASE("majority: the vote on constructed cases, ties go to 1", "[merge]") {
  using aggregate::majority_bits;
  auto vote = [](std::vector<std::vector<uint8_t>> b) {
    return majority_bits(std::vector<std::span<const uint8_t>>(b.begin(), b.end()));
  };
  // M = 3: columns with 0, 1, 2, 3 ones.
  CHECK(vote({{0, 1, 1, 1}, {0, 0, 1, 1}, {0, 0, 0, 1}}) == std::vector<uint8_t>{0, 0, 1, 1});
  // M = 4: 2 ones is a tie → 1; 1 one → 0; 3 ones → 1.
  CHECK(vote({{1, 1, 0, 1}, {1, 0, 0, 1}, {0, 0, 1, 1}, {0, 0, 0, 0}}) == std::vector<uint8_t>{1, 0, 0, 1});
  CHECK(aggregate::count_bits(1) == 1);
  CHECK(aggregate::count_bits(2) == 2);
  CHECK(aggregate::count_bits(3) == 2);
  CHECK(aggregate::count_bits(4) == 3);
  CHECK(aggregate::count_bits(15) == 4);

  // On values: signs of (1, -2, 3), (-1, -1, 1), (2, -5, -1): votes +, -, +; eta = mean of mean|g|.
  const std::vector<std::vector<float>> w = {{1, -2, 3}, {-1, -1, 1}, {2, -5, -1}};
  const MergedValues mv = merge_values(MergeMethod::Majority, spans(w), {});
  const float eta = static_cast<float>((2.0 + 1.0 + 8.0 / 3.0) / 3.0);
  CHECK(mv.values == std::vector<float>{eta, -eta, eta});
  // hop 1 sends a count in 0..1 (1 bit), hop 2 a count in 0..2 (2 bits); + 32 for the scale.
  CHECK(mv.hop_bits == std::vector<uint64_t>{3 + 32, 6 + 32});
}

TEST_CASE("mean: exact average, 32 bits per element per hop", "[merge]") {
  const std::vector<std::vector<float>> w = {{1, -2, 0.5f, 7}, {3, 2, 0.25f, -7}, {-1, 0, 0.25f, 1}};
  const MergedValues mv = merge_values(MergeMethod::Mean, spans(w), {});
  CHECK(mv.values == std::vector<float>{1, 0, static_cast<float>(1.0 / 3.0), static_cast<float>(1.0 / 3.0)});
  CHECK(mv.hop_bits == std::vector<uint64_t>{128, 128});
  const auto a = gaussian(500, 11), b = gaussian(500, 12);
  const MergedValues m2 = merge_values(MergeMethod::Mean, spans({a, b}), {});
  for (size_t j = 0; j < 500; ++j)
    REQUIRE(m2.values[j] == static_cast<float>((static_cast<double>(a[j]) + b[j]) / 2.0));
}

TEST_CASE("cascade: unbiased over seeds (every element within 4.5 standard errors)", "[merge]") {
  // 4 workers, 48 elements; S = 4000 seeds. The mean over seeds of each element must be within
  // 4.5·sd/√S of the true mean, sd the element's spread over the seeds.
  const size_t n = 48, S = 4000;
  const std::vector<std::vector<float>> w = {gaussian(n, 21), gaussian(n, 22), gaussian(n, 23, 2.0f),
                                             gaussian(n, 24, 0.5f)};
  std::vector<double> truth(n, 0), sum(n, 0), sq(n, 0);
  for (size_t j = 0; j < n; ++j) {
    for (const auto& x : w) truth[j] += x[j];
    truth[j] /= 4.0;
  }
  for (uint64_t s = 0; s < S; ++s) {
    const MergedValues mv = merge_values(MergeMethod::Cascade, spans(w), {s, 0, 0});
    for (size_t j = 0; j < n; ++j) {
      sum[j] += mv.values[j];
      sq[j] += static_cast<double>(mv.values[j]) * mv.values[j];
    }
  }
  for (size_t j = 0; j < n; ++j) {
    const double avg = sum[j] / S, sd = std::sqrt(std::max(0.0, sq[j] / S - avg * avg));
    INFO("element " << j << ": mean over seeds " << avg << ", truth " << truth[j] << ", sd " << sd);
    CHECK(std::fabs(avg - truth[j]) <= 4.5 * sd / std::sqrt(static_cast<double>(S)));
  }
}

TEST_CASE("cascade: ssdm hop is ±norm with P(+) = 1/2 + x/(2 norm)", "[merge]") {
  const std::vector<float> x = {3, -4};  // norm 5: P(+) = 0.8 and 0.1
  const size_t T = 40000;
  double plus0 = 0, plus1 = 0;
  for (uint64_t t = 0; t < T; ++t) {
    const auto y = aggregate::ssdm_roundtrip(x, Rng(t), 0);
    REQUIRE(std::fabs(y[0]) == 5.0f);
    REQUIRE(std::fabs(y[1]) == 5.0f);
    plus0 += y[0] > 0;
    plus1 += y[1] > 0;
  }
  CHECK(std::fabs(plus0 / T - 0.8) <= 4.5 * std::sqrt(0.8 * 0.2 / T));
  CHECK(std::fabs(plus1 / T - 0.1) <= 4.5 * std::sqrt(0.1 * 0.9 / T));
  const std::vector<std::vector<float>> w = {x, x, x};
  CHECK(merge_values(MergeMethod::Cascade, spans(w), {}).hop_bits == std::vector<uint64_t>{34, 34});
}

TEST_CASE("merge_values refuses fewer than 2 workers and unequal lengths", "[merge]") {
  const std::vector<std::vector<float>> one = {{1, 2}};
  const std::vector<std::vector<float>> uneven = {{1, 2}, {1}};
  CHECK(error_code([&] { merge_values(MergeMethod::Mean, spans(one), {}); }) == 1);
  CHECK(error_code([&] { merge_values(MergeMethod::Marsit, spans(uneven), {}); }) == 1);
  CHECK(error_code([] { parse_merge_method("average"); }) == 1);
  CHECK(parse_merge_method("marsit") == MergeMethod::Marsit);
}

TEST_CASE("is_sign_pipeline: sign, ssdm, onebit (after ef) only", "[merge]") {
  for (const char* p : {"sign", "sign(scale=none)", "ssdm", "ef | sign(scale=l1)", "ef | onebit", "sign | zstd"})
    CHECK(is_sign_pipeline(Pipeline::parse(p)));
  CHECK_FALSE(is_sign_pipeline(Pipeline::preset("lossless")));
  for (const char* p : {"fp16", "qsgd(levels=7)", "topk(ratio=0.1) | sign", "delta | sign"})
    CHECK_FALSE(is_sign_pipeline(Pipeline::parse(p)));
}

namespace {

// Worker w's two tensors for frame f.
std::vector<Tensor> worker_frame(size_t w, size_t f) {
  return {make_tensor("layer.weight", {40, 25}, gaussian(1000, 100 * w + f + 1)),
          make_tensor("layer.bias", {25}, gaussian(25, 100 * w + f + 50, 0.1f))};
}

void write_workers(const std::string& prefix, const std::string& pipeline, size_t M, size_t frames) {
  for (size_t w = 0; w < M; ++w) {
    std::vector<std::vector<Tensor>> fr;
    for (size_t f = 0; f < frames; ++f) fr.push_back(worker_frame(w, f));
    write_container(merge_temp(prefix + std::to_string(w) + ".gcz"), pipeline, fr, 10 + w);
  }
}

struct Opened {
  std::vector<ContainerReader> readers;
  std::vector<const ContainerReader*> ptrs;
  explicit Opened(const std::vector<std::string>& paths) {
    readers.reserve(paths.size());
    for (const auto& p : paths) readers.push_back(ContainerReader::open(p));
    for (const auto& r : readers) ptrs.push_back(&r);
  }
};

std::vector<std::string> names(const std::string& prefix, size_t M) {
  std::vector<std::string> v;
  for (size_t w = 0; w < M; ++w) v.push_back(merge_temp(prefix + std::to_string(w) + ".gcz"));
  return v;
}

}  // namespace

TEST_CASE("merge_containers: marsit of signsgd workers decodes to ±eta, same bytes for 1 and 2 threads", "[merge]") {
  write_workers("sg", "sign", 3, 2);
  Opened in(names("sg", 3));
  MergeOptions o;
  o.method = MergeMethod::Marsit;
  o.seed = 5;
  o.threads = 1;
  const MergeReport rep = merge_containers(in.ptrs, merge_temp("m1.gcz"), true, o);
  o.threads = 2;
  merge_containers(in.ptrs, merge_temp("m2.gcz"), true, o);
  CHECK(file_bytes(merge_temp("m1.gcz")) == file_bytes(merge_temp("m2.gcz")));
  CHECK(rep.frames == 2);
  CHECK(rep.tensors == 2);
  CHECK(rep.pipeline_text == "sign");
  // 2 hops, each (1000 + 32) + (25 + 32) bits per frame, 2 frames.
  CHECK(rep.hop_bits == std::vector<uint64_t>{2 * 1089, 2 * 1089});
  // The output is an ordinary sign container: decoded |v| = eta = mean of the workers' scales.
  ContainerReader out = ContainerReader::open(merge_temp("m1.gcz"));
  CHECK(Pipeline::from_json(out.header().pipeline_json).text() == "sign");
  const auto merged = decode_container(merge_temp("m1.gcz"));
  std::vector<std::vector<std::vector<std::vector<float>>>> workers;
  for (const auto& p : names("sg", 3)) workers.push_back(decode_container(p));
  for (size_t f = 0; f < 2; ++f)
    for (size_t i = 0; i < 2; ++i) {
      double eta = 0;
      for (const auto& w : workers) eta += std::fabs(w[f][i][0]) / 3.0;  // each worker's scale
      for (size_t j = 0; j < merged[f][i].size(); ++j) {
        REQUIRE(std::fabs(merged[f][i][j]) == Approx(eta).epsilon(1e-6));
        // All three workers agree → the merged sign is theirs.
        const bool s0 = workers[0][f][i][j] >= 0;
        if (s0 == (workers[1][f][i][j] >= 0) && s0 == (workers[2][f][i][j] >= 0))
          REQUIRE((merged[f][i][j] >= 0) == s0);
      }
    }
  o.seed = 6;
  merge_containers(in.ptrs, merge_temp("m3.gcz"), true, o);
  CHECK(file_bytes(merge_temp("m3.gcz")) != file_bytes(merge_temp("m1.gcz")));
}

TEST_CASE("merge_containers: many tensors of mixed sizes, same bytes and hop bits for 1, 2, 3 and 5 threads", "[merge]") {
  // 14 tensors per frame (sizes 7 to 40000, so the pool's threads finish out of order), 2 frames,
  // 3 workers; a deterministic and a stochastic method.
  for (const auto& [method, pipeline] : {std::pair{MergeMethod::Marsit, "sign"}, std::pair{MergeMethod::Cascade, "sign"},
                                         std::pair{MergeMethod::Mean, "fp16"}}) {
    for (size_t w = 0; w < 3; ++w) {
      std::vector<std::vector<Tensor>> fr(2);
      for (size_t f = 0; f < 2; ++f)
        for (size_t i = 0; i < 14; ++i) {
          const uint64_t n = i % 3 == 0 ? 40000 - 1000 * i : 7 + 13 * i;
          char name[16];
          std::snprintf(name, sizeof name, "t%zu", i);  // ("t" + to_string trips GCC 12's -Wstringop-overflow)
          fr[f].push_back(make_tensor(name, {n}, gaussian(n, 1000 * w + 10 * f + i + 1)));
        }
      write_container(merge_temp("mt" + std::to_string(w) + ".gcz"), pipeline, fr, 20 + w);
    }
    Opened in(names("mt", 3));
    MergeOptions o;
    o.method = method;
    o.seed = 3;
    o.threads = 1;
    const MergeReport one = merge_containers(in.ptrs, merge_temp("mt_1.gcz"), true, o);
    CHECK(one.tensors == 14);
    for (unsigned t : {2u, 3u, 5u}) {
      INFO(merge_method_name(method) << ", " << t << " threads");
      o.threads = t;
      const MergeReport rep = merge_containers(in.ptrs, merge_temp("mt_n.gcz"), true, o);
      CHECK(file_bytes(merge_temp("mt_n.gcz")) == file_bytes(merge_temp("mt_1.gcz")));
      CHECK(rep.hop_bits == one.hop_bits);
    }
  }
}

TEST_CASE("merge_containers: mean of lossless workers is the exact average; majority and cascade write sign", "[merge]") {
  write_workers("ll", "lossless", 2, 1);
  Opened in(names("ll", 2));
  MergeOptions o;
  o.method = MergeMethod::Mean;
  merge_containers(in.ptrs, merge_temp("mean.gcz"), true, o);
  const auto merged = decode_container(merge_temp("mean.gcz"));
  for (size_t i = 0; i < 2; ++i) {
    const auto a = values_of(worker_frame(0, 0)[i]), b = values_of(worker_frame(1, 0)[i]);
    for (size_t j = 0; j < a.size(); ++j)
      REQUIRE(merged[0][i][j] == static_cast<float>((static_cast<double>(a[j]) + b[j]) / 2));
  }
  // cascade merges any pipeline (here lossless inputs) and writes sign.
  o.method = MergeMethod::Cascade;
  CHECK(merge_containers(in.ptrs, merge_temp("casc.gcz"), true, o).pipeline_text == "sign");
  // majority needs sign inputs.
  o.method = MergeMethod::Majority;
  std::string what;
  CHECK(error_code([&] { check_mergeable(in.ptrs, o); }, &what) == 1);
  CHECK(what.find("not a 1-bit sign pipeline") != std::string::npos);
  CHECK(what.find(names("ll", 2)[0]) != std::string::npos);
}

TEST_CASE("check_mergeable: refusals name the mismatch", "[merge]") {
  write_workers("rf", "sign", 2, 2);
  const auto ok = names("rf", 2);
  MergeOptions o;
  o.method = MergeMethod::Marsit;
  std::string what;
  {  // one input
    Opened in({ok[0]});
    CHECK(error_code([&] { check_mergeable(in.ptrs, o); }, &what) == 1);
    CHECK(what.find("at least 2") != std::string::npos);
  }
  {  // frame count
    write_container(merge_temp("rf_one_frame.gcz"), "sign", {worker_frame(1, 0)});
    Opened in({ok[0], merge_temp("rf_one_frame.gcz")});
    CHECK(error_code([&] { check_mergeable(in.ptrs, o); }, &what) == 2);
    CHECK(what.find("frame(s)") != std::string::npos);
  }
  {  // tensor name
    auto fr = worker_frame(1, 0);
    fr[1].info.name = "layer.other";
    write_container(merge_temp("rf_name.gcz"), "sign", {fr, worker_frame(1, 1)});
    Opened in({ok[0], merge_temp("rf_name.gcz")});
    CHECK(error_code([&] { check_mergeable(in.ptrs, o); }, &what) == 2);
    CHECK(what.find("'layer.bias'") != std::string::npos);
    CHECK(what.find("'layer.other'") != std::string::npos);
  }
  {  // shape
    auto fr = worker_frame(1, 0);
    fr[0].info.shape = {25, 40};
    write_container(merge_temp("rf_shape.gcz"), "sign", {fr, worker_frame(1, 1)});
    Opened in({ok[0], merge_temp("rf_shape.gcz")});
    CHECK(error_code([&] { check_mergeable(in.ptrs, o); }, &what) == 2);
    CHECK(what.find("[40, 25]") != std::string::npos);
    CHECK(what.find("[25, 40]") != std::string::npos);
  }
  {  // pipeline: marsit of a top-k container
    write_container(merge_temp("rf_topk.gcz"), "topk(ratio=0.1)", {worker_frame(1, 0), worker_frame(1, 1)});
    Opened in({ok[0], merge_temp("rf_topk.gcz")});
    CHECK(error_code([&] { check_mergeable(in.ptrs, o); }, &what) == 1);
    CHECK(what.find("topk(ratio=0.1)") != std::string::npos);
  }
  {  // options that do not apply
    Opened in(ok);
    MergeOptions p = o;
    p.pipeline = Pipeline::parse("fp16");
    CHECK(error_code([&] { check_mergeable(in.ptrs, p); }, &what) == 1);
    p = o;
    p.method = MergeMethod::Mean;
    p.eta = 1.0;
    CHECK(error_code([&] { check_mergeable(in.ptrs, p); }, &what) == 1);
    CHECK_NOTHROW(check_mergeable(in.ptrs, o));
  }
}

TEST_CASE("merge then tcs: the previous aggregated update is the merged result", "[merge][tcs]") {
  // Issue 9 item 5. Workers' frames merged with --method mean and re-encoded with tcs: the output
  // container's tcs state at frame f+1 (its global mask, from the previous decoded update) is the
  // merged frame f, so it decodes exactly as tcs over the sequence of averaged gradients.
  const size_t M = 3, F = 4;
  write_workers("tc", "lossless", M, F);
  Opened in(names("tc", M));
  MergeOptions o;
  o.method = MergeMethod::Mean;
  o.seed = 8;
  o.pipeline = Pipeline::preset("tcs");
  merge_containers(in.ptrs, merge_temp("tc_merged.gcz"), true, o);

  std::vector<std::vector<Tensor>> averaged(F);
  for (size_t f = 0; f < F; ++f)
    for (size_t i = 0; i < 2; ++i) {
      std::vector<std::vector<float>> w;
      for (size_t m = 0; m < M; ++m) w.push_back(values_of(worker_frame(m, f)[i]));
      const Tensor t = worker_frame(0, f)[i];
      averaged[f].push_back(make_tensor(t.name(), t.shape(), merge_values(MergeMethod::Mean, spans(w), {}).values));
    }
  write_container(merge_temp("tc_direct.gcz"), Pipeline::preset("tcs").text(), averaged, 8);
  const auto merged = decode_container(merge_temp("tc_merged.gcz"));
  const auto direct = decode_container(merge_temp("tc_direct.gcz"));
  REQUIRE(merged.size() == F);
  CHECK(merged == direct);
  // A real dependence on the previous frame: decoding frame 2 alone rebuilds frames 0..1 first.
  ContainerReader r = ContainerReader::open(merge_temp("tc_merged.gcz"));
  SequenceDecoder dec(r);
  dec.decode(2, 0);
  CHECK(dec.frames_read() == 3);
}
