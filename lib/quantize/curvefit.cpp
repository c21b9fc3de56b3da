// SPDX-License-Identifier: BSD-3-Clause
#include "quantize/curvefit.hpp"

#include "index/gaps.hpp"
#include "quantize/codes.hpp"
#include "quantize/curvefit_solver.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace gradcodec::stages {

namespace {

constexpr const char* kName = "curvefit";
using curvefit::Basis;
using curvefit::Segment;

Basis basis_from_name(const std::string& s) {
  if (s == "poly") return Basis::Poly;
  if (s == "dexp") return Basis::Dexp;
  if (s == "logit") return Basis::Logit;
  fail(ErrorCode::Usage, "curvefit: unknown basis '" + s + "' (poly, dexp, logit)");
}

[[noreturn]] void corrupt(const std::string& why) { fail(ErrorCode::Corrupt, std::string(kName) + ": " + why); }

void write_group(ByteWriter& w, const std::vector<Segment>& segs) {
  if (segs.empty()) return;
  w.u8(static_cast<uint8_t>(segs.size()));
  for (const auto& s : segs) {
    w.u8(static_cast<uint8_t>(s.basis));
    w.u8(static_cast<uint8_t>(s.coef.size()));
    for (double c : s.coef) w.f64(c);
  }
}

std::vector<Segment> read_group(ByteReader& r, uint64_t c) {
  std::vector<Segment> segs;
  if (c == 0) return segs;
  const unsigned S = r.u8();
  if (S < 1 || S > curvefit::kMaxSegments || S > c)
    corrupt(std::to_string(S) + " segments for a group of " + std::to_string(c) + " values");
  segs.resize(S);
  for (auto& s : segs) {
    const unsigned b = r.u8();
    if (b > 2) corrupt("unknown basis " + std::to_string(b));
    s.basis = static_cast<Basis>(b);
    const unsigned n = r.u8();
    const bool ok = s.basis == Basis::Dexp ? n == 4 : (n >= 1 && n <= curvefit::kMaxDegree + 1);
    if (!ok) corrupt(std::to_string(n) + " coefficients for basis " + std::to_string(b));
    s.coef.resize(n);
    for (auto& x : s.coef) {
      x = r.f64();
      if (!std::isfinite(x)) corrupt("a coefficient is not finite");
    }
  }
  return segs;
}

// The value stream's first fields (count, npos, rmse).
struct Head {
  uint64_t count = 0, npos = 0;
  double rmse = 0;
};
Head read_head(ByteReader& r) {
  Head h;
  h.count = r.varint();
  h.npos = r.varint();
  h.rmse = r.f64();
  if (h.npos > h.count) corrupt(std::to_string(h.npos) + " positives of " + std::to_string(h.count) + " values");
  if (!(h.rmse >= 0) || !std::isfinite(h.rmse)) corrupt("the stored RMSE is not a finite non-negative number");
  return h;
}

class Curvefit final : public Quantizer {
 public:
  Curvefit(Basis b, unsigned degree, unsigned segments) : basis_(b), degree_(degree), segments_(segments) {}

  bool reorders_index() const noexcept override { return true; }
  // The kept values sorted with their order (f64 fits), and the reordered positions.
  double work_per_element(const TensorInfo&, double kept) const noexcept override { return 24 * kept; }
  bool has_stats() const noexcept override { return true; }

  void encode(Payload& p, Streams& out, const StageContext&) override {
    if (!p.sparse || p.lowrank || p.index_implicit)
      fail(ErrorCode::Usage, "curvefit needs a sparsifier whose positions are coded before it "
                             "(its values travel in value order with their positions)");
    if (p.block != 1) return encode_blocks(p, out);
    const std::span<const float> v = codes::coded_values(p);
    const uint64_t count = v.size();
    if (count != p.index.size()) fail(ErrorCode::Internal, "curvefit: value count does not match the index");
    // Each group in value order: |v| descending, NaN first (as the largest), ties by position.
    std::vector<uint64_t> pos, neg;
    for (uint64_t i = 0; i < count; ++i) (codes::sign_bit(v[i]) ? pos : neg).push_back(i);
    auto key = [&](uint64_t i) {
      const float a = std::fabs(v[i]);
      return std::isnan(a) ? std::numeric_limits<float>::infinity() : a;
    };
    for (auto* g : {&pos, &neg})
      std::stable_sort(g->begin(), g->end(), [&](uint64_t a, uint64_t b) { return key(a) > key(b); });

    std::vector<uint64_t> index(count);
    std::vector<float> decoded(count);
    std::vector<Segment> fits[2];
    double sse = 0;
    uint64_t at = 0;
    for (int gi = 0; gi < 2; ++gi) {
      const std::vector<uint64_t>& g = gi == 0 ? pos : neg;
      double largest = 0;
      for (uint64_t i : g)
        if (std::isfinite(v[i])) largest = std::max(largest, static_cast<double>(std::fabs(v[i])));
      std::vector<double> y(g.size());
      for (size_t j = 0; j < g.size(); ++j)
        y[j] = std::isfinite(v[g[j]]) ? std::fabs(static_cast<double>(v[g[j]])) : largest;
      fits[gi] = curvefit::fit_group(y, basis_, degree_, segments_);
      curvefit::evaluate_group(fits[gi], g.size(), decoded.data() + at);
      for (size_t j = 0; j < g.size(); ++j, ++at) {
        if (gi == 1) decoded[at] = -decoded[at];
        index[at] = p.index[g[j]];
        const float x = v[g[j]];
        if (std::isfinite(x)) sse += (static_cast<double>(decoded[at]) - x) * (static_cast<double>(decoded[at]) - x);
      }
    }
    Stream& s = out.add(kValueStream, 1);
    idx::put_leb128(s.bytes, count);
    idx::put_leb128(s.bytes, pos.size());
    ByteWriter w(s.bytes);
    w.f64(count ? std::sqrt(sse / static_cast<double>(count)) : 0.0);
    write_group(w, fits[0]);
    write_group(w, fits[1]);
    p.index = std::move(index);
    p.values = std::move(decoded);
    p.value_order = true;
    p.exact = false;
  }

  void decode(Payload& p, const Streams& in, const StageContext&) override {
    const uint64_t count = p.value_count();
    ByteReader r(codes::stream(in, kValueStream, kName), "curvefit value stream");
    const Head h = read_head(r);
    if (h.count != count)
      corrupt("value stream holds " + std::to_string(h.count) + " values, the index " + std::to_string(count));
    if (p.block != 1) return decode_blocks(p, in, r, h);
    if (count > 0 && !p.value_order) corrupt("the index is not in value order (curvefit's values follow it)");
    const std::vector<Segment> pos = read_group(r, h.npos);
    const std::vector<Segment> neg = read_group(r, count - h.npos);
    r.expect_end();
    p.values.resize(count);
    curvefit::evaluate_group(pos, h.npos, p.values.data());
    curvefit::evaluate_group(neg, count - h.npos, p.values.data() + h.npos);
    for (uint64_t i = h.npos; i < count; ++i) p.values[i] = -p.values[i];
    p.exact = false;
  }

  void stream_stats(const Streams& in, StageStats& out) const override {
    const Stream* s = in.find(kValueStream);
    if (!s) return;
    ByteReader r(s->view(), "curvefit value stream");
    const Head h = read_head(r);
    const double n = static_cast<double>(h.count);
    out.push_back({"curvefit.rmse", h.rmse * h.rmse * n, n, true,
                   "sqrt(sum (decoded - kept value)^2 / kept values) over the fitted values (Kostopoulou 2020 §4.2)"});
  }

 private:
  // Block payloads (bird, block randk): the positions are blocks, so values cannot travel in an
  // order of their own. The curve then fits the mean |v| of each block in position order (one
  // group, npos = count), every element decodes to ± its block's fitted magnitude, and the signs
  // travel in `side`, one bit per value (1 = non-negative), MSB-first.
  void encode_blocks(Payload& p, Streams& out) const {
    const std::span<const float> v = codes::coded_values(p);
    const uint64_t B = p.block, nb = p.index.size(), count = v.size();
    if (count != nb * B) fail(ErrorCode::Internal, "curvefit: value count does not match the blocks");
    double largest = 0;
    for (float x : v)
      if (std::isfinite(x)) largest = std::max(largest, static_cast<double>(std::fabs(x)));
    std::vector<double> y(nb, 0.0);
    for (uint64_t j = 0; j < nb; ++j) {
      for (uint64_t e = 0; e < B; ++e) {
        const float x = v[j * B + e];
        y[j] += std::isfinite(x) ? std::fabs(static_cast<double>(x)) : largest;
      }
      y[j] /= static_cast<double>(B);
    }
    const std::vector<Segment> fit = curvefit::fit_group(y, basis_, degree_, segments_);
    std::vector<float> mag(nb), decoded(count);
    curvefit::evaluate_group(fit, nb, mag.data());
    double sse = 0;
    for (uint64_t i = 0; i < count; ++i) {
      decoded[i] = codes::sign_bit(v[i]) ? mag[i / B] : -mag[i / B];
      if (std::isfinite(v[i])) sse += (static_cast<double>(decoded[i]) - v[i]) * (static_cast<double>(decoded[i]) - v[i]);
    }
    Stream& s = out.add(kValueStream, 1);
    idx::put_leb128(s.bytes, count);
    idx::put_leb128(s.bytes, count);
    ByteWriter w(s.bytes);
    w.f64(count ? std::sqrt(sse / static_cast<double>(count)) : 0.0);
    write_group(w, fit);
    codes::pack_signs(out.add(kSideStream, 1), v);
    p.values = std::move(decoded);
    p.exact = false;
  }

  void decode_blocks(Payload& p, const Streams& in, ByteReader& r, const Head& h) const {
    const uint64_t B = p.block, count = h.count, nb = p.index.size();
    if (h.npos != count) corrupt("block values form one group: npos " + std::to_string(h.npos) + " != count");
    const std::vector<Segment> fit = read_group(r, nb);
    r.expect_end();
    auto signs = codes::stream(in, kSideStream, kName);
    codes::expect_bytes(kName, kSideStream, signs.size(), codes::packed_bytes(count, 1, kName));
    if (count % 8 && (signs.back() & (0xffu >> (count % 8)))) corrupt("nonzero padding bits in the sign stream");
    std::vector<float> mag(nb);
    curvefit::evaluate_group(fit, nb, mag.data());
    p.values.resize(count);
    for (uint64_t i = 0; i < count; ++i) p.values[i] = codes::bit_at(signs, i) ? mag[i / B] : -mag[i / B];
    p.exact = false;
  }

  Basis basis_;
  unsigned degree_, segments_;
};

}  // namespace

std::unique_ptr<Stage> make_curvefit(const Params& p, uint32_t) {
  return std::make_unique<Curvefit>(basis_from_name(p.text("basis")), static_cast<unsigned>(p.integer("degree")),
                                    static_cast<unsigned>(p.integer("segments")));
}

}  // namespace gradcodec::stages
