// SPDX-License-Identifier: BSD-3-Clause
// SequenceEncoder (see codec.hpp): frames of tensors into container records, on a pool of
// worker threads that keeps the bytes the same for any thread count and memory bounded.
#include <gradcodec/bytes.hpp>
#include <gradcodec/codec.hpp>

#include "base/ordered_pool.hpp"

#include <algorithm>
#include <iterator>
#include <mutex>
#include <set>
#include <unordered_map>

namespace gradcodec {

struct SequenceEncoder::Impl {
  Pipeline pipeline;
  EncodeOptions opt;
  PipelineStages stages;
  std::unordered_map<std::string, PipelineStages::TensorState> states;
  std::set<std::string> last_floats;  // the floating tensors of the frame before
  Impl(const Pipeline& p, const EncodeOptions& o) : pipeline(p), opt(o), stages(p) {
    if (!opt.workers) opt.workers = make_workers();  // EncodeOptions::workers, or the encoder's own
  }
};

SequenceEncoder::SequenceEncoder(const Pipeline& p, const EncodeOptions& o) : impl_(std::make_unique<Impl>(p, o)) {}
SequenceEncoder::~SequenceEncoder() = default;

ContainerHeader SequenceEncoder::header(const std::string& inputs_json) const {
  ContainerHeader h;
  h.tool = tool_version();
  h.pipeline_json = impl_->pipeline.json();
  h.pipeline_text = impl_->pipeline.text();
  h.seed = impl_->opt.seed;
  h.keyframe_interval = impl_->opt.keyframe_interval;
  h.inputs_json = inputs_json;
  return h;
}

// (codec.hpp) A name or a dtype description over kMaxStr16 bytes (u16 lengths), more than
// kMaxDims dimensions.
void check_storable(const TensorInfo& info, const std::string& source) {
  auto shown = [](const std::string& s) { return s.size() > 40 ? s.substr(0, 40) + "..." : s; };
  const std::string most = std::to_string(kMaxStr16);
  if (info.name.size() > kMaxStr16)
    fail(ErrorCode::Input, source + ": tensor name '" + shown(info.name) + "' has " + std::to_string(info.name.size()) +
                               " bytes; a container stores names of at most " + most);
  if (info.descr.size() > kMaxStr16)
    fail(ErrorCode::Input, source + ": tensor '" + shown(info.name) + "': dtype description of " +
                               std::to_string(info.descr.size()) + " bytes; a container stores at most " + most);
  if (info.shape.size() > kMaxDims)
    fail(ErrorCode::Input, source + ": tensor '" + shown(info.name) + "' has " + std::to_string(info.shape.size()) +
                               " dimensions; a container stores at most " + std::to_string(kMaxDims));
}

EncodedRecord encode_record(const PipelineStages& stages, const Tensor& t, const StageContext& ctx,
                            PipelineStages::TensorState& st, NonFinite nonfinite_policy, bool timed,
                            const std::string& source, Tensor* decoded, const std::string& advice) {
  EncodedRecord rec;
  if (t.dtype() == DType::Other) {
    rec.storage = Storage::PassThrough;
    rec.streams.add("raw").bytes.assign(t.data.data(), t.data.data() + t.data.size());
    if (decoded) {
      decoded->info = t.info;
      decoded->data = Buffer(std::vector<uint8_t>(t.data.data(), t.data.data() + t.data.size()));
    }
    return rec;
  }
  if (ctx.keyframe) st.dec.clear();
  // A lossy pipeline's tensor with NaN/Inf is refused or stored raw. Counted here, or by the
  // pipeline's first stage as it reads an f32 tensor (PipelineStages::screens_nonfinite). So
  // is an f64 tensor holding finite values beyond float32's range: lossy stages compute in
  // float32, where they would turn into Inf (and a norm of them into NaN for every element).
  const bool screened = stages.screens_nonfinite() && t.dtype() == DType::F32;
  uint64_t nonfinite = stages.lossless() || screened ? 0 : count_nonfinite(t);
  const uint64_t beyond = stages.lossless() ? 0 : count_beyond_f32(t);
  auto refuse_nonfinite = [&] {
    if (nonfinite_policy != NonFinite::Refuse) return;
    if (nonfinite)
      fail(ErrorCode::Input, source + ": tensor '" + t.name() + "' has " + std::to_string(nonfinite) +
                                 " non-finite value(s) (NaN/Inf) and the pipeline is lossy; " + advice);
    if (beyond)
      fail(ErrorCode::Input, source + ": tensor '" + t.name() + "' has " + std::to_string(beyond) +
                                 " value(s) beyond float32's range (|x| > 3.4e38), which the lossy pipeline, "
                                 "computing in float32, would turn into Inf/NaN; " + advice);
  };
  refuse_nonfinite();
  PipelineStages::Encoded enc;
  if (!nonfinite && !beyond) {  // (else NonFinite::Raw: the tensor is stored raw, as it is)
    enc = stages.encode(t, ctx, st, timed);
    rec.times = enc.times;
    rec.kept = enc.kept;
    if (screened) nonfinite = enc.nonfinite;
    refuse_nonfinite();
    // A stage met finite values it cannot represent (a norm beyond float32, a value beyond
    // float16): decoded, they would be Inf/NaN.
    if (!enc.overflow.empty() && nonfinite_policy == NonFinite::Refuse)
      fail(ErrorCode::Input, source + ": tensor '" + t.name() + "': " + enc.overflow +
                                 ", which would decode as Inf/NaN; " + advice);
  }
  // A narrow tensor (f16, bf16) decodes to the stages' f32 values rounded to its dtype, where an
  // estimate that overshoots the dtype's largest value (a qsgd level at a bucket's norm, ssdm's
  // norm-scaled signs, a zfp block) would be ±Inf. Found by decoding the record as the decoder
  // will: here for a stateless pipeline (from an empty state), below for a stateful one.
  const bool narrow = t.dtype() == DType::F16 || t.dtype() == DType::BF16;
  const PipelineStages& ds = enc.variant >= 0 ? stages.variant(enc.variant) : stages;
  auto refuse_narrow = [&](uint64_t bad, bool stateful) {
    fail(ErrorCode::Input, source + ": tensor '" + t.name() + "': " + std::to_string(bad) +
                               " decoded value(s) beyond " + dtype_name(t.dtype()) +
                               "'s range, which would decode as Inf; " +
                               (stateful && nonfinite_policy != NonFinite::Refuse
                                    ? std::string("a stateful pipeline cannot store such a tensor raw")
                                    : advice));
  };
  Tensor checked;  // the stateless record decoded, when is_checked
  bool is_checked = false, narrow_overflow = false;
  if (narrow && !stages.lossless() && !stages.stateful() && !nonfinite && !beyond && enc.overflow.empty() &&
      enc.streams.total_bytes() < t.data.size()) {
    PipelineStages::TensorState fresh;
    checked = ds.decode(t.info, enc.streams, true, ctx, fresh);
    is_checked = true;
    if (const uint64_t bad = count_nonfinite(checked)) {
      if (nonfinite_policy == NonFinite::Refuse) refuse_narrow(bad, false);
      narrow_overflow = true;
    }
  }
  if (nonfinite || beyond || !enc.overflow.empty() || narrow_overflow || enc.streams.total_bytes() >= t.data.size()) {
    enc = PipelineStages::Encoded{};  // free the larger-than-raw streams before the raw copy
    rec.kept = t.elements();          // every value sent, exactly
    rec.storage = Storage::Raw;
    rec.streams.add("raw", static_cast<uint8_t>(dtype_size(t.dtype())))
        .bytes.assign(t.data.data(), t.data.data() + t.data.size());
    stages.observe_raw(t, ctx, st, true);
    if (decoded) {  // a raw record decodes to the tensor's own bytes
      decoded->info = t.info;
      decoded->data = Buffer(std::vector<uint8_t>(t.data.data(), t.data.data() + t.data.size()));
    }
    return rec;
  }
  rec.storage = Storage::Pipeline;
  rec.stats = std::move(enc.stats);
  rec.variant = enc.variant;
  // The decoder decodes a record with its variant's pipeline (ds), if any.
  if (stages.stateful()) {
    // The mirror decoder decodes what the decoder will, into the decoder side of the state.
    std::vector<float> recon;
    Tensor out = ds.decode(t.info, std::move(enc.plain), false, ctx, st, &recon);
    if (narrow && !stages.lossless())
      if (const uint64_t bad = count_nonfinite(out)) refuse_narrow(bad, true);
    stages.after_encode(recon, ctx, st);
    if (decoded) *decoded = std::move(out);
  } else if (decoded) {
    // A decoder of a stateless pipeline starts each record from an empty state.
    if (!is_checked) {
      PipelineStages::TensorState fresh;
      checked = ds.decode(t.info, enc.streams, true, ctx, fresh);
    }
    *decoded = std::move(checked);
  }
  rec.streams = std::move(enc.streams);
  return rec;
}

namespace {

// Slack of the pool's memory budget beyond threads × the largest tensor (run_ordered's
// min_slack): finished records wait for the writer while the other threads go on. With
// `lossless` on 110 VGG16 tensors of at most 9.4 MB, a record is ~85% of its tensor, and with ½ ×
// the largest tensor of slack a thread waited for room while another wrote (docs/performance.md).
// 16 MiB fits in the + 64 MB of the memory bound (peak RSS ≤ 3 × the
// largest tensor + 64 MB, checked by tests/cli/cli_memory.py) and changes nothing for tensors
// over 32 MiB.
constexpr uint64_t kEncodeSlack = uint64_t{16} << 20;

struct Job {
  Tensor tensor;             // its data is dropped once encoded (see release_input)
  uint64_t input_bytes = 0;  // the tensor's bytes as stored
  Streams streams;
  std::vector<uint64_t> checksums;  // of the streams, made by the worker (the writer only writes)
  Storage storage = Storage::Pipeline;
  uint64_t kept = 0;
  StageTimes times;
  StageStats stats;
  int variant = -1;  // PipelineStages::variant() that made the record
  std::exception_ptr error;
};
}  // namespace

std::vector<TensorOutcome> SequenceEncoder::encode_frame(const FrameSource& src, RecordSink& w) {
  Impl& im = *impl_;
  const uint32_t frame = frame_;
  const bool keyframe = frame == 0 || (im.opt.keyframe_interval && frame % im.opt.keyframe_interval == 0);
  w.begin_frame({frame, keyframe, src.recorded.empty() ? src.source : src.recorded});
  std::vector<TensorOutcome> outcomes;
  std::set<std::string> seen, floats;
  const unsigned threads = std::max(1u, im.opt.threads);

  // Names first (metadata only): duplicates and tensors over the memory limit are refused before
  // any record is written, and every tensor's state slot exists before the workers start (they
  // only look slots up).
  for (size_t i = 0; i < src.count; ++i) {
    const TensorInfo info = src.info(i);
    check_storable(info, src.source);
    const std::string& name = info.name;
    // Refused before any tensor is loaded (the reducer's pre-pass below may load them): a small
    // input may declare a tensor far larger than itself (a compressed NPZ member).
    const uint64_t need = im.stages.work_bytes(info);
    if (need > im.opt.memory_limit)
      fail(ErrorCode::Input, src.source + ": tensor '" + name + "' (" + std::to_string(info.elements()) + " " +
                                 dtype_name(info.dtype) + " elements) needs " + std::to_string(need) +
                                 " bytes of memory to encode with pipeline '" + im.pipeline.text() +
                                 "', over the memory limit of " + std::to_string(im.opt.memory_limit) +
                                 " bytes (--memory-limit)");
    if (!seen.insert(name).second) fail(ErrorCode::Input, src.source + ": tensor '" + name + "' appears twice");
    im.states[name];
    if (is_float(info.dtype)) floats.insert(name);
  }
  // A stateful pipeline's decoder rebuilds a tensor's state from the last keyframe on, so every
  // frame since then must hold the same tensors: one that appears or goes away in between would
  // make a container its own decoder cannot read. Refused here, naming the tensor.
  if (im.stages.stateful() && !keyframe && floats != im.last_floats) {
    std::vector<std::string> added, gone;
    std::set_difference(floats.begin(), floats.end(), im.last_floats.begin(), im.last_floats.end(),
                        std::back_inserter(added));
    std::set_difference(im.last_floats.begin(), im.last_floats.end(), floats.begin(), floats.end(),
                        std::back_inserter(gone));
    const std::string what = !added.empty() ? "tensor '" + added[0] + "' is new in this frame"
                                            : "tensor '" + gone[0] + "' of the frame before is missing";
    fail(ErrorCode::Input, src.source + ": " + what + "; pipeline '" + im.pipeline.text() +
                               "' keeps state across frames and needs the same tensors in every frame since the last "
                               "keyframe (--keyframe-interval 1 makes every frame one)");
  }
  im.last_floats = std::move(floats);
  StageContext plan_ctx;
  plan_ctx.seed = im.opt.seed;
  plan_ctx.frame = frame;
  plan_ctx.keyframe = keyframe;
  plan_ctx.threads = threads;
  plan_ctx.workers = im.opt.workers.get();
  FrameView view;
  view.count = src.count;
  view.info = src.info;
  view.load = src.load;
  std::shared_ptr<const StageState> plan =
      im.stages.plan_frame(view, plan_ctx, [&](size_t i) -> const PipelineStages::TensorState* {
        auto it = im.states.find(src.info(i).name);
        return it == im.states.end() ? nullptr : &it->second;
      });

  auto run = [&](Job& job, uint32_t index) {
    try {
      const Tensor& t = job.tensor;
      StageContext ctx;
      ctx.seed = im.opt.seed;
      ctx.frame = frame;
      ctx.tensor = index;
      ctx.keyframe = keyframe;
      ctx.info = &t.info;
      ctx.frame_plan = plan.get();
      auto& st = im.states.at(t.name());  // created before the workers start
      EncodedRecord rec = encode_record(im.stages, t, ctx, st, im.opt.nonfinite, im.opt.time_stages, src.source,
                                        nullptr, im.opt.nonfinite_advice);
      job.storage = rec.storage;
      job.streams = std::move(rec.streams);
      job.variant = rec.variant;
      job.kept = rec.kept;
      job.times = rec.times;
      job.stats = std::move(rec.stats);
    } catch (...) {
      job.error = std::current_exception();
    }
  };

  // The records go to the writer in source order, whatever order the tensors finish in.
  auto commit = [&](Job& job, size_t index) {
    uint64_t before = w.bytes_written();
    const uint32_t variant = job.variant >= 0 ? w.variant(im.stages.variant(job.variant).pipeline().json()) : 0;
    TensorOutcome o;
    for (const auto& s : job.streams.all()) o.streams.emplace_back(s.name, s.bytes.size());
    w.add_record(static_cast<uint32_t>(index), job.tensor.info, job.storage, variant, std::move(job.streams), job.checksums);
    o.info = job.tensor.info;
    o.storage = job.storage;
    o.input_bytes = job.input_bytes;
    o.record_bytes = w.bytes_written() - before;
    o.kept = job.kept;
    o.times = job.times;
    o.stats = std::move(job.stats);
    outcomes.push_back(std::move(o));
    if (im.opt.progress) im.opt.progress(job.tensor.info);
  };
  // Once its record is made, a tensor's bytes are not needed: dropping them before the record is
  // written lets a memory-mapped input's pages go (InputFile::slice) while earlier records wait.
  auto release_input = [](Job& job) {
    job.input_bytes = job.tensor.data.size();
    job.tensor.data = Buffer();
  };
  auto load = [&](Job& job, size_t i) {
    job.tensor = src.load(i);
    if (job.tensor.name() != src.info(i).name)
      fail(ErrorCode::Internal, src.source + ": tensor " + std::to_string(i) + " loaded under another name");
  };
  // Tensors are loaded one at a time (format readers need not be thread-safe) and
  // encoded on the pool; their records go to the writer in source order. A tensor's bytes are
  // counted against the pool's memory budget from its load to the end of its commit.
  std::vector<uint64_t> bytes_of(src.count, 0);
  // EncodeOptions::owns: the records this encoder keeps. A stateful pipeline that plans over the
  // frame plans from every tensor's state (TCS's global mask from the previous aggregated
  // update), so each tensor is encoded here to keep its state, and only the owned records kept.
  std::vector<bool> owned(src.count, true);
  const bool encode_all = im.stages.plans_frame() && im.stages.stateful();
  for (size_t i = 0; i < src.count; ++i) {
    const TensorInfo info = src.info(i);
    if (im.opt.owns) owned[i] = im.opt.owns(info.name);
    if (is_float(info.dtype) && (owned[i] || encode_all)) bytes_of[i] = info.elements() * dtype_size(info.dtype);
  }
  std::vector<std::unique_ptr<Job>> slots(src.count);
  std::mutex load_mu;
  run_ordered(
      *im.opt.workers, bytes_of, threads,
      [&](size_t i) -> uint64_t {
        if (!owned[i] && !encode_all) return 0;  // another process's tensor: no record here
        auto job = std::make_unique<Job>();
        {
          std::lock_guard<std::mutex> lk(load_mu);
          load(*job, i);
        }
        run(*job, static_cast<uint32_t>(i));
        release_input(*job);
        if (job->error) std::rethrow_exception(job->error);
        job->checksums = stream_checksums(job->streams);
        uint64_t record = 0;  // what the job holds until its commit: its streams' buffers
        for (const auto& s : job->streams.all()) record += s.bytes.capacity();
        slots[i] = std::move(job);
        return record;
      },
      [&](size_t i) {
        if (slots[i] && owned[i]) commit(*slots[i], i);
        slots[i].reset();  // the tensor and its streams are freed before the next is admitted
      },
      CommitOn::AnyThread,  // the writer is used by one thread at a time, in record order
      kEncodeSlack);
  ++frame_;
  return outcomes;
}

}  // namespace gradcodec
