// SPDX-License-Identifier: BSD-3-Clause
#include "bench_workers.hpp"

#include <gradcodec/gradcodec.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <glob.h>
#include <sys/stat.h>
#include <sstream>

namespace gradcodec::cli {

namespace {

bool is_manifest(const std::string& v) {
  const std::string ext = std::filesystem::path(v).extension().string();
  return ext == ".txt" || ext == ".list";
}

std::vector<std::vector<std::string>> read_manifest(const std::string& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) == 0 && !S_ISREG(st.st_mode))  // a FIFO would block the open
    fail(ErrorCode::Input, "--workers " + file + ": " + not_regular(st.st_mode));
  std::ifstream in(file);
  if (!in) fail(ErrorCode::Input, "--workers " + file + ": cannot read the manifest");
  const std::filesystem::path dir = std::filesystem::path(file).parent_path();
  std::vector<std::vector<std::string>> steps;
  std::string line;
  while (std::getline(in, line)) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::vector<std::string> step;
    for (std::string w; words >> w;)
      step.push_back(std::filesystem::path(w).is_absolute() ? w : (dir / w).string());
    if (!step.empty()) steps.push_back(std::move(step));
  }
  if (steps.empty()) fail(ErrorCode::Input, "--workers " + file + ": the manifest lists no step");
  return steps;
}

std::vector<std::string> expand_glob(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> out;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (out.empty()) fail(ErrorCode::Input, "--workers '" + pattern + "': no file matches");
  std::sort(out.begin(), out.end());
  return out;
}

// One tensor of one step: the workers' values and their true mean.
struct StepTensor {
  std::vector<std::vector<float>> workers;
  std::vector<float> mean;
};

std::vector<StepTensor> load_step(const std::vector<std::string>& files, const InputOptions& opt,
                                  std::vector<TensorInfo>& infos) {
  std::vector<StepTensor> tensors;
  for (size_t m = 0; m < files.size(); ++m) {
    OpenInput in = open_input(files[m], opt);
    std::vector<TensorInfo> mine;
    for (size_t k : in.selected)
      if (is_float(in.reader->arrays()[k].dtype)) mine.push_back(in.reader->arrays()[k]);
    if (infos.empty()) infos = mine;
    if (mine.size() != infos.size())
      fail(ErrorCode::Input, "--workers: " + files[m] + " has " + std::to_string(mine.size()) +
                                 " floating tensors, " + files[0] + " has " + std::to_string(infos.size()));
    for (size_t i = 0; i < mine.size(); ++i) {
      if (mine[i].name != infos[i].name)
        fail(ErrorCode::Input, "--workers: tensor " + std::to_string(i) + " is '" + mine[i].name + "' in " +
                                   files[m] + ", '" + infos[i].name + "' in " + files[0]);
      if (mine[i].shape != infos[i].shape)
        fail(ErrorCode::Input, "--workers: tensor '" + mine[i].name + "' has shape " + shape_string(mine[i].shape) +
                                   " in " + files[m] + ", " + shape_string(infos[i].shape) + " in " + files[0]);
    }
    tensors.resize(mine.size());
    size_t i = 0;
    for (size_t k : in.selected) {
      if (!is_float(in.reader->arrays()[k].dtype)) continue;
      Tensor t = in.reader->read(k);
      // The figures compare each method with the workers' mean: a NaN or Inf (or an f64 value
      // beyond float32's range, Inf once converted) would make them meaningless, silently.
      if (const uint64_t bad = count_nonfinite(t) + count_beyond_f32(t))
        fail(ErrorCode::Input, "--workers: " + files[m] + ": tensor '" + t.name() + "' has " + std::to_string(bad) +
                                   " value(s) that are NaN/Inf or beyond float32's range; the merge methods are "
                                   "compared on finite gradients only");
      std::vector<float> v(t.elements());
      if (!v.empty()) to_f32(t.dtype(), t.data.data(), v.size(), v.data());
      tensors[i++].workers.push_back(std::move(v));
    }
  }
  for (auto& t : tensors) {  // the reference: (1/M) Σ g_m in double, rounded once
    const size_t n = t.workers[0].size();
    t.mean.resize(n);
    for (size_t j = 0; j < n; ++j) {
      double s = 0;
      for (const auto& w : t.workers) s += w[j];
      t.mean[j] = static_cast<float>(s / static_cast<double>(t.workers.size()));
    }
  }
  return tensors;
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}
double min_of(const std::vector<double>& v) { return v.empty() ? 0 : *std::min_element(v.begin(), v.end()); }
double max_of(const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }

const char* kFormulaMatch =
    "match_rate = #{j : [agg_j >= 0] == [mean_j >= 0]} / d over every element of every step, "
    "mean = (1/M) sum_m g_m of the raw worker gradients (0 counts as +; Marsit Fig. 1b)";
const char* kFormulaRel = "rel_l2 = ||agg - mean||_2 / ||mean||_2 over every element of every step";
const char* kFormulaAcc =
    "acc_err = ||sum_t mean_t - sum_t agg_t||_2 / ||sum_t mean_t||_2, the sums over the steps in order (what a model "
    "updated with every step's aggregate drifts from one updated with the true means)";
const char* kFormulaHop =
    "hop h = what worker h sends to worker h+1 (h = 1..M-1), per tensor: marsit, cascade d_t + 32 (1 bit per "
    "element + an f32 scale or norm); majority d_t*ceil(log2(h+1)) + 32 (a vote count in 0..h); mean 32*d_t; "
    "bits/param = bits / d";

}  // namespace

std::vector<std::vector<std::string>> expand_worker_steps(const std::vector<std::string>& values) {
  std::vector<std::vector<std::string>> steps;
  for (const auto& v : values) {
    if (is_manifest(v)) {
      for (auto& s : read_manifest(v)) steps.push_back(std::move(s));
    } else {
      steps.push_back(expand_glob(v));
    }
  }
  for (const auto& s : steps) {
    if (s.size() < 2)
      fail(ErrorCode::Usage, "--workers: a step needs at least 2 worker inputs, got " + std::to_string(s.size()) +
                                 (s.empty() ? "" : " (" + s[0] + ")"));
    if (s.size() != steps[0].size())
      fail(ErrorCode::Usage, "--workers: steps have different worker counts (" + std::to_string(steps[0].size()) +
                                 " and " + std::to_string(s.size()) + ")");
  }
  return steps;
}

int run_bench_workers(const WorkersBenchArgs& a) {
  const auto steps = expand_worker_steps(a.steps);
  const size_t M = steps[0].size();
  WorkersBenchOptions options;
  options.workers = M;
  options.seeds = a.seeds;
  options.compensation = a.compensation;
  options.full_sync = a.full_sync;
  WorkersBench bench(options);
  uint64_t d = 0;
  std::vector<TensorInfo> infos;
  for (size_t s = 0; s < steps.size(); ++s) {
    std::vector<TensorInfo> step_infos;
    const auto tensors = load_step(steps[s], a.in, step_infos);
    if (s == 0) infos = step_infos;
    // The accumulated error and marsit's compensation follow each tensor over the steps.
    for (size_t i = 0; i < infos.size() && i < step_infos.size(); ++i)
      if (step_infos[i].name != infos[i].name || step_infos[i].shape != infos[i].shape)
        fail(ErrorCode::Input, "--workers: step " + std::to_string(s) + " holds tensor '" + step_infos[i].name +
                                   "' " + shape_string(step_infos[i].shape) + " where step 0 holds '" + infos[i].name +
                                   "' " + shape_string(infos[i].shape) +
                                   "; every step must hold the same tensors (they are followed over the steps)");
    if (step_infos.size() != infos.size())
      fail(ErrorCode::Input, "--workers: step " + std::to_string(s) + " holds " + std::to_string(step_infos.size()) +
                                 " floating tensors, step 0 " + std::to_string(infos.size()) +
                                 "; every step must hold the same tensors (they are followed over the steps)");
    std::vector<WorkersBenchTensor> step;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const StepTensor& t = tensors[i];
      d += t.mean.size();
      step.push_back({step_infos[i].name, {t.workers.begin(), t.workers.end()}, t.mean});
    }
    try {
      bench.add_step(step);
    } catch (const Error& e) {
      fail(e.code(), std::string("--workers: ") + e.what());
    }
  }
  const std::vector<WorkersBenchRow> rows = bench.rows();

  // ---- report ----
  // With the JSON report on stdout (--json -), the table goes to stderr: the pipe gets the JSON alone.
  FILE* table = a.json == "-" ? stderr : stdout;
  const double dd = d ? static_cast<double>(d) : 1.0;
  std::fprintf(table,
               "%s workers: %zu worker(s) per step in ring order, %zu step(s), d = %llu parameters per ring pass, "
               "stochastic methods over %u seed(s)\n",
               a.markdown ? "**bench**" : "bench", M, steps.size(), static_cast<unsigned long long>(d),
               std::max(1u, a.seeds));
  std::fprintf(table, "  marsit over the steps: global compensation %s, full-precision steps %s (Marsit Algorithm 1)\n",
               a.compensation ? "on" : "off",
               a.full_sync ? format("every %u (0, %u, ...)", a.full_sync, a.full_sync).c_str() : "never");
  for (size_t s = 0; s < steps.size(); ++s) {
    std::string list;
    for (const auto& f : steps[s]) list += (list.empty() ? "" : " ") + f;
    std::fprintf(table, "  step %zu: %s\n", s, list.c_str());
  }
  const char* sep = a.markdown ? " | " : "  ";
  if (a.markdown)
    std::fprintf(table, "\n| method | match_rate | (min..max over seeds) | rel_l2 | acc_err | bits/param hop 1..M-1 | "
                        "ring bits/param |\n|---|---|---|---|---|---|---|\n");
  else
    std::fprintf(table, "\n%-9s%s%-10s%s%-19s%s%-9s%s%-9s%s%-28s%s%s\n", "method", sep, "match_rate", sep,
                 "(min..max, seeds)", sep, "rel_l2", sep, "acc_err", sep, "bits/param hop 1..M-1", sep,
                 "ring bits/param");
  for (const auto& r : rows) {
    std::string hops;
    uint64_t total = 0;
    for (uint64_t b : r.hop_bits) {
      hops += (hops.empty() ? "" : " ") + format("%.3f", static_cast<double>(b) / dd);
      total += b;
    }
    const std::string range = format("%.4f..%.4f", min_of(r.match), max_of(r.match));
    if (a.markdown)
      std::fprintf(table, "| %s | %.4f | %s | %.4g | %.4g | %s | %.3f |\n", r.method.c_str(),
                   mean_of(r.match), range.c_str(), mean_of(r.rel), mean_of(r.acc_err), hops.c_str(),
                   static_cast<double>(total) / dd);
    else
      std::fprintf(table, "%-9s%s%-10.4f%s%-19s%s%-9.4g%s%-9.4g%s%-28s%s%.3f\n", r.method.c_str(), sep,
                   mean_of(r.match), sep, range.c_str(), sep, mean_of(r.rel), sep, mean_of(r.acc_err), sep,
                   hops.c_str(), sep, static_cast<double>(total) / dd);
  }
  std::fprintf(table, "\n%s\n%s\n%s\n%s\n", kFormulaMatch, kFormulaRel, kFormulaAcc, kFormulaHop);

  if (!a.json.empty()) {
    nlohmann::ordered_json j;
    j["schema"] = kWorkersSchema;
    j["workers"] = M;
    j["steps"] = steps;
    j["parameters"] = d;
    j["seeds"] = std::max(1u, a.seeds);
    j["marsit"] = {{"compensation", a.compensation}, {"full_sync", a.full_sync}};
    j["formulas"] = {
        {"match_rate", kFormulaMatch}, {"rel_l2", kFormulaRel}, {"acc_err", kFormulaAcc}, {"hop_bits", kFormulaHop}};
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const auto& r : rows) {
      uint64_t total = 0;
      std::vector<double> per_param;
      for (uint64_t b : r.hop_bits) {
        total += b;
        per_param.push_back(static_cast<double>(b) / dd);
      }
      arr.push_back({{"method", r.method},
                     {"stochastic", r.stochastic},
                     {"seeds", r.seeds},
                     {"match_rate", mean_of(r.match)},
                     {"match_rate_min", min_of(r.match)},
                     {"match_rate_max", max_of(r.match)},
                     {"match_rate_per_seed", r.match},
                     {"rel_l2", mean_of(r.rel)},
                     {"rel_l2_per_seed", r.rel},
                     {"acc_err", mean_of(r.acc_err)},
                     {"acc_err_per_seed", r.acc_err},
                     {"hop_bits", r.hop_bits},
                     {"hop_bits_per_param", per_param},
                     {"ring_bits", total},
                     {"ring_bits_per_param", static_cast<double>(total) / dd}});
    }
    j["rows"] = arr;
    const std::string text = j.dump(2) + "\n";
    AtomicOutput out(a.json, true);
    out.write(text.data(), text.size());
    out.commit();
  }
  return 0;
}

}  // namespace gradcodec::cli
