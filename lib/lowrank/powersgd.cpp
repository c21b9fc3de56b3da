// SPDX-License-Identifier: BSD-3-Clause
#include "lowrank/powersgd.hpp"

#include <gradcodec/half.hpp>

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>

namespace gradcodec::stages {

PowerSgdView powersgd_view(const std::vector<uint64_t>& shape, uint32_t rank) {
  PowerSgdView v;
  if (shape.size() < 2) return v;
  const uint64_t total = shape_elements(shape);
  v.n = shape[0];
  v.m = v.n ? total / v.n : 0;
  v.rank = static_cast<uint32_t>(std::min<uint64_t>({v.n, v.m, rank}));
  const unsigned __int128 sent = static_cast<unsigned __int128>(v.n + v.m) * v.rank * 2;
  v.compressed = v.rank > 0 && sent < static_cast<unsigned __int128>(total);
  return v;
}

namespace {

constexpr const char* kName = "powersgd";

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Shared (both sides): the decoded Q of the last frame, m × r column-major.
struct Factors final : StageState {
  uint64_t m = 0;
  uint32_t r = 0;
  std::vector<float> q;
};

// Encoder-private: the error memory e; between encode() and after_encode() it holds M + e.
struct Memory final : StageState {
  std::vector<float> e;
  bool pending = false;  // encode() ran and after_encode() has not yet
};

float as_decoded(float x, DType dt) noexcept {
  switch (dt) {
    case DType::F16: return f16_to_f32(f32_to_f16(x));
    case DType::BF16: return bf16_to_f32(f32_to_bf16(x));
    default: return x;
  }
}

// Modified Gram–Schmidt on the columns of P, in f64; dependent or zero columns become zero.
void orthonormalize(Eigen::MatrixXf& P) {
  Eigen::MatrixXd Q = P.cast<double>();
  for (Eigen::Index j = 0; j < Q.cols(); ++j) {
    const double before = Q.col(j).norm();
    for (Eigen::Index k = 0; k < j; ++k) Q.col(j) -= Q.col(k).dot(Q.col(j)) * Q.col(k);
    const double after = Q.col(j).norm();
    if (before > 0 && after > 1e-6 * before && std::isfinite(after)) Q.col(j) /= after;
    else Q.col(j).setZero();
  }
  P = Q.cast<float>();
}

class PowerSgd final : public Reducer {
 public:
  PowerSgd(uint32_t rank, uint32_t iters, bool ef) : rank_(rank), iters_(iters), ef_(ef) {}
  StageKind kind() const noexcept override { return StageKind::LowRank; }
  bool stateful() const noexcept override { return true; }
  bool stochastic() const noexcept override { return true; }  // the initial Q
  bool needs_index_coder() const noexcept override { return false; }
  bool values_exact() const noexcept override { return false; }
  double kept_fraction(const TensorInfo& t) const noexcept override {
    const PowerSgdView v = powersgd_view(t.shape, rank_);
    const uint64_t d = t.elements();
    return !v.compressed || d == 0 ? 1.0 : std::min(1.0, static_cast<double>(v.factor_values()) / static_cast<double>(d));
  }
  // M (f32), the error memory e, the mirror decoder's P Q^T and the decoded tensor, plus P, Q and
  // their copy as the factors (12 B/element for powersgd(rank=2) on a 4096x4096 f32 tensor).
  double work_per_element(const TensorInfo&, double kept) const noexcept override { return 14 + 12 * kept; }

  void encode(Payload& p, Streams&, const StageContext& ctx) override {
    const PowerSgdView v = powersgd_view(p.info->shape, rank_);
    std::vector<float>& M = p.dense_f32();
    Memory* mem = ef_ ? &ctx.state_as<Memory>() : nullptr;
    if (mem) {
      if (mem->e.size() != M.size()) mem->e.assign(M.size(), 0.0f);
      for (size_t i = 0; i < M.size(); ++i) M[i] += mem->e[i];
    }
    if (mem) mem->pending = true;
    if (!v.compressed) {  // sent dense: the values stay as they are
      if (mem) mem->e = M;
      return;
    }
    const auto n = static_cast<Eigen::Index>(v.n), m = static_cast<Eigen::Index>(v.m),
               r = static_cast<Eigen::Index>(v.rank);
    Eigen::MatrixXf Q = warm_start(v, ctx);
    Eigen::Map<const RowMat> Mm(M.data(), n, m);
    Eigen::MatrixXf P(n, r);
    for (uint32_t it = 0; it < iters_; ++it) {
      P.noalias() = Mm * Q;
      orthonormalize(P);
      Q.noalias() = Mm.transpose() * P;
    }
    std::vector<float> factors(static_cast<size_t>((n + m) * r));
    std::copy(P.data(), P.data() + n * r, factors.begin());
    std::copy(Q.data(), Q.data() + m * r, factors.begin() + n * r);
    if (mem) mem->e.swap(M);  // M + e until after_encode subtracts the reconstruction
    p.values = std::move(factors);
    p.lowrank = true;
  }

  void after_encode(std::span<const float> recon, const StageContext& ctx) override {
    if (!ef_) return;
    auto& mem = ctx.state_as<Memory>();
    if (!mem.pending) return;  // stored raw without running the stage (a non-finite tensor): e stays
    mem.pending = false;
    if (recon.size() != mem.e.size())
      fail(ErrorCode::Internal, "powersgd: reconstruction size differs from the memory");
    const DType dt = ctx.info ? ctx.info->dtype : DType::F32;
    for (size_t i = 0; i < recon.size(); ++i) {
      const float e = mem.e[i] - as_decoded(recon[i], dt);
      mem.e[i] = std::isfinite(e) ? e : 0.0f;
    }
  }

  void prepare_decode(Payload& p, const Streams&, const StageContext&) override {
    const PowerSgdView v = powersgd_view(p.info->shape, rank_);
    if (!v.compressed) return;  // dense: n values
    p.lowrank = true;
    p.values.assign(v.factor_values(), 0.0f);  // value_count() = the factors (< n·m / 2)
  }

  void decode(Payload& p, const Streams&, const StageContext& ctx) override {
    const PowerSgdView v = powersgd_view(p.info->shape, rank_);
    if (!v.compressed) return;
    if (p.values.size() != v.factor_values())
      fail(ErrorCode::Corrupt, std::string(kName) + ": " + std::to_string(p.values.size()) +
                                   " factor values, expected " + std::to_string(v.factor_values()));
    const auto n = static_cast<Eigen::Index>(v.n), m = static_cast<Eigen::Index>(v.m),
               r = static_cast<Eigen::Index>(v.rank);
    Eigen::Map<const Eigen::MatrixXf> P(p.values.data(), n, r), Q(p.values.data() + n * r, m, r);
    std::vector<float> out(static_cast<size_t>(n * m));
    Eigen::Map<RowMat> O(out.data(), n, m);
    O.noalias() = P * Q.transpose();
    auto& f = ctx.shared_as<Factors>();
    f.m = v.m;
    f.r = v.rank;
    f.q.assign(Q.data(), Q.data() + m * r);
    p.values = std::move(out);
    p.lowrank = false;
  }

 private:
  // Q for this frame: the decoded Q of the last frame where usable, fresh N(0,1) columns elsewhere.
  Eigen::MatrixXf warm_start(const PowerSgdView& v, const StageContext& ctx) const {
    const auto m = static_cast<Eigen::Index>(v.m), r = static_cast<Eigen::Index>(v.rank);
    Eigen::MatrixXf Q = Eigen::MatrixXf::Zero(m, r);
    const Factors* prev = ctx.shared && *ctx.shared ? dynamic_cast<const Factors*>(ctx.shared->get()) : nullptr;
    if (prev && prev->m == v.m && prev->q.size() == v.m * prev->r) {
      const Eigen::Index keep = std::min<Eigen::Index>(r, prev->r);
      Q.leftCols(keep) = Eigen::Map<const Eigen::MatrixXf>(prev->q.data(), m, prev->r).leftCols(keep);
    }
    Rng rng = ctx.rng(RngPurpose::Init);
    for (Eigen::Index j = 0; j < r; ++j) {
      const bool usable = Q.col(j).allFinite() && (Q.col(j).array() != 0.0f).any();
      if (usable) continue;
      for (Eigen::Index i = 0; i < m; ++i) Q(i, j) = static_cast<float>(rng.normal());
    }
    return Q;
  }

  uint32_t rank_, iters_;
  bool ef_;
};

}  // namespace

std::unique_ptr<Stage> make_powersgd(const Params& p, uint32_t) {
  return std::make_unique<PowerSgd>(static_cast<uint32_t>(p.integer("rank")), static_cast<uint32_t>(p.integer("iters")),
                                    p.flag("ef"));
}

}  // namespace gradcodec::stages
