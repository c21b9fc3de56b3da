// SPDX-License-Identifier: BSD-3-Clause
#include "lowrank/accordion.hpp"

#include <algorithm>
#include <cmath>

namespace gradcodec::stages {

bool accordion_critical(double old_norm, double new_norm, double eta) noexcept {
  if (!(old_norm > 0)) return true;
  return std::fabs(old_norm - new_norm) / old_norm >= eta;
}

namespace {

constexpr const char* kName = "accordion";
enum : uint8_t { kMild = 0, kAggressive = 1 };

// Encoder-private state of one tensor.
struct Memory final : StageState {
  std::unique_ptr<StageState> inner;  // the wrapped stage's encoder-private state (both share it)
  std::vector<double> sum;            // Δ of the current interval
  bool started = false;
  uint64_t interval = 0;              // index of the current interval
  unsigned completed = 0;             // intervals whose norm is known (saturates at 2)
  double older = 0, newer = 0;        // ‖Δ_{j−2}‖, ‖Δ_{j−1}‖
  uint8_t choice = kMild;             // for the current interval
  uint8_t last = kMild;               // the alternative that encoded the last record
};

// Both alternatives' frame plans.
struct Plan final : StageState {
  std::shared_ptr<const StageState> sub[2];
};

class Accordion final : public Reducer {
 public:
  Accordion(std::string text[2], std::unique_ptr<Reducer> sub[2], double eta, uint64_t interval)
      : eta_(eta), interval_(interval) {
    for (int k = 0; k < 2; ++k) text_[k] = std::move(text[k]), sub_[k] = std::move(sub[k]);
  }
  StageKind kind() const noexcept override { return sub_[0]->kind(); }
  bool stateful() const noexcept override { return true; }
  bool stochastic() const noexcept override { return sub_[0]->stochastic() || sub_[1]->stochastic(); }
  bool needs_index_coder() const noexcept override { return sub_[0]->needs_index_coder(); }
  bool values_exact() const noexcept override { return sub_[0]->values_exact() && sub_[1]->values_exact(); }
  std::vector<std::string> alternatives() const override { return {text_[0], text_[1]}; }
  double kept_fraction(const TensorInfo& t) const noexcept override {
    return std::max(sub_[0]->kept_fraction(t), sub_[1]->kept_fraction(t));
  }
  // The f64 sum of the interval, and the larger alternative's memory.
  double work_per_element(const TensorInfo& t, double kept) const noexcept override {
    return 10 + std::max(sub_[0]->work_per_element(t, kept), sub_[1]->work_per_element(t, kept));
  }

  bool plans_frame() const noexcept override { return sub_[0]->plans_frame() || sub_[1]->plans_frame(); }
  std::shared_ptr<const StageState> plan_frame(const FrameView& frame, const StageContext& ctx) const override {
    FrameView v = frame;
    if (frame.state) {
      v.state = [&frame](size_t i) -> const StageState* {
        const auto* m = dynamic_cast<const Memory*>(frame.state(i));
        return m ? m->inner.get() : nullptr;
      };
    }
    auto plan = std::make_shared<Plan>();
    for (int k = 0; k < 2; ++k) plan->sub[k] = sub_[k]->plan_frame(v, ctx);
    if (!plan->sub[0] && !plan->sub[1]) return nullptr;
    return plan;
  }

  void encode(Payload& p, Streams& out, const StageContext& ctx) override {
    auto& mem = ctx.state_as<Memory>();
    const uint8_t k = choose(p, ctx, mem);
    StageContext c = ctx;
    c.state = &mem.inner;
    const auto* plan = dynamic_cast<const Plan*>(ctx.frame_plan);
    c.frame_plan = plan ? plan->sub[k].get() : nullptr;
    sub_[k]->encode(p, out, c);
    p.alternative = k;
    mem.last = k;
  }

  void after_encode(std::span<const float> recon, const StageContext& ctx) override {
    auto& mem = ctx.state_as<Memory>();
    StageContext c = ctx;
    c.state = &mem.inner;
    sub_[mem.last]->after_encode(recon, c);
  }

  void on_raw(std::span<const float> output, const StageContext& ctx) override { sub_[kMild]->on_raw(output, ctx); }

  void prepare_decode(Payload&, const Streams&, const StageContext&) override {
    fail(ErrorCode::Corrupt, std::string(kName) +
                                 ": the record does not name the stage it applied (an accordion record must name "
                                 "its pipeline variant)");
  }
  void decode(Payload&, const Streams&, const StageContext&) override {
    fail(ErrorCode::Corrupt, std::string(kName) + ": the record does not name the stage it applied");
  }

 private:
  // Updates the interval bookkeeping with this frame's input and returns the alternative to use.
  uint8_t choose(Payload& p, const StageContext& ctx, Memory& mem) const {
    const uint64_t j = ctx.frame / interval_;
    const uint64_t n = p.n;
    if (!mem.started || j != mem.interval || mem.sum.size() != n) {
      if (mem.started && mem.sum.size() == n) {
        double s = 0;
        for (double x : mem.sum) s += x * x;
        mem.older = mem.newer;
        mem.newer = std::sqrt(s);
        mem.completed = std::min(2u, mem.completed + 1);
      } else {
        mem.completed = 0;  // first interval of this tensor (or its size changed)
      }
      mem.started = true;
      mem.interval = j;
      mem.sum.assign(n, 0.0);
      mem.choice = mem.completed < 2 || accordion_critical(mem.older, mem.newer, eta_) ? kMild : kAggressive;
    }
    if (p.source && p.source->elements() == n) {  // the tensor's own values, before transforms
      float buf[4096];
      const size_t es = dtype_size(p.source->dtype());
      for (uint64_t i = 0; i < n; i += 4096) {
        const uint64_t c = std::min<uint64_t>(4096, n - i);
        to_f32(p.source->dtype(), p.source->data.data() + i * es, c, buf);
        for (uint64_t t = 0; t < c; ++t) mem.sum[i + t] += buf[t];
      }
    } else {
      const std::vector<float>& v = p.dense_f32();
      for (size_t i = 0; i < v.size() && i < n; ++i) mem.sum[i] += v[i];
    }
    return mem.choice;
  }

  std::string text_[2];
  std::unique_ptr<Reducer> sub_[2];
  double eta_;
  uint64_t interval_;
};

// The single reducer of a quoted alternative (its stages as the engine resolved them,
// plugin/params.hpp); Usage when it is anything else.
std::unique_ptr<Reducer> alternative(const Params& p, const std::string& key, std::string& name) {
  const std::string& text = p.text(key);
  const std::vector<NestedStage>& specs = p.stages(key);
  const bool reducer = !specs.empty() && (specs.front().kind == StageKind::Sparsifier ||
                                          specs.front().kind == StageKind::LowRank);
  bool only_implied = true;
  for (size_t i = 1; i < specs.size(); ++i)
    only_implied = only_implied && (specs[i].name == "raw" || specs[i].name == "varint");
  if (!reducer || !only_implied || specs.front().name == kName)
    fail(ErrorCode::Usage, std::string(kName) + ": " + key + "=\"" + text +
                               "\" must be one sparsifier or low-rank stage (its quantizer, index coder and lossless "
                               "stages go after accordion in the outer pipeline)");
  name = specs.front().name;
  std::unique_ptr<Stage> st = specs.front().make();
  auto* red = dynamic_cast<Reducer*>(st.get());
  if (!red) fail(ErrorCode::Internal, std::string(kName) + ": " + name + " is not a reducer");
  st.release();
  return std::unique_ptr<Reducer>(red);
}

}  // namespace

std::unique_ptr<Stage> make_accordion(const Params& p, uint32_t) {
  std::string text[2] = {p.text("mild"), p.text("aggressive")};
  std::string name[2];
  std::unique_ptr<Reducer> sub[2] = {alternative(p, "mild", name[0]), alternative(p, "aggressive", name[1])};
  if (name[0] != name[1])
    fail(ErrorCode::Usage, std::string(kName) + ": mild and aggressive must be the same stage with different "
                                                "parameters (they share its state), not " +
                               name[0] + " and " + name[1]);
  return std::make_unique<Accordion>(text, sub, p.num("eta"), static_cast<uint64_t>(p.integer("interval")));
}

}  // namespace gradcodec::stages
