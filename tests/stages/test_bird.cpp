// SPDX-License-Identifier: BSD-3-Clause
// bird / bird+ (Wu et al. 2023 (BIRD+); docs/stages.md "bird", "bird+"):
//  - splitting shape by shape (4-D kernels, 2-D rows, other ranks by the last dimension, vectors,
//    empty tensors) and the 1-D attach rule (sibling names and shapes, then end to end through
//    SequenceEncoder and a real container: which bias entries are sent, dense vectors, no sibling);
//  - expectation invariance over many seeds: BIRD+ per block on conv, linear and attention
//    shapes; BIRD per tensor (exact for both) and per block where the L∞ stage is neutral, and
//    BIRD's per-block bias on realistic data (the paper's "approximate" invariance);
//  - gamma: kept blocks non-increasing in gamma for every seed; keep=f lands within ±10% of f
//    (mean over seeds) on the bundled snapshot; the gamma solver itself; the table that
//    settles BIRD+'s trials without pow gives pow's decisions exactly;
//  - the plan's in-place norms equal the encoder's bit for bit (every dtype, long rows);
//  - all-zero, single-block, NaN/Inf tensors; exact stream sizes of the paper's wire; corrupt
//    side streams; parameter refusals and presets.
// Tolerances: invariance per block |z| ≤ 5 (z against the standard error of N = 20000 seeds),
// χ²/B ≤ 1 + 4√(2/B), summed deviation ≤ 1.5× its noise level; per tensor |z| ≤ 5 and 1%;
// keep=f: mean of 1000 seeds within ±10% of f; the γ solver: 1e-6 exact, 1% binned.
#include <catch2/catch.hpp>

#include "sparsify/bird_sample.hpp"
#include "sparsify/bird_trials.hpp"
#include "sparsify/bird_stage1.hpp"
#include "sparsify/bird_split.hpp"
#include "support.hpp"

#include <gradcodec/container.hpp>
#include <gradcodec/formats/snapshot_io.hpp>
#include <gradcodec/plugin/registry.hpp>

#include <algorithm>
#include <bit>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>

using namespace gradcodec;
using namespace gradcodec::test;
using stages::BirdRule;
using stages::bird_split;

namespace {

// Gradient-like values: N(0, 1) per element times a log-normal scale per block (blocks differ
// in magnitude by ~10× between the 5th and 95th percentile), times 1e-3.
std::vector<float> gradient_like(const std::vector<uint64_t>& shape, uint64_t seed) {
  const auto s = bird_split(shape);
  const uint64_t n = shape_elements(shape);
  Rng r(seed);
  std::vector<float> v(n);
  const uint64_t m = s.vector ? n : s.block;
  for (uint64_t b = 0; m > 0 && b < n / m; ++b) {
    const double scale = 1e-3 * std::exp(0.7 * r.normal());
    for (uint64_t k = 0; k < m; ++k) v[b * m + k] = static_cast<float>(scale * r.normal());
  }
  return v;
}

StageContext ctx_of(uint64_t seed, uint32_t tensor = 0) {
  StageContext c;
  c.seed = seed;
  c.tensor = tensor;
  return c;
}

std::vector<double> block_l1(const std::vector<float>& v, uint64_t m) {
  std::vector<double> out(v.size() / m, 0.0);
  for (size_t i = 0; i < v.size(); ++i) out[i / m] += std::fabs(static_cast<double>(v[i]));
  return out;
}

// Per-block mean and standard error of the decoded ‖t̃_i‖₁ over N seeds (seed_base + 0..N−1),
// and of the decoded tensor's L1 norm.
struct Moments {
  std::vector<double> mean, se;
  double total_mean = 0, total_se = 0;
};
Moments decoded_moments(const std::string& pipeline, const Tensor& t, int n, uint64_t seed_base) {
  const auto s = bird_split(t.shape());
  PipelineStages stages(Pipeline::parse(pipeline));
  std::vector<double> sum(s.blocks, 0.0), sum2(s.blocks, 0.0);
  double tsum = 0, tsum2 = 0;
  for (int seed = 0; seed < n; ++seed) {
    StageContext ctx = ctx_of(seed_base + static_cast<uint64_t>(seed));
    ctx.info = &t.info;
    PipelineStages::TensorState st;
    auto enc = stages.encode(t, ctx, st);
    auto got = block_l1(values_of(stages.decode(t.info, std::move(enc.streams), true, ctx, st)), s.block);
    double total = 0;
    for (uint64_t b = 0; b < s.blocks; ++b) sum[b] += got[b], sum2[b] += got[b] * got[b], total += got[b];
    tsum += total, tsum2 += total * total;
  }
  Moments m;
  auto stats = [n](double a, double a2, double& mean, double& se) {
    mean = a / n;
    se = std::sqrt(std::max(0.0, a2 / n - mean * mean) / n);
  };
  m.mean.resize(s.blocks), m.se.resize(s.blocks);
  for (uint64_t b = 0; b < s.blocks; ++b) stats(sum[b], sum2[b], m.mean[b], m.se[b]);
  stats(tsum, tsum2, m.total_mean, m.total_se);
  return m;
}

// Σ|mean_i − L_i| / Σ L_i.
double relative_deviation(const Moments& m, const std::vector<double>& want) {
  double dev = 0, total = 0;
  for (size_t b = 0; b < want.size(); ++b) dev += std::fabs(m.mean[b] - want[b]), total += want[b];
  return dev / total;
}

// Expectation invariance, block by block, at the noise level of the N seeds: with
// z_i = (mean_i − L_i)/max(se_i, 10⁻⁵·L_i), every |z_i| ≤ 5; Σ z_i²/B ≤ 1 + 4·√(2/B) (χ²_B within 4σ); and
// Σ|mean_i − L_i| ≤ 1.5·√(2/π)·Σ se_i (the summed deviation is noise, not bias).
void check_invariance(const Moments& m, const std::vector<double>& want) {
  REQUIRE(m.mean.size() == want.size());
  const double blocks = static_cast<double>(want.size());
  double chi2 = 0, dev = 0, noise = 0, worst = 0;
  for (size_t b = 0; b < want.size(); ++b) {
    // A block kept on every draw has se = 0; its mean differs from L_i only by the stage's f32
    // norm arithmetic (relative ~1e-7), hence the floor of 1e-5·L_i.
    const double z = (m.mean[b] - want[b]) / std::max(m.se[b], 1e-5 * want[b]);
    INFO("block " << b << ": mean " << m.mean[b] << ", want " << want[b] << ", se " << m.se[b]);
    CHECK(std::fabs(z) <= 5.0);
    chi2 += z * z, worst = std::max(worst, std::fabs(z));
    dev += std::fabs(m.mean[b] - want[b]), noise += std::sqrt(2 / M_PI) * m.se[b];
  }
  INFO("chi2/B " << chi2 / blocks << ", worst |z| " << worst << ", summed relative deviation "
                 << relative_deviation(m, want) << " (noise level " << dev / noise << " of expected)");
  CHECK(chi2 / blocks <= 1 + 4 * std::sqrt(2 / blocks));
  CHECK(dev <= 1.5 * noise);
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("gradcodec_bird_" + name)).string();
}

// Encodes a frame through SequenceEncoder into a real container and decodes every tensor.
struct FrameResult {
  std::vector<Tensor> decoded;
  std::vector<Storage> storage;
};
FrameResult encode_frame(const std::string& pipeline, const std::vector<Tensor>& snap, uint64_t seed) {
  const std::string path = temp_path(std::to_string(seed) + ".gcz");
  {
    EncodeOptions opt;
    opt.seed = seed;
    SequenceEncoder enc(Pipeline::parse(pipeline), opt);
    ContainerWriter w(path, true, enc.header("[]"));
    FrameSource src = frame_source(snap);
    enc.encode_frame(src, w);
    w.finish();
  }
  std::ifstream f(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), {});
  std::filesystem::remove(path);
  ContainerReader reader(InputFile::from_bytes(std::move(bytes), "bird.gcz"));
  SequenceDecoder dec(reader);
  FrameResult r;
  for (size_t i = 0; i < snap.size(); ++i) {
    r.decoded.push_back(dec.decode(0, i));
    r.storage.push_back(reader.record(0, i).storage);
  }
  return r;
}

std::vector<Tensor> bundled_snapshot() {
  auto reader = formats::open_snapshot(std::string(GRADCODEC_SOURCE_DIR) + "/test_data/snapshots/step_000.npz");
  std::vector<Tensor> out;
  for (size_t i = 0; i < reader->arrays().size(); ++i) out.push_back(reader->read(i));
  return out;
}

}  // namespace

TEST_CASE("bird splits tensors shape by shape", "[bird]") {
  auto conv = bird_split({16, 3, 5, 7});  // [O, I, kh, kw]: one block per kernel
  CHECK_FALSE(conv.vector);
  CHECK(conv.blocks == 48);
  CHECK(conv.block == 35);
  CHECK(conv.channels == 16);
  CHECK(conv.channel_of(0) == 0);
  CHECK(conv.channel_of(2) == 0);
  CHECK(conv.channel_of(3) == 1);
  CHECK(conv.channel_of(47) == 15);
  auto linear = bird_split({10, 512});  // [O, I]: one block per row (output unit)
  CHECK(linear.blocks == 10);
  CHECK(linear.block == 512);
  CHECK(linear.channel_of(7) == 7);
  auto r3 = bird_split({4, 5, 6});  // other ranks: the last dimension
  CHECK(r3.blocks == 20);
  CHECK(r3.block == 6);
  CHECK(r3.channel_of(9) == 1);
  auto r5 = bird_split({2, 3, 4, 5, 6});
  CHECK(r5.blocks == 120);
  CHECK(r5.block == 6);
  CHECK(r5.channel_of(60) == 1);
  CHECK(bird_split({1, 1, 1, 1}).blocks == 1);
  CHECK(bird_split({7}).vector);
  CHECK(bird_split({}).vector);
  CHECK(bird_split({0}).vector);
  for (const auto& empty : std::vector<std::vector<uint64_t>>{{3, 0, 2}, {0, 4}, {2, 2, 0, 3}}) {
    auto e = bird_split(empty);
    CHECK_FALSE(e.vector);
    CHECK(e.blocks == 0);
    CHECK(e.block == 1);
  }

  // Through the stage: every decoded kernel / row is all zero or all ±S (whole blocks kept),
  // and the index stream codes block numbers.
  for (const auto& shape : std::vector<std::vector<uint64_t>>{{8, 4, 3, 3}, {24, 40}, {6, 4, 10}}) {
    const auto s = bird_split(shape);
    Tensor t = make_tensor("w", shape, gradient_like(shape, 5));
    RoundTrip r = roundtrip("bird+(gamma=1) | sign | plain", t, 3);
    auto out = values_of(r.decoded);
    const auto index = r.streams.get("index");
    const uint64_t kept_blocks = (index.size() - 1) / 4;
    uint64_t nonzero_blocks = 0;
    for (uint64_t b = 0; b < s.blocks; ++b) {
      uint64_t nz = 0;
      for (uint64_t k = 0; k < s.block; ++k) nz += out[b * s.block + k] != 0.0f;
      INFO("shape " << shape_string(shape) << " block " << b);
      REQUIRE((nz == 0 || nz == s.block));
      nonzero_blocks += nz == s.block;
    }
    CHECK(nonzero_blocks == kept_blocks);
    CHECK(kept_blocks >= 1);
    CHECK(kept_blocks < s.blocks);
  }
}

TEST_CASE("bird norms: the plan's in-place tensor reader matches the encoder's f32 values bit for bit", "[bird]") {
  // The frame plan reads siblings from their bytes (f32 in place, other dtypes 8192 elements at a
  // time), the encoder from its f32 payload; the selection is cached across the two, so the
  // norms must agree exactly — for short blocks (done 8 at a time), long rows and rows longer
  // than 8192 (summed in pieces).
  for (const auto& shape : std::vector<std::vector<uint64_t>>{{37, 5, 3, 3}, {13, 1, 1, 1}, {9, 300}, {3, 20000}}) {
    const auto s = bird_split(shape);
    const auto v = gradient_like(shape, 31);
    for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
      INFO(shape_string(shape) << " " << dtype_name(dt));
      Tensor t = make_tensor("w", shape, v);
      std::vector<uint8_t> bytes(v.size() * dtype_size(dt));
      from_f32(v.data(), v.size(), dt, bytes.data());
      t.info.dtype = dt;
      t.data = Buffer(std::move(bytes));
      std::vector<float> a1, ai, b1, bi;
      stages::bird_norms(t, s.block, a1, ai);
      stages::bird_norms(values_of(t), s.block, b1, bi);
      REQUIRE(a1.size() == s.blocks);
      CHECK(std::memcmp(a1.data(), b1.data(), a1.size() * 4) == 0);
      CHECK(std::memcmp(ai.data(), bi.data(), ai.size() * 4) == 0);
      // and they are the norms (f32 arithmetic: relative 1e-5)
      const auto want = block_l1(values_of(t), s.block);
      for (uint64_t b = 0; b < s.blocks; ++b) REQUIRE(a1[b] == Approx(want[b]).epsilon(1e-5));
    }
  }
}

// n values whose magnitudes span 2^-30..2^9, with about one NaN in `nan_every`, one ±Inf in
// `inf_every` and one subnormal in 83.
static std::vector<float> mixed_values(Rng& r, uint64_t n, uint64_t nan_every, uint64_t inf_every) {
  std::vector<float> v(n);
  for (auto& x : v) {
    const uint64_t u = r.next_u64();
    x = static_cast<float>(r.normal() * std::ldexp(1.0, static_cast<int>(u % 40) - 30));
    if (u % nan_every == 0) x = std::numeric_limits<float>::quiet_NaN();
    if (u % inf_every == 0) x = (u & 1) ? INFINITY : -INFINITY;
    if (u % 83 == 0) x = 1e-41f;  // subnormal
  }
  return v;
}

// A 1-D f32 tensor of v whose bytes start `shift` bytes into their buffer (an odd address when
// shift is odd), as a reader's view into a file can.
static Tensor f32_at_offset(const std::vector<float>& v, size_t shift) {
  const uint64_t n = v.size();
  std::vector<uint8_t> bytes(4 * n + shift);
  std::memcpy(bytes.data() + shift, v.data(), 4 * n);
  Tensor t = make_tensor("w", {n}, v);
  const auto keep = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  t.data = Buffer::view(keep, keep->data() + shift, 4 * n);
  return t;
}

// What bird_norms returns besides the norms: the largest L1 norm as bird_max finds it (NaN never
// wins), and whether every L1 norm is finite.
static void check_summary(const stages::NormsSummary& got, const std::vector<float>& l1) {
  float top = 0;
  bool finite = true;
  for (float x : l1) {
    top = x > top ? x : top;
    finite = finite && std::isfinite(x);
  }
  CHECK(std::memcmp(&got.l1_max, &top, 4) == 0);
  CHECK(got.finite == finite);
}

TEST_CASE("bird norms' summary: the largest L1 norm and finiteness wherever the one odd block is", "[bird]") {
  // The summary is taken a chunk of 1024 L1 norms at a time, 32 at a time with AVX2 and the rest
  // one by one: one block larger than all others, or one +Inf, −Inf or NaN, is found at the start,
  // at a vector's or a chunk's edge and in a chunk's tail (3000 blocks: chunks of 1024, 1024, 952).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (uint64_t m : {uint64_t{1}, uint64_t{9}}) {
    for (uint64_t at : {0, 5, 31, 32, 1023, 1024, 1055, 2047, 2048, 2975, 2999}) {
      for (float odd : {1e30f, INFINITY, -INFINITY, nan}) {
        INFO("m=" << m << " odd block " << at << " value " << odd);
        Rng r(at + 7);
        std::vector<float> v(3000 * m);
        for (auto& x : v) x = static_cast<float>(r.normal());
        v[at * m + m / 2] = odd;
        std::vector<float> l1, linf, c1, ci;
        const auto got = stages::bird_norms(v, m, l1, linf);
        check_summary(got, l1);
        CHECK(got.finite == std::isfinite(odd));
        if (!std::isnan(odd)) CHECK(got.l1_max >= std::fabs(odd));  // the odd block's L1 is the largest
        CHECK(!std::isnan(got.l1_max));
        check_summary(stages::bird_norms_without_avx2(v, m, c1, ci), c1);
      }
    }
  }
}

TEST_CASE("bird_max: the largest element, NaN never wins, 0 for an empty or all-negative span", "[bird]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(stages::bird_max({}) == 0.0f);
  const std::vector<float> neg = {-1.0f, -0.0f, -3.0f};
  const float z = stages::bird_max(neg);
  CHECK(z == 0.0f);
  CHECK(!std::signbit(z));
  for (size_t n : {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{100}}) {
    for (size_t at = 0; at < n; at += 7) {
      INFO("n=" << n << " max at " << at);
      std::vector<float> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = (i % 3 == 0) ? nan : static_cast<float>(i % 5);
      v[at] = 9.5f;
      CHECK(stages::bird_max(v) == 9.5f);
      v[at] = INFINITY;
      CHECK(stages::bird_max(v) == INFINITY);
    }
  }
}

TEST_CASE("bird norms of short blocks are each block's sequential f32 sum and max, bit for bit", "[bird]") {
  // Blocks under 16 elements are summed several at a time (SIMD lanes); each block must still
  // get the plain in-order sum (s += |x|, starting at 0) and max (NaN never wins, NaN in the sum
  // propagates), whatever m, the block count (groups of 8 and a remainder) or the alignment,
  // with and without the AVX2 path for 8 ≤ m < 16.
  WARN("AVX2 norms on this CPU: " << (stages::bird_norms_avx2() ? "yes" : "no"));
  Rng r(5);
  for (uint64_t m = 1; m < 16; ++m) {
    for (uint64_t blocks : {uint64_t{1}, uint64_t{7}, uint64_t{8}, uint64_t{17}, uint64_t{24}, uint64_t{1003},
                            uint64_t{2500}}) {
      for (size_t shift : {size_t{0}, size_t{1}}) {  // f32 bytes at an odd address too
        INFO("m=" << m << " blocks=" << blocks << " shift=" << shift);
        const uint64_t n = m * blocks;
        const std::vector<float> v = mixed_values(r, n, 97, 89);
        const Tensor t = f32_at_offset(v, shift);
        std::vector<float> a1, ai, b1, bi, c1, ci;
        const auto na = stages::bird_norms(t, m, a1, ai);
        const auto nb = stages::bird_norms(v, m, b1, bi);
        const auto nc = stages::bird_norms_without_avx2(v, m, c1, ci);
        for (const auto& n : {na, nb, nc}) check_summary(n, a1);
        REQUIRE(a1.size() == blocks);
        REQUIRE(b1.size() == blocks);
        REQUIRE(c1.size() == blocks);
        for (uint64_t b = 0; b < blocks; ++b) {
          float s = 0, mx = 0;
          for (uint64_t k = 0; k < m; ++k) {
            const float a = std::fabs(v[b * m + k]);
            s += a;
            mx = a > mx ? a : mx;
          }
          uint32_t want[2], got[6];
          std::memcpy(&want[0], &s, 4), std::memcpy(&want[1], &mx, 4);
          std::memcpy(&got[0], &a1[b], 4), std::memcpy(&got[1], &ai[b], 4);
          std::memcpy(&got[2], &b1[b], 4), std::memcpy(&got[3], &bi[b], 4);
          std::memcpy(&got[4], &c1[b], 4), std::memcpy(&got[5], &ci[b], 4);
          INFO("block " << b);
          REQUIRE(got[0] == want[0]);
          REQUIRE(got[1] == want[1]);
          REQUIRE(got[2] == want[0]);
          REQUIRE(got[3] == want[1]);
          REQUIRE(got[4] == want[0]);
          REQUIRE(got[5] == want[1]);
        }
      }
    }
  }
}

// The norms of one run of elements as documented (bird_norms.hpp): below 16 in order, else lane
// j of 8 adds elements j, j + 8, … in order and the lanes are combined in order.
static void lane_norms(const float* x, uint64_t len, float& sum, float& max) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0}, mx[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const int lanes = len < 16 ? 1 : 8;
  for (uint64_t k = 0; k < len; ++k) {
    const int j = lanes == 1 ? 0 : static_cast<int>(k % 8);
    const float a = std::fabs(x[k]);
    s[j] += a;
    mx[j] = a > mx[j] ? a : mx[j];
  }
  float total = 0, top = 0;
  for (int j = 0; j < lanes; ++j) total += s[j], top = mx[j] > top ? mx[j] : top;
  sum = total, max = top;
}

TEST_CASE("bird norms of long blocks are 8 in-order lanes combined in order, bit for bit", "[bird]") {
  // Runs of 16 or more elements are summed in 8 lanes (vectors where the CPU has them), blocks
  // over 8192 elements piece by piece; the arithmetic must be exactly the documented one, for
  // every remainder mod 8, alignment and the NaN / Inf / subnormal mix.
  Rng r(6);
  // With AVX2, 16 ≤ m < 128 go 8 blocks at a time (lanes transposed); both paths are checked.
  for (uint64_t m : {uint64_t{16}, uint64_t{17}, uint64_t{23}, uint64_t{24}, uint64_t{25}, uint64_t{31},
                     uint64_t{49}, uint64_t{100}, uint64_t{127}, uint64_t{128}, uint64_t{768}, uint64_t{8192},
                     uint64_t{8199}, uint64_t{20005}}) {
    const uint64_t blocks = m > 1000 ? 3 : m < 40 ? 1100 : 45;  // 1100: past the first 1024-block chunk
    for (size_t shift : {size_t{0}, size_t{1}}) {
      INFO("m=" << m << " shift=" << shift);
      const uint64_t n = m * blocks;
      const std::vector<float> v = mixed_values(r, n, 1999, 1777);
      const Tensor t = f32_at_offset(v, shift);
      std::vector<float> a1, ai, b1, bi, c1, ci;
      const auto na = stages::bird_norms(t, m, a1, ai);
      const auto nb = stages::bird_norms(v, m, b1, bi);
      const auto nc = stages::bird_norms_without_avx2(v, m, c1, ci);
      REQUIRE(a1.size() == blocks);
      REQUIRE(b1.size() == blocks);
      REQUIRE(c1.size() == blocks);
      check_summary(na, a1);
      check_summary(nb, a1);
      check_summary(nc, a1);
      for (uint64_t b = 0; b < blocks; ++b) {
        float s = 0, mx = 0;
        for (uint64_t off = 0; off < m; off += 8192) {  // pieces of 8192, added in order
          float ps, pm;
          lane_norms(v.data() + b * m + off, std::min<uint64_t>(8192, m - off), ps, pm);
          s += ps;
          mx = pm > mx ? pm : mx;
        }
        INFO("block " << b);
        CHECK(std::memcmp(&a1[b], &s, 4) == 0);
        CHECK(std::memcmp(&ai[b], &mx, 4) == 0);
        CHECK(std::memcmp(&b1[b], &s, 4) == 0);
        CHECK(std::memcmp(&bi[b], &mx, 4) == 0);
        CHECK(std::memcmp(&c1[b], &s, 4) == 0);
        CHECK(std::memcmp(&ci[b], &mx, 4) == 0);
      }
    }
  }
}

TEST_CASE("bird stage 1: the vectorised keep loop picks the portable loop's blocks exactly", "[bird]") {
  // Where the CPU has AVX-512 the encoder decides eight blocks at a time; the decisions (and so
  // every bird container) must not depend on the machine. Zeros, NaN and ties with the maximum
  // are in the mix; sizes cross the 8-lane and 4096-block steps. (A change to the vector loop's
  // mixer, shifts or comparisons fails the first CHECK.)
  WARN("vectorised stage 1 on this CPU: " << (stages::bird_stage1_vectorised() ? "yes" : "no"));
  Rng gen(9);
  for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{8}, uint64_t{9}, uint64_t{4095},
                     uint64_t{4096}, uint64_t{4103}, uint64_t{100003}}) {
    for (uint64_t key_seed : {uint64_t{1}, uint64_t{2}}) {
      INFO("n=" << n << " stream " << key_seed);
      const Rng r(key_seed, 3, 7, RngPurpose::Stage1);
      std::vector<float> l1(n);
      float lmax = 0;
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t u = gen.next_u64();
        l1[i] = static_cast<float>(gen.uniform() * 5.0);
        if (u % 17 == 0) l1[i] = 0;
        if (u % 29 == 0) l1[i] = std::numeric_limits<float>::quiet_NaN();
        lmax = l1[i] > lmax ? l1[i] : lmax;
      }
      if (n > 2) l1[n / 2] = lmax, l1[n - 1] = lmax;  // ties with the maximum pass
      const double inv1 = lmax > 0 ? 1.0 / static_cast<double>(lmax) : 0.0;
      std::vector<uint64_t> a(n), b(n);
      a.resize(stages::bird_stage1(l1, lmax, inv1, r, a.data()));
      b.resize(stages::bird_stage1_portable(l1, lmax, inv1, r, b.data()));
      CHECK(a == b);
      // and the portable loop is the rule itself
      std::vector<uint64_t> want;
      for (uint64_t i = 0; i < n; ++i) {
        const double u = static_cast<double>(r.at(i) >> 11) * 0x1.0p-53;
        if (l1[i] >= lmax || u < static_cast<double>(l1[i]) * inv1) want.push_back(i);
      }
      CHECK(b == want);
    }
  }
  // Every block ties the maximum: every lane of every step is kept, so the vector loop's whole
  // 8-lane stores reach the last slot of the caller's room of exactly one entry per block (a
  // heap buffer of that size: ASan builds check the bound).
  const std::vector<float> flat(8197, 2.5f);
  const auto room = std::make_unique<uint64_t[]>(flat.size());
  const size_t count = stages::bird_stage1(flat, 2.5f, 0.4, Rng(1, 0, 0, RngPurpose::Stage1), room.get());
  REQUIRE(count == flat.size());
  const std::vector<uint64_t> all(room.get(), room.get() + count);
  for (uint64_t i = 0; i < all.size(); ++i) CHECK(all[i] == i);
}

TEST_CASE("bird attach rule: which 1-D tensors have a sibling", "[bird]") {
  CHECK(stages::bird_sibling_name("layer1.conv.bias") == "layer1.conv.weight");
  CHECK(stages::bird_sibling_name("attn.in_proj_bias") == "attn.in_proj_weight");
  CHECK(stages::bird_sibling_name("bias") == "weight");
  CHECK(stages::bird_sibling_name("bn.running_var") == "bn.weight");
  CHECK(stages::bird_sibling_name("ln.weight") == "ln.weight");

  std::vector<TensorInfo> infos;
  auto add = [&](const std::string& name, std::vector<uint64_t> shape, DType dt = DType::F32) {
    TensorInfo t;
    t.name = name;
    t.shape = std::move(shape);
    t.dtype = dt;
    infos.push_back(t);
    return static_cast<int64_t>(infos.size() - 1);
  };
  const int64_t conv_w = add("conv.weight", {8, 4, 3, 3});
  const int64_t conv_b = add("conv.bias", {8});
  const int64_t bn_w = add("bn.weight", {8});           // its "X.weight" is itself, 1-D
  const int64_t bn_b = add("bn.bias", {8});             // sibling bn.weight is 1-D
  const int64_t fc_b = add("fc.bias", {5});             // sibling may come later in the frame
  const int64_t fc_w = add("fc.weight", {5, 32});
  const int64_t fc_gain = add("fc.gain", {5});          // any 1-D leaf of the module
  const int64_t fc_scalar = add("fc.scale", {});        // 0-D: never attached
  const int64_t mis_w = add("mis.weight", {5, 32});
  const int64_t mis_b = add("mis.bias", {6});           // shape[0] differs
  const int64_t orphan = add("orphan.bias", {4});       // no orphan.weight
  const int64_t attn_w = add("attn.in_proj_weight", {12, 4});
  const int64_t attn_b = add("attn.in_proj_bias", {12});
  const int64_t empty_w = add("e.weight", {3, 0});
  const int64_t empty_b = add("e.bias", {3});           // sibling has no blocks
  const int64_t int_w = add("i.weight", {3, 2}, DType::Other);
  const int64_t int_b = add("i.bias", {3});             // sibling is not floating
  const int64_t step = add("step.bias", {2}, DType::Other);
  auto map = stages::bird_attach_map(infos.size(), [&](size_t i) { return infos[i]; });
  REQUIRE(map.size() == infos.size());
  CHECK(map[conv_b] == conv_w);
  CHECK(map[fc_b] == fc_w);
  CHECK(map[fc_gain] == fc_w);
  CHECK(map[attn_b] == attn_w);
  for (int64_t none : {conv_w, bn_w, bn_b, fc_w, fc_scalar, mis_w, mis_b, orphan, attn_w, empty_w, empty_b, int_w,
                       int_b, step}) {
    INFO(infos[none].name);
    CHECK(map[none] == -1);
  }
}

TEST_CASE("bird attach rule end to end: bias entries follow the sampled output channels", "[bird]") {
  // Conv and linear layers with biases, a BatchNorm pair and an orphan vector (sent dense), a
  // mismatched bias (dense), big enough that records stay under their raw size.
  std::vector<Tensor> snap;
  auto add = [&](const std::string& name, std::vector<uint64_t> shape, uint64_t seed) {
    snap.push_back(make_tensor(name, shape, gradient_like(shape, seed)));
  };
  add("conv.weight", {64, 16, 3, 3}, 1);
  add("conv.bias", {64}, 2);
  add("bn.weight", {64}, 3);
  add("bn.bias", {64}, 4);
  add("fc.bias", {96}, 5);  // before its weight: the plan does not care about order
  add("fc.weight", {96, 128}, 6);
  add("mis.weight", {40, 50}, 7);
  add("mis.bias", {41}, 8);
  add("orphan.bias", {33}, 9);
  const std::map<std::string, std::string> sibling = {{"conv.bias", "conv.weight"}, {"fc.bias", "fc.weight"}};
  auto index_of = [&](const std::string& name) {
    for (size_t i = 0; i < snap.size(); ++i)
      if (snap[i].name() == name) return i;
    FAIL("no tensor " << name);
    return size_t{0};
  };
  // gamma=6 keeps few blocks per channel; gamma=1 keeps blocks in many channels of a weight, so
  // that each of their bias entries must be found from the kept blocks (not only the first's).
  uint64_t partial = 0, several = 0;
  for (const std::string pipeline : {"bird+(gamma=6) | sign | plain | lzma(stream=index)",
                                     "bird+(gamma=1) | sign | plain | lzma(stream=index)"})
  for (uint64_t seed : {1, 2, 3}) {
    FrameResult r = encode_frame(pipeline, snap, seed);
    for (size_t i = 0; i < snap.size(); ++i) {
      const Tensor& t = snap[i];
      INFO(t.name() << " seed " << seed);
      auto in = values_of(t), out = values_of(r.decoded[i]);
      if (t.shape().size() >= 2) {
        REQUIRE(r.storage[i] == Storage::Pipeline);
        // The frame's weight (selection cached by the plan) equals the tensor encoded alone.
        CHECK(values_of(roundtrip(pipeline, t, seed, 0, static_cast<uint32_t>(i)).decoded) == out);
        continue;
      }
      auto sib = sibling.find(t.name());
      if (sib == sibling.end()) {  // no sibling: sent dense, exactly (fp32 entries or raw record)
        CHECK(out == in);
        continue;
      }
      const Tensor& w = snap[index_of(sib->second)];
      const auto split = bird_split(w.shape());
      auto wout = values_of(r.decoded[index_of(sib->second)]);
      std::vector<bool> sampled(split.channels, false);
      for (uint64_t b = 0; b < split.blocks; ++b)
        if (wout[b * split.block] != 0.0f) sampled[split.channel_of(b)] = true;
      uint64_t sent = 0;
      for (uint64_t o = 0; o < in.size(); ++o) {
        INFO("entry " << o);
        REQUIRE(out[o] == (sampled[o] ? in[o] : 0.0f));
        sent += sampled[o];
      }
      CHECK(r.storage[i] == Storage::Pipeline);
      partial += sent > 0 && sent < in.size();
      several += sent > 1 && sent < in.size();
    }
  }
  CHECK(partial >= 3);  // the rule did drop entries
  CHECK(several >= 3);  // and kept several channels of a weight but not all

  // vectors=dense: every vector comes back whole.
  FrameResult d = encode_frame("bird+(gamma=6, vectors=dense) | sign | plain | lzma(stream=index)", snap, 1);
  for (size_t i = 0; i < snap.size(); ++i)
    if (snap[i].shape().size() == 1) CHECK(values_of(d.decoded[i]) == values_of(snap[i]));
}

TEST_CASE("bird+ expectation invariance per block on conv, linear and attention shapes", "[bird]") {
  // For every block i, the mean over N = 20000 seeds of the decoded ‖t̃_i‖₁ must match ‖t_i‖₁
  // (check_invariance: every |z| ≤ 5, χ²/B within 4σ of 1, summed |deviation| within 1.5× its
  // noise level). Through the paper's pipeline (sign values: decoded block = sign(t)·S).
  const int N = 20000;
  struct Case {
    std::string what;
    std::vector<uint64_t> shape;
    std::string pipeline;
  };
  const std::vector<Case> cases = {
      {"conv", {8, 6, 3, 3}, "bird+(gamma=1.4) | sign | plain"},
      {"linear", {40, 64}, "bird+(gamma=1.4) | sign | plain"},
      {"attention in_proj", {96, 32}, "bird+(gamma=2) | sign | plain"},
      {"conv, keep=10%", {8, 6, 3, 3}, "bird+(keep=0.1) | sign | plain"},
      {"attention, keep=1% (thinned: gamma = inf, lambda < 1)", {96, 32}, "bird+(keep=0.01) | sign | plain"},
  };
  for (const auto& c : cases) {
    INFO(c.what << " " << shape_string(c.shape) << " " << c.pipeline);
    Tensor t = make_tensor("w", c.shape, gradient_like(c.shape, 17));
    const auto want = block_l1(values_of(t), bird_split(c.shape).block);
    check_invariance(decoded_moments(c.pipeline, t, N, 0), want);
  }
}

TEST_CASE("bird expectation invariance: exact per tensor, per block when L-inf is neutral", "[bird]") {
  const int N = 20000;
  // (a) Per tensor, for BIRD and BIRD+: the decoded L1 is m·S·|V| = m·S₁·|U| for every seed
  //     and E|U| = Σ L_i / Lmax, so the mean decoded L1 must match ‖t‖₁: |z| ≤ 5 and within 1%.
  // (b) BIRD per block on tensors whose blocks share one L∞ (p∞ = 1 on all of U: V = U), so
  //     only stage 1 acts: check_invariance as for BIRD+.
  // (c) On gradient-like data BIRD's per-block expectation is biased toward blocks of large L∞
  //     (the paper: BIRD's invariance is approximate, BIRD+'s strict): BIRD's summed relative
  //     per-block deviation is ≥ 5% and ≥ 3× BIRD+'s on the same tensor and seeds.
  const std::vector<std::vector<uint64_t>> shapes = {{8, 6, 3, 3}, {40, 64}, {96, 32}};
  for (const auto& shape : shapes) {
    INFO(shape_string(shape));
    const auto s = bird_split(shape);
    Tensor t = make_tensor("w", shape, gradient_like(shape, 23));
    const auto want = block_l1(values_of(t), s.block);
    double want_total = 0;
    for (double w : want) want_total += w;
    const Moments bird = decoded_moments("bird | sign | plain", t, N, 100000);
    const Moments plus = decoded_moments("bird+(gamma=1.4) | sign | plain", t, N, 100000);
    for (const Moments* mo : {&bird, &plus}) {  // (a)
      INFO((mo == &bird ? "bird" : "bird+") << ": mean tensor L1 " << mo->total_mean << ", want " << want_total);
      CHECK(std::fabs(mo->total_mean - want_total) <= 5 * mo->total_se);
      CHECK(std::fabs(mo->total_mean / want_total - 1) <= 0.01);
    }
    const double dev_bird = relative_deviation(bird, want), dev_plus = relative_deviation(plus, want);
    INFO("per-block summed relative deviation: bird " << dev_bird << ", bird+ " << dev_plus);
    CHECK(dev_bird >= 0.05);  // (c)
    CHECK(dev_bird >= 3 * dev_plus);

    // (b): every block holds one element of magnitude 1 (the same L∞) and smaller others.
    std::vector<float> v = gradient_like(shape, 29);
    for (uint64_t b = 0; b < s.blocks; ++b) {
      for (uint64_t k = 0; k < s.block; ++k) v[b * s.block + k] = std::clamp(v[b * s.block + k] * 100.0f, -0.9f, 0.9f);
      v[b * s.block + b % s.block] = b % 2 ? 1.0f : -1.0f;
    }
    Tensor flat = make_tensor("w", shape, v);
    check_invariance(decoded_moments("bird | sign | plain", flat, N, 200000), block_l1(v, s.block));
  }
}
TEST_CASE("bird+ keeps fewer blocks as gamma grows, for every seed", "[bird]") {
  const auto snap = bundled_snapshot();
  const std::vector<double> gammas = {0, 0.5, 1, 1.4, 2, 4, 8, 16};
  std::vector<double> mean(gammas.size(), 0.0);
  uint64_t block_elements = 0;
  for (const auto& t : snap)
    if (t.shape().size() >= 2) block_elements += t.elements();
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::vector<uint64_t> kept(gammas.size(), 0);
    for (size_t g = 0; g < gammas.size(); ++g) {
      BirdRule rule;
      rule.plus = true;
      rule.gamma = gammas[g];
      for (size_t i = 0; i < snap.size(); ++i) {
        const auto s = bird_split(snap[i].shape());
        if (s.vector) continue;
        auto sel = stages::bird_select(values_of(snap[i]), s.blocks, s.block, rule, ctx_of(seed, uint32_t(i)));
        kept[g] += sel.blocks.size() * s.block;
      }
      mean[g] += double(kept[g]) / double(block_elements) / 20;
    }
    INFO("seed " << seed);
    for (size_t g = 1; g < gammas.size(); ++g) CHECK(kept[g] <= kept[g - 1]);
  }
  std::string line;
  for (size_t g = 0; g < gammas.size(); ++g) line += " gamma " + std::to_string(gammas[g]) + ": " + std::to_string(mean[g]);
  INFO("mean kept fraction:" << line);
  for (size_t g = 1; g < gammas.size(); ++g) CHECK(mean[g] < mean[g - 1]);
  CHECK(mean.back() < 0.2 * mean.front());

  // The same through the registered stage: the pipeline's value count follows suit.
  Tensor t = make_tensor("w", {64, 32, 3, 3}, gradient_like({64, 32, 3, 3}, 41));
  uint64_t prev = UINT64_MAX;
  for (double g : gammas) {
    RoundTrip r = roundtrip("bird+(gamma=" + format_number(g, ParamType::Float) + ") | sign | plain", t, 9);
    const uint64_t k = (r.streams.get("index").size() - 1) / 4;
    CHECK(k <= prev);
    prev = k;
  }
}

TEST_CASE("bird+ keep=f lands within 10% of f on the bundled snapshot", "[bird]") {
  // Kept fraction = kept block elements / elements of the block-split (≥2-D) tensors; vectors
  // are not sampled (attached or dense) and not counted. keep=f makes the *expected* fraction f
  // (given stage 1); one seed varies around it (at f = 0.001 the target is ~110 elements and a
  // single 512-element row of cnn.fc.weight is kept with probability 0.01), so the mean over
  // 1000 seeds is checked against f ± 10%, and one seed at f = 0.1 against f ± 10%.
  const auto snap = bundled_snapshot();
  uint64_t block_elements = 0;
  for (const auto& t : snap)
    if (t.shape().size() >= 2) block_elements += t.elements();
  REQUIRE(block_elements > 100000);
  std::vector<std::vector<float>> values;
  for (const auto& t : snap) values.push_back(values_of(t));
  for (double f : {0.001, 0.01, 0.1}) {
    BirdRule rule;
    rule.plus = true;
    rule.keep = f;
    const int seeds = 1000;
    double sum = 0, first = 0;
    for (int seed = 0; seed < seeds; ++seed) {
      uint64_t kept = 0;
      for (size_t i = 0; i < snap.size(); ++i) {
        const auto s = bird_split(snap[i].shape());
        if (s.vector) continue;
        auto sel = stages::bird_select(values[i], s.blocks, s.block, rule, ctx_of(uint64_t(seed), uint32_t(i)));
        kept += sel.blocks.size() * s.block;
      }
      const double frac = double(kept) / double(block_elements);
      sum += frac;
      if (seed == 0) first = frac;
    }
    const double mean = sum / seeds;
    INFO("keep=" << f << ": mean kept fraction " << mean << ", seed 0: " << first);
    CHECK(mean >= 0.9 * f);
    CHECK(mean <= 1.1 * f);
    if (f == 0.1) {
      CHECK(first >= 0.9 * f);
      CHECK(first <= 1.1 * f);
    }
  }
}

TEST_CASE("bird gamma solver meets the target count", "[bird]") {
  Rng r(77);
  for (size_t n : {size_t{50}, size_t{4000}, size_t{100000}}) {
    std::vector<float> p(n);
    for (auto& x : p) x = static_cast<float>(std::pow(r.uniform(), 3.0));  // skewed toward 0
    p[n / 2] = 1.0f;
    for (double frac : {0.02, 0.1, 0.3}) {
      const double target = frac * double(n);
      auto fit = stages::bird_fit_gamma(p, target);
      double sum = 0;
      for (float x : p) sum += std::pow(double(x), fit.gamma);
      INFO("n " << n << " target " << target << " gamma " << fit.gamma << " sum " << sum);
      CHECK(fit.lambda == 1.0);
      CHECK(fit.gamma > 0);
      // exact terms (n ≤ 4096): 1e-6; histogram of 2⁻⁷-wide bins: 1%.
      CHECK(std::fabs(sum / target - 1) <= (n <= 4096 ? 1e-6 : 0.01));
    }
  }
  std::vector<float> p = {1.0f, 0.5f, 1.0f, 0.25f};
  auto all = stages::bird_fit_gamma(p, 4.0);  // T ≥ |U|: gamma 0 keeps all
  CHECK(all.gamma == 0);
  auto thin = stages::bird_fit_gamma(p, 0.5);  // T ≤ c₁ = 2: gamma ∞, λ = T / c₁
  CHECK(std::isinf(thin.gamma));
  CHECK(thin.lambda == 0.25);
}

TEST_CASE("bird+ trial table: PowLess decides u < p^gamma exactly as pow does", "[bird]") {
  // Random (u, p) pairs, and the pairs where the table could go wrong: p on and next to the
  // table's points k/256, tiny and subnormal p, u equal to pow(p, γ) and its neighbours, u = 0.
  Rng r(2024);
  std::vector<float> ps = {0.0f, std::numeric_limits<float>::denorm_min(), 1e-30f, 1e-7f, std::nextafter(1.0f, 0.0f),
                           1.0f, std::numeric_limits<float>::quiet_NaN()};
  for (int k = 1; k < 256; ++k) {
    const float a = static_cast<float>(k) / 256.0f;
    ps.insert(ps.end(), {a, std::nextafter(a, 0.0f), std::nextafter(a, 1.0f)});
  }
  for (int i = 0; i < 20000; ++i) ps.push_back(static_cast<float>(r.uniform()));
  for (double gamma : {0.25, 0.7, 1.0, 1.4, 2.0, 8.0, 50.0, 1e6}) {
    const stages::PowLess less(gamma);
    uint64_t checked = 0, mismatches = 0, successes = 0;
    for (float p : ps) {
      const double q = std::pow(static_cast<double>(p), gamma);
      std::vector<double> us = {0.0, r.uniform(), r.uniform(), 0x1p-53};
      if (q > 0 && q < 1) us.insert(us.end(), {q, std::nextafter(q, 0.0), std::nextafter(q, 1.0)});
      for (double u : us) {
        const bool want = u < q;
        mismatches += less(u, p) != want;
        successes += want;
        ++checked;
      }
    }
    INFO("gamma " << gamma << ": " << checked << " trials, " << successes << " successes");
    CHECK(mismatches == 0);
    CHECK(successes > 0);  // both outcomes are exercised
    CHECK(successes < checked);
  }
}

TEST_CASE("bird+ trials: the vectorised loop counts what the portable loop counts", "[bird]") {
  WARN("vectorised bird+ trials on this CPU: " << (stages::bird_plus_trials_vectorised() ? "yes" : "no"));
  // p on and next to the table's points, outside [0, 1) (negative, 1, above 1, infinite, NaN) and
  // random; counters random and in runs, as U is. Every window of 8 (one vector step) and every
  // length is compared, so that a lane decided wrongly cannot hide behind another.
  Rng r(77);
  std::vector<float> ps = {0.0f, -0.0f, -1e-3f, 1.0f, 1.5f, std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(),
                           std::nextafter(1.0f, 0.0f)};
  for (int k = 1; k < 256; k += 5) {
    const float a = static_cast<float>(k) / 256.0f;
    ps.insert(ps.end(), {a, std::nextafter(a, 0.0f), std::nextafter(a, 1.0f)});
  }
  while (ps.size() < 3000) ps.push_back(static_cast<float>(r.uniform()));
  std::vector<uint64_t> u_set(ps.size());
  for (size_t j = 0; j < u_set.size(); ++j) u_set[j] = j % 3 == 0 ? r.next_u64() : 5 * j + 11;
  for (double gamma : {0.3, 1.0, 1.7, 9.0}) {
    const stages::PowLess less(gamma);
    const Rng r2(1234567 + static_cast<uint64_t>(gamma * 10));
    const std::span<const uint64_t> us(u_set);
    const std::span<const float> pv(ps);
    INFO("gamma " << gamma);
    bool windows = true;
    for (size_t j = 0; j + 8 <= ps.size(); ++j)
      windows = windows && stages::bird_plus_trials(us.subspan(j, 8), pv.subspan(j, 8), r2, less) ==
                               stages::bird_plus_trials_portable(us.subspan(j, 8), pv.subspan(j, 8), r2, less);
    CHECK(windows);
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{9}, size_t{1001}, ps.size()})
      CHECK(stages::bird_plus_trials(us.first(n), pv.first(n), r2, less) ==
            stages::bird_plus_trials_portable(us.first(n), pv.first(n), r2, less));
    // And the portable loop is the rule: u < pow(p, γ), u the stream's output at the counter.
    uint64_t want = 0;
    for (size_t j = 0; j < ps.size(); ++j) want += r2.uniform_at(u_set[j]) < std::pow(static_cast<double>(ps[j]), gamma);
    const uint64_t got = stages::bird_plus_trials(us, pv, r2, less);
    CHECK(got == want);
    CHECK(got > 0);
    CHECK(got < ps.size());
  }
}

TEST_CASE("bird handles all-zero, single-block and non-finite tensors", "[bird]") {
  for (const std::string& pipeline :
       std::vector<std::string>{"bird | sign | plain", "bird+(gamma=1.4) | sign | plain", "bird+(keep=0.01) | sign | plain"}) {
    INFO(pipeline);
    // all zero: nothing sent
    Tensor zero = make_tensor("w", {4, 8}, std::vector<float>(32, 0.0f));
    RoundTrip z = roundtrip(pipeline, zero, 1);
    CHECK(values_of(z.decoded) == std::vector<float>(32, 0.0f));
    CHECK(z.streams.get("value").size() == 0);
    CHECK(z.streams.get("scale").size() == 0);
    CHECK(z.streams.get("index").size() == 1);  // plain's flags byte, no position
    // single block: always kept, decoded sign(t)·‖t‖₁/m. Under keep=f the target f·B = 0.01
    // blocks is below the one block of p∞ = 1: it is sent with probability λ = 0.01, scaled by
    // 1/λ (expectation kept).
    const bool thinned = pipeline.find("keep") != std::string::npos;
    for (const auto& shape : std::vector<std::vector<uint64_t>>{{1, 100}, {1, 1, 3, 3}}) {
      auto v = gradient_like(shape, 3);
      v[1] = 0.0f;  // 0 decodes to +S
      double l1 = 0;
      for (float x : v) l1 += std::fabs(double(x));
      const float s = static_cast<float>(l1 / double(v.size()) / (thinned ? 0.01 : 1.0));
      int sent = 0;
      for (uint64_t seed = 0; seed < 300; ++seed) {
        auto out = values_of(roundtrip(pipeline, make_tensor("w", shape, v), seed).decoded);
        if (thinned && out == std::vector<float>(v.size(), 0.0f)) continue;
        ++sent;
        for (size_t i = 0; i < v.size(); ++i) REQUIRE(out[i] == Approx(v[i] < 0 ? -s : s).epsilon(1e-6));
      }
      if (thinned) CHECK((sent >= 1 && sent <= 12));  // Binomial(300, 0.01): mean 3
      else CHECK(sent == 300);
    }
    // NaN/Inf in an f32 tensor: the stage counts them as it computes the norms
    // (screens_nonfinite) and the pipeline stops without output; the codec then refuses the
    // tensor or stores it raw (tests/cli/cli_roundtrip.py). A finite tensor gives 0.
    auto v = gradient_like({16, 8}, 4);
    {
      PipelineStages stages(Pipeline::parse(pipeline));
      REQUIRE(stages.screens_nonfinite());
      StageContext ctx;
      PipelineStages::TensorState st;
      auto w = v;
      w[26] = std::numeric_limits<float>::quiet_NaN();
      w[100] = -std::numeric_limits<float>::infinity();
      Tensor bad = make_tensor("w", {16, 8}, w);
      ctx.info = &bad.info;
      auto enc = stages.encode(bad, ctx, st);
      CHECK(enc.nonfinite == 2);
      CHECK(enc.streams.all().empty());
      Tensor good = make_tensor("w", {16, 8}, v);
      CHECK(stages.encode(good, ctx, st).nonfinite == 0);
    }
    // The sampler itself, reached by sources of other dtypes (an f64 value beyond the f32 range
    // becomes Inf): a NaN block is never kept; the rest is sampled as usual.
    auto as_f64 = [](const std::vector<uint64_t>& shape, const std::vector<float>& f) {
      Tensor t = make_tensor("w", shape, f);
      std::vector<uint8_t> bytes(f.size() * 8);
      for (size_t i = 0; i < f.size(); ++i) {
        const double d = f[i];
        std::memcpy(bytes.data() + 8 * i, &d, 8);
      }
      t.info.dtype = DType::F64;
      t.data = Buffer(std::move(bytes));
      return t;
    };
    v[3 * 8 + 2] = std::numeric_limits<float>::quiet_NaN();
    for (uint64_t seed = 0; seed < 20; ++seed) {
      auto out = values_of(roundtrip(pipeline, as_f64({16, 8}, v), seed).decoded);
      for (int k = 0; k < 8; ++k) REQUIRE(out[3 * 8 + k] == 0.0f);
      for (float x : out) REQUIRE(std::isfinite(x));
    }
    // +Inf: Lmax is not finite, nothing is sent
    v[3 * 8 + 2] = std::numeric_limits<float>::infinity();
    CHECK(values_of(roundtrip(pipeline, as_f64({16, 8}, v), 1).decoded) == std::vector<float>(128, 0.0f));
  }
}

TEST_CASE("bird wire: index, one sign bit per kept element, one f32 scale, fp32 vector entries", "[bird]") {
  const std::vector<uint64_t> shape = {32, 16, 3, 3};
  Tensor t = make_tensor("conv.weight", shape, gradient_like(shape, 8));
  for (const std::string& sparsifier : std::vector<std::string>{"bird", "bird+(gamma=1.4)", "bird+(keep=0.05)"}) {
    INFO(sparsifier);
    RoundTrip r = roundtrip(sparsifier + " | sign | plain", t, 4);
    const auto index = r.streams.get("index");
    REQUIRE(index.size() % 4 == 1);
    const uint64_t k = (index.size() - 1) / 4;  // u32 block numbers + plain's flags byte
    REQUIRE(k >= 1);
    CHECK(r.streams.all().size() == 3);
    CHECK(r.streams.get("value").size() == (k * 9 + 7) / 8);  // one bit per kept element
    REQUIRE(r.streams.get("scale").size() == 4);               // one f32 scale
    float scale;
    std::memcpy(&scale, r.streams.get("scale").data(), 4);
    auto out = values_of(r.decoded);
    uint64_t nonzero = 0;
    for (float x : out) {
      REQUIRE((x == 0.0f || std::fabs(x) == scale));
      nonzero += x != 0.0f;
    }
    CHECK(nonzero == k * 9);
    CHECK(r.stream_bytes == 4 * k + 1 + (k * 9 + 7) / 8 + 4);
    // The -lzma presets' lzma(stream=index) rewrites only the index stream, losslessly.
    RoundTrip z = roundtrip(sparsifier + " | sign | plain | lzma(stream=index)", t, 4);
    CHECK(z.streams.get("value").size() == r.streams.get("value").size());
    CHECK(z.streams.get("scale").size() == 4);
    CHECK(values_of(z.decoded) == out);
  }
  // A vector with no sibling: side = ⌈n/8⌉ bitmap bytes + 4n bytes of f32; no value bits, no
  // scale, no index.
  auto bias = gradient_like({13}, 2);
  RoundTrip v = roundtrip(Pipeline::preset("bird+").text(), make_tensor("conv.bias", {13}, bias), 4);
  CHECK(v.streams.get("side").size() == 2 + 4 * 13);
  CHECK(v.streams.find("index") == nullptr);
  CHECK(v.streams.get("value").size() == 0);
  CHECK(v.streams.get("scale").size() == 0);
  CHECK(values_of(v.decoded) == bias);
  const auto side = v.streams.get("side");
  CHECK(side[0] == 0xFF);
  CHECK(side[1] == 0xF8);  // 13 bits set, 3 padding bits 0
  float first;
  std::memcpy(&first, side.data() + 2, 4);
  CHECK(first == bias[0]);
}

TEST_CASE("bird refuses corrupt side streams", "[bird]") {
  auto bias = gradient_like({13}, 2);
  Tensor t = make_tensor("b", {13}, bias);
  PipelineStages stages(Pipeline::parse("bird | sign | plain"));
  StageContext ctx;
  ctx.info = &t.info;
  PipelineStages::TensorState st;
  auto enc = stages.encode(t, ctx, st);
  auto decode_with = [&](std::vector<uint8_t> side) {
    Streams s = enc.streams;
    s.find("side")->bytes = std::move(side);
    PipelineStages::TensorState d;
    return stages.decode(t.info, std::move(s), true, ctx, d);
  };
  const auto good_span = enc.streams.get("side");
  const std::vector<uint8_t> good(good_span.begin(), good_span.end());
  CHECK(values_of(decode_with(good)) == bias);
  auto expect_corrupt = [&](std::vector<uint8_t> side, const std::string& what) {
    INFO(what);
    try {
      decode_with(std::move(side));
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Corrupt);
    }
  };
  expect_corrupt({}, "empty");
  expect_corrupt({0xFF}, "bitmap cut");
  auto padded = good;
  padded[1] |= 0x01;
  expect_corrupt(padded, "padding bit set");
  auto longer = good;
  longer.push_back(0);
  expect_corrupt(longer, "trailing byte");
  auto fewer = good;
  fewer[0] = 0x7F;
  expect_corrupt(fewer, "bitmap sends fewer entries than stored");
  Streams missing;
  for (const auto& s : enc.streams.all())
    if (s.name != "side") missing.add(s.name, s.width).bytes = s.bytes;
  PipelineStages::TensorState d;
  CHECK_THROWS_AS(stages.decode(t.info, std::move(missing), true, ctx, d), Error);
}

TEST_CASE("bird parameters and presets", "[bird]") {
  CHECK_THROWS_WITH(Pipeline::parse("bird+"), Catch::Contains("give one of gamma"));
  CHECK_THROWS_WITH(Pipeline::parse("bird+(gamma=1.4, keep=0.1)"), Catch::Contains("not both"));
  CHECK_THROWS_AS(Pipeline::parse("bird+(keep=0)"), Error);
  CHECK_THROWS_AS(Pipeline::parse("bird+(gamma=-1)"), Error);
  CHECK_THROWS_AS(Pipeline::parse("bird(gamma=1)"), Error);
  CHECK_THROWS_AS(Pipeline::parse("bird(vectors=some)"), Error);
  CHECK(Pipeline::parse("bird+(keep=1%)").text().find("keep=0.01") != std::string::npos);
  CHECK(Pipeline::preset("bird+").text() == "bird+(gamma=1.4) | sign | golomb");
  CHECK(Pipeline::preset("bird").text() == "bird | sign | golomb");
  CHECK(Pipeline::preset("bird+-lzma").text() == "bird+(gamma=1.4) | sign | plain | lzma(stream=index)");
  CHECK(Pipeline::preset("bird-lzma").text() == "bird | sign | plain | lzma(stream=index)");
  // Stochastic and not exact: bench reports bias over seeds; the codec never stores raw values.
  PipelineStages p(Pipeline::preset("bird+"));
  CHECK(p.stochastic());
  CHECK_FALSE(p.exact_values());
  // Same seed, same bytes; another seed, another sample.
  Tensor t = make_tensor("w", {32, 16, 3, 3}, gradient_like({32, 16, 3, 3}, 8));
  const std::string preset = Pipeline::preset("bird+").text();
  auto a = roundtrip(preset, t, 5), b = roundtrip(preset, t, 5), c = roundtrip(preset, t, 6);
  CHECK(a.streams.get("index").size() > 0);
  CHECK(std::ranges::equal(a.streams.get("index"), b.streams.get("index")));
  CHECK(std::ranges::equal(a.streams.get("value"), b.streams.get("value")));
  CHECK(values_of(a.decoded) != values_of(c.decoded));
}
