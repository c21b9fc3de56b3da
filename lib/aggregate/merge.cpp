// SPDX-License-Identifier: BSD-3-Clause
// The merge front end (gradcodec/merge.hpp): method names, the dispatch to one file per method,
// the applicability checks, and the frame-by-frame merge of containers.
#include <gradcodec/codec.hpp>
#include <gradcodec/merge.hpp>

#include "aggregate/cascade.hpp"
#include "aggregate/majority.hpp"
#include "aggregate/marsit.hpp"
#include "aggregate/mean.hpp"
#include "aggregate/signs.hpp"
#include "base/ordered_pool.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

namespace gradcodec {

const char* merge_method_name(MergeMethod m) noexcept {
  switch (m) {
    case MergeMethod::Marsit: return "marsit";
    case MergeMethod::Cascade: return "cascade";
    case MergeMethod::Majority: return "majority";
    case MergeMethod::Mean: return "mean";
  }
  return "?";
}

const std::vector<MergeMethod>& merge_methods() {
  static const std::vector<MergeMethod> all = {MergeMethod::Marsit, MergeMethod::Cascade, MergeMethod::Majority,
                                               MergeMethod::Mean};
  return all;
}

MergeMethod parse_merge_method(const std::string& name) {
  for (MergeMethod m : merge_methods())
    if (name == merge_method_name(m)) return m;
  fail(ErrorCode::Usage, "unknown merge method '" + name + "' (expected marsit, cascade, majority or mean)");
}

MergedValues merge_values(MergeMethod method, const std::vector<std::span<const float>>& workers,
                          const MergeKey& key, std::optional<double> eta) {
  if (workers.size() < 2)
    fail(ErrorCode::Usage, "merge needs at least 2 workers, got " + std::to_string(workers.size()));
  for (const auto& w : workers)
    if (w.size() != workers[0].size())
      fail(ErrorCode::Usage, "merge: workers hold " + std::to_string(workers[0].size()) + " and " +
                                 std::to_string(w.size()) + " values");
  switch (method) {
    case MergeMethod::Marsit: return aggregate::marsit(workers, key, eta);
    case MergeMethod::Cascade: return aggregate::cascade(workers, key);
    case MergeMethod::Majority: return aggregate::majority(workers, eta);
    case MergeMethod::Mean: return aggregate::mean(workers);
  }
  fail(ErrorCode::Internal, "merge: unknown method");
}

std::vector<uint8_t> merge_sign_bits(std::span<const float> values) { return aggregate::sign_bits(values); }

double merge_scale(std::span<const float> values) { return aggregate::mean_abs(values); }

void marsit_hop(std::span<uint8_t> running, std::span<const uint8_t> own, uint32_t m, uint32_t workers,
                const MergeKey& key) {
  if (m < 2 || m > workers)
    fail(ErrorCode::Usage, "marsit_hop: worker " + std::to_string(m) + " of " + std::to_string(workers) +
                               " (expected 2.." + std::to_string(workers) + ")");
  if (running.size() != own.size())
    fail(ErrorCode::Usage, "marsit_hop: " + std::to_string(running.size()) + " running bits and " +
                               std::to_string(own.size()) + " of the worker's own");
  aggregate::marsit_step(running, own, m, workers, Rng(key.seed, key.frame, key.tensor, RngPurpose::Merge));
}

bool is_sign_pipeline(const Pipeline& p) {
  bool quantizer = false;
  for (const StageSpec& s : p.stages()) {
    const StageEntry* e = find_stage(s.name);
    if (!e) return false;
    switch (e->kind) {
      case StageKind::Transform:
        if (s.name != "ef") return false;
        break;
      case StageKind::Quantizer:
        if (s.name != "sign" && s.name != "ssdm" && s.name != "onebit") return false;
        quantizer = true;
        break;
      case StageKind::Lossless: break;
      default: return false;  // a reducer, an index coder: not one sign per element
    }
  }
  return quantizer;
}

bool is_full_precision_pipeline(const Pipeline& p) { return PipelineStages(p).lossless(); }

namespace {

bool sign_method(MergeMethod m) { return m == MergeMethod::Marsit || m == MergeMethod::Majority; }

std::string frame_label(size_t f) { return "frame " + std::to_string(f); }

}  // namespace

void check_mergeable(const std::vector<const ContainerReader*>& in, const MergeOptions& o) {
  const std::string method = merge_method_name(o.method);
  if (in.size() < 2) fail(ErrorCode::Usage, "merge needs at least 2 input containers, got " + std::to_string(in.size()));
  if (o.pipeline && o.method != MergeMethod::Mean)
    fail(ErrorCode::Usage, "--pipeline/--preset applies to --method mean only (" + method +
                               " writes the 1-bit `sign` pipeline)");
  if (o.eta && !sign_method(o.method))
    fail(ErrorCode::Usage, "--eta applies to --method marsit and majority only, not " + method);
  if (o.eta && !(*o.eta >= 0 && *o.eta < 3.4e38)) fail(ErrorCode::Usage, "--eta must be a finite value >= 0");
  if (sign_method(o.method)) {
    const bool marsit = o.method == MergeMethod::Marsit;
    bool all_full = true;
    for (const ContainerReader* r : in) {
      const Pipeline p = Pipeline::from_json(r->header().pipeline_json);
      const bool one_pipeline = r->variants().size() <= 1;
      const bool full = one_pipeline && is_full_precision_pipeline(p);
      all_full = all_full && full;
      if ((!is_sign_pipeline(p) || !one_pipeline) && !(marsit && full))
        fail(ErrorCode::Usage, "merge --method " + method + ": " + r->path() + " uses pipeline '" + p.text() +
                                   "', not a 1-bit sign pipeline (sign, ssdm or onebit, optionally after ef)" +
                                   (marsit ? " nor a full-precision one (lossless, raw)" : "") +
                                   "; --method mean or cascade merge any pipeline");
    }
    if (o.full_sync > 0 && !(marsit && all_full))
      fail(ErrorCode::Usage, "--full-sync applies to --method marsit of full-precision (lossless, raw) worker "
                             "containers only: the full-precision frames need each worker's full-precision gradient");
  } else if (o.full_sync > 0) {
    fail(ErrorCode::Usage, "--full-sync applies to --method marsit only, not " + method);
  }
  const ContainerReader& a = *in[0];
  for (size_t k = 1; k < in.size(); ++k) {
    const ContainerReader& b = *in[k];
    if (b.frame_count() != a.frame_count())
      fail(ErrorCode::Input, "merge: " + a.path() + " has " + std::to_string(a.frame_count()) + " frame(s), " +
                                 b.path() + " has " + std::to_string(b.frame_count()));
    for (size_t f = 0; f < a.frame_count(); ++f) {
      if (b.record_count(f) != a.record_count(f))
        fail(ErrorCode::Input, "merge: " + frame_label(f) + " of " + a.path() + " has " +
                                   std::to_string(a.record_count(f)) + " tensors, of " + b.path() + " " +
                                   std::to_string(b.record_count(f)));
      for (size_t i = 0; i < a.record_count(f); ++i) {
        const TensorInfo x = a.record(f, i).info, y = b.record(f, i).info;
        const std::string where = "merge: tensor " + std::to_string(i) + " of " + frame_label(f) + ": ";
        if (x.name != y.name)
          fail(ErrorCode::Input, where + a.path() + " has '" + x.name + "', " + b.path() + " has '" + y.name + "'");
        if (x.shape != y.shape)
          fail(ErrorCode::Input, where + "'" + x.name + "' has shape " + shape_string(x.shape) + " in " + a.path() +
                                     ", " + shape_string(y.shape) + " in " + b.path());
        if (x.dtype != y.dtype || (x.dtype == DType::Other && x.descr != y.descr))
          fail(ErrorCode::Input, where + "'" + x.name + "' has dtype " + dtype_name(x.dtype) + " in " + a.path() +
                                     ", " + dtype_name(y.dtype) + " in " + b.path());
      }
    }
  }
}

MergeReport merge_containers(const std::vector<const ContainerReader*>& in, const std::string& output,
                             bool overwrite, const MergeOptions& o, const std::string& inputs_json) {
  check_mergeable(in, o);
  // marsit of full-precision inputs runs over the frames with compensation (MarsitSequence).
  std::optional<MarsitSequence> sequence;
  if (o.method == MergeMethod::Marsit &&
      std::all_of(in.begin(), in.end(), [](const ContainerReader* r) {
        return r->variants().size() <= 1 && is_full_precision_pipeline(Pipeline::from_json(r->header().pipeline_json));
      })) {
    // c follows each tensor over the frames: every frame must hold frame 0's tensors.
    const ContainerReader& a = *in[0];
    for (size_t f = 1; f < a.frame_count(); ++f)
      for (size_t i = 0; i < std::max(a.record_count(f), a.record_count(0)); ++i)
        if (i >= a.record_count(f) || i >= a.record_count(0) || a.record(f, i).info.name != a.record(0, i).info.name ||
            a.record(f, i).info.shape != a.record(0, i).info.shape)
          fail(ErrorCode::Input, "merge --method marsit: " + frame_label(f) + " of " + a.path() +
                                     " does not hold frame 0's tensors (tensor " + std::to_string(i) +
                                     "); the compensation follows each tensor over the frames (--method mean merges "
                                     "such frames)");
    sequence.emplace(a.frame_count() ? a.record_count(0) : 0, MarsitSequenceOptions{o.compensation, o.full_sync});
  }
  const Pipeline out_pipeline = o.method == MergeMethod::Mean ? (o.pipeline ? *o.pipeline : Pipeline::preset("lossless"))
                                : sequence && o.full_sync > 0 ? Pipeline::preset("lossless")
                                                              : Pipeline::parse("sign");
  // Progress in elements: each tensor's count once per worker's decoded copy, once merged and
  // once written (MergeOptions::progress). The calls come from one phase at a time.
  uint64_t work_done = 0, work_total = 0;
  for (size_t f = 0; f < in[0]->frame_count(); ++f)
    for (size_t i = 0; i < in[0]->record_count(f); ++i) work_total += in[0]->record(f, i).info.elements() * (in.size() + 2);
  auto advance = [&](uint64_t elements) {
    work_done += elements;
    if (o.progress) o.progress(work_done, work_total);
  };
  // One set of helper threads for the encoder, the decoders and the merge's own pool.
  const std::shared_ptr<Workers> helpers = make_workers();
  EncodeOptions eo;
  eo.seed = o.seed;
  eo.threads = std::max(1u, o.threads);
  eo.workers = helpers;
  eo.progress = [&](const TensorInfo& t) { advance(t.elements()); };
  // merge has no --nonfinite: a merged tensor the output pipeline cannot code is refused.
  eo.nonfinite_advice = o.nonfinite_advice;
  SequenceEncoder enc(out_pipeline, eo);
  std::vector<std::unique_ptr<SequenceDecoder>> dec;
  DecodeOptions dopt;
  dopt.memory_limit = o.memory_limit;
  dopt.threads = std::max(1u, o.threads);  // each worker's frame decoded on the same threads
  dopt.workers = helpers;
  for (const ContainerReader* r : in) dec.push_back(std::make_unique<SequenceDecoder>(*r, dopt));

  MergeReport rep;
  rep.frames = in[0]->frame_count();
  rep.tensors = rep.frames ? in[0]->record_count(0) : 0;
  rep.pipeline_text = out_pipeline.text();
  rep.hop_bits.assign(in.size() - 1, 0);
  ContainerWriter writer(output, overwrite, enc.header(inputs_json));
  const unsigned threads = std::max(1u, o.threads);
  // The output pipeline would refuse merged NaN/Inf with the encoder's message, whose advice
  // (--nonfinite=raw) merge does not take: say here where they come from. A worker's NaN, Inf or
  // value beyond float32's range (the merge computes in float32) is named with its container;
  // otherwise the method itself overflowed (cascade adds the workers' values in float32).
  const bool out_lossy = !PipelineStages(out_pipeline).lossless();
  auto refuse_nonfinite = [&](const std::vector<float>& merged, const std::vector<std::vector<Tensor>>& workers,
                              size_t i, size_t f) {
    if (std::all_of(merged.begin(), merged.end(), [](float v) { return std::isfinite(v); })) return;
    const std::string where = "merge --method " + std::string(merge_method_name(o.method)) + ", " + frame_label(f) +
                              ": tensor '" + workers[0][i].name() + "'";
    for (size_t m = 0; m < workers.size(); ++m) {
      if (const uint64_t bad = count_nonfinite(workers[m][i]) + count_beyond_f32(workers[m][i]))
        fail(ErrorCode::Input, where + " holds " + std::to_string(bad) +
                                   " value(s) that are NaN/Inf or beyond float32's range in " + in[m]->path() +
                                   "; pipeline '" + out_pipeline.text() + "' cannot code them");
    }
    fail(ErrorCode::Input, where + ": the merged values exceed float32's range (|x| > 3.4e38)" +
                               (o.method == MergeMethod::Cascade
                                    ? ": the ring adds the workers' values in float32, as the paper's does; --method "
                                      "mean sums in double"
                                    : ""));
  };
  for (size_t f = 0; f < rep.frames; ++f) {
    // Every worker's frame f, decoded with its own pipeline and state.
    std::vector<std::vector<Tensor>> workers(in.size());
    for (size_t m = 0; m < in.size(); ++m)
      dec[m]->decode_frame(f, [&](Tensor&& t) {
        advance(t.elements());
        workers[m].push_back(std::move(t));
      });
    const size_t count = workers[0].size();
    std::vector<Tensor> merged(count);
    std::vector<std::vector<uint64_t>> hops(count);
    // Memory of tensor i while it is merged: every worker's copy in f32 and the merged bytes.
    std::vector<uint64_t> bytes(count);
    for (size_t i = 0; i < count; ++i) bytes[i] = workers[0][i].elements() * (4 * in.size() + 8);
    auto work = [&](size_t i) -> uint64_t {
      const Tensor& first = workers[0][i];
      if (!is_float(first.dtype())) {  // pass-through record: the first input's
        merged[i] = first;
        return 0;
      }
      const uint64_t n = first.elements();
      std::vector<std::vector<float>> vals(in.size(), std::vector<float>(n));
      std::vector<std::span<const float>> spans;
      for (size_t m = 0; m < in.size(); ++m) {
        if (n) to_f32(workers[m][i].dtype(), workers[m][i].data.data(), n, vals[m].data());
        spans.emplace_back(vals[m]);
      }
      const MergeKey key{o.seed, static_cast<uint32_t>(f), static_cast<uint32_t>(i)};
      MergedValues mv = sequence ? sequence->merge(spans, key, o.eta) : merge_values(o.method, spans, key, o.eta);
      if (out_lossy) refuse_nonfinite(mv.values, workers, i, f);
      std::vector<uint8_t> out(n * dtype_size(first.dtype()));
      if (n) from_f32(mv.values.data(), n, first.dtype(), out.data());
      merged[i].info = first.info;
      merged[i].data = Buffer(std::move(out));
      hops[i] = std::move(mv.hop_bits);
      return 0;  // the merged tensor waits for the frame's encoder, outside this pool's count
    };
    // Tensors merged on `threads` threads, each taking the next as it finishes one; the hop bits
    // are added in tensor order, and the error reported is the first tensor's that fails.
    auto add_hops = [&](size_t i) {
      for (size_t h = 0; h < hops[i].size() && h < rep.hop_bits.size(); ++h) rep.hop_bits[h] += hops[i][h];
      advance(merged[i].elements());
    };
    run_ordered(*helpers, bytes, threads, work, add_hops, CommitOn::AnyThread);
    workers.clear();
    FrameSource src;
    src.count = count;
    src.info = [&](size_t i) { return merged[i].info; };
    src.load = [&](size_t i) { return merged[i]; };
    src.source = std::string("merge --method ") + merge_method_name(o.method) + ", " + frame_label(f);
    enc.encode_frame(src, writer);
  }
  writer.finish();
  rep.bytes_written = writer.bytes_written();
  return rep;
}

}  // namespace gradcodec
