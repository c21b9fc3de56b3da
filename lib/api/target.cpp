// SPDX-License-Identifier: BSD-3-Clause
// Compress to a target (docs/target.md): the pipeline's first stage that declares a searched
// parameter (TargetParam, plugin/registry.hpp) is bisected on its grid, each candidate encoded
// with an Encoder into memory exactly as the container would be written (header included) and,
// for an error target, decoded back and compared with the frame.
#include <gradcodec/gradcodec.hpp>
#include <gradcodec/metrics.hpp>
#include <gradcodec/pipeline.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace gradcodec {

namespace {

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// The grid from the coarsest value to the finest.
std::vector<double> make_grid(const TargetParam& p) {
  std::vector<double> g;
  if (p.log) {
    for (double v = p.lo; v < p.hi; v *= 1 + p.step) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.3g", v);  // 3 significant digits: readable values
      const double rounded = std::strtod(buf, nullptr);
      if (rounded < p.hi && (g.empty() || rounded > g.back())) g.push_back(rounded);
    }
  } else {
    const auto n = static_cast<uint64_t>(std::floor((p.hi - p.lo) / p.step + 1e-9));
    for (uint64_t i = 0; i < n; ++i) g.push_back(p.lo + double(i) * p.step);
  }
  g.push_back(p.hi);
  if (!p.larger_is_finer) std::reverse(g.begin(), g.end());
  return g;
}

// Bisection on the grid, pred(lo) holding and pred(hi) not: the first index where it stops.
template <class Pred>
size_t first_not(size_t lo, size_t hi, const Pred& pred) {
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    (pred(mid) ? lo : hi) = mid;
  }
  return hi;
}

bool applies(const TargetParam& p, const StageSpec& s) {
  if (!p.when) return true;
  const std::string when = p.when;
  const auto eq = when.find('=');
  const std::string key = when.substr(0, eq), value = when.substr(eq + 1);
  return s.params.has(key) && s.params.text(key) == value;
}

}  // namespace

Target parse_target(const std::string& text, const std::string& scope) {
  Target t;
  const auto eq = text.find('=');
  const std::string key = eq == std::string::npos ? text : text.substr(0, eq);
  if (key == "bits")
    t.kind = Target::Kind::Bits;
  else if (key == "rel_l2")
    t.kind = Target::Kind::RelL2;
  else
    fail(ErrorCode::Usage, "--target '" + text + "': expected bits=B (bits per parameter) or rel_l2=E");
  const std::string value = eq == std::string::npos ? "" : text.substr(eq + 1);
  char* end = nullptr;
  t.value = value.empty() ? 0.0 : std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(t.value) || t.value <= 0)
    fail(ErrorCode::Usage, "--target '" + text + "': " + key + " must be a positive number");
  if (scope.empty())
    t.scope = t.kind == Target::Kind::Bits ? Target::Scope::Snapshot : Target::Scope::Tensor;
  else if (scope == "snapshot")
    t.scope = Target::Scope::Snapshot;
  else if (scope == "tensor" && t.kind == Target::Kind::RelL2)
    t.scope = Target::Scope::Tensor;
  else if (scope == "tensor")
    fail(ErrorCode::Usage, "--target-scope tensor: a bits target is counted over the whole snapshot (give rel_l2=E)");
  else
    fail(ErrorCode::Usage, "--target-scope '" + scope + "': expected tensor or snapshot");
  return t;
}

std::string Target::text() const {
  return std::string(kind == Kind::Bits ? "bits=" : "rel_l2=") + number_text(value);
}

TargetResult search_target(const EncoderOptions& given, const FrameSource& frame, const Target& target) {
  EncoderOptions options = given;
  if (!options.pipeline.empty()) options.pipeline = target_pipeline(options.pipeline);
  const Pipeline base = Pipeline::parse(canonical_pipeline(options));
  const StageSpec* stage = nullptr;
  const TargetParam* param = nullptr;
  for (const auto& s : base.stages()) {
    const StageEntry* e = find_stage(s.name);
    if (!e) continue;
    for (const auto& p : e->target)
      if (applies(p, s)) {
        param = &p;
        break;
      }
    if (param) {
      stage = &s;
      break;
    }
  }
  if (!param)
    fail(ErrorCode::Usage, "--target " + target.text() + ": no stage of '" + base.text() +
                               "' has a parameter to search (topk, randk: ratio; qsgd: levels; powersgd: rank; "
                               "zfp(mode=rate): rate; zfp(mode=accuracy): tolerance; bird+: keep)");
  // The header's record of the search (EncoderOptions::target_json), the same for every candidate
  // and for the container then written with the chosen one: the bits counted are that container's.
  // The value chosen is in the pipeline.
  {
    nlohmann::ordered_json j;
    j["target"] = target.text();
    j["scope"] = target.scope == Target::Scope::Tensor ? "tensor" : "snapshot";
    j["stage"] = stage->name;
    j["param"] = param->name;
    options.target_json = j.dump();
  }
  // The frame, loaded once: every candidate encodes the same tensors.
  std::vector<Tensor> tensors;
  tensors.reserve(frame.count);
  for (size_t k = 0; k < frame.count; ++k) tensors.push_back(frame.load(k));
  FrameSource cached;
  cached.count = tensors.size();
  cached.info = [&tensors](size_t k) { return tensors[k].info; };
  cached.load = [&tensors](size_t k) { return tensors[k]; };
  cached.source = frame.source;
  cached.recorded = frame.recorded;

  const std::vector<double> grid = make_grid(*param);
  struct Figures {
    std::string pipeline;
    double bits = 0, error = 0;
  };
  std::map<size_t, Figures> done;
  const bool want_error = target.kind == Target::Kind::RelL2;
  auto eval = [&](size_t i) -> const Figures& {
    if (auto it = done.find(i); it != done.end()) return it->second;
    EncoderOptions eo = options;
    eo.preset.clear();
    eo.pipeline = base.with_param(stage->name, param->name, format_number(grid[i], ParamType::Float)).text();
    eo.progress = nullptr;
    std::vector<uint8_t> bytes;
    VectorSink sink(bytes);
    Figures f;
    f.pipeline = eo.pipeline;
    {
      Encoder enc = Encoder::to_sink(sink, eo);
      enc.add_frame(cached);
      f.bits = enc.finish().bits_per_parameter();
    }
    if (want_error) {
      DecoderOptions dopt;
      dopt.threads = options.threads;
      dopt.memory_limit = options.memory_limit;
      Decoder dec = Decoder::from_bytes(std::move(bytes), dopt, "<target search>");
      ErrorMetrics total;
      double worst = 0;
      size_t k = 0;
      dec.decode_frame(0, [&](Tensor&& t) {
        while (k < tensors.size() && tensors[k].name() != t.name()) ++k;  // records follow the frame's order
        if (k == tensors.size() || !is_float(t.dtype())) return;
        ErrorMetrics m;
        m.add(tensors[k], t);
        worst = std::max(worst, m.rel_l2());
        total += m;
      });
      f.error = target.scope == Target::Scope::Snapshot ? total.rel_l2() : worst;
    }
    return done.emplace(i, std::move(f)).first->second;
  };
  auto meets = [&](size_t i) {
    const Figures& f = eval(i);
    return want_error ? f.error <= target.value : f.bits <= target.value;
  };
  const size_t last = grid.size() - 1;
  size_t chosen = 0;
  if (want_error) {
    // The cheapest value whose error is at most E: bisect between a failing and a meeting one.
    if (!meets(last))
      fail(ErrorCode::Input, "--target " + target.text() + " cannot be met: the finest " + stage->name + " " +
                                 param->name + "=" + format_number(grid[last], ParamType::Float) + " gives rel L2 " +
                                 number_text(eval(last).error) +
                                 (target.scope == Target::Scope::Tensor ? " (worst tensor)" : " (snapshot)"));
    if (meets(0)) {
      chosen = 0;
    } else {
      chosen = first_not(0, last, [&](size_t i) { return !meets(i); });  // 0 fails, last meets
    }
  } else {
    // The finest value whose bits are at most B.
    if (!meets(0))
      fail(ErrorCode::Input, "--target " + target.text() + " cannot be met: the coarsest " + stage->name + " " +
                                 param->name + "=" + format_number(grid[0], ParamType::Float) + " takes " +
                                 number_text(eval(0).bits) + " bits/param");
    if (meets(last)) {
      chosen = last;
    } else {
      chosen = first_not(0, last, meets) - 1;  // 0 meets, last fails
    }
  }
  const Figures& f = eval(chosen);
  TargetResult r;
  r.pipeline = f.pipeline;
  r.stage = stage->name;
  r.param = param->name;
  r.value = format_number(grid[chosen], ParamType::Float);
  r.bits_per_parameter = f.bits;
  r.rel_l2 = f.error;
  r.has_error = want_error;
  r.encodes = done.size();
  if (chosen > 0) r.coarser = format_number(grid[chosen - 1], ParamType::Float);
  if (chosen < last) r.finer = format_number(grid[chosen + 1], ParamType::Float);
  r.json = options.target_json;
  return r;
}

}  // namespace gradcodec
