// Running pipelines over tensors, frames and sequences (see codec.hpp).
#include <gradcodec/codec.hpp>

#include "core/pages.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

namespace gradcodec {

const char* tool_version() noexcept { return "gradcodec 0.1.0"; }

namespace {
// Largest size a lossless stage may inflate one stream of a tensor of n elements to.
uint64_t stream_bound(uint64_t n) { return 16 * n + (uint64_t{1} << 20); }
}  // namespace

// ------------------------------------------------------------------ PipelineStages

PipelineStages::PipelineStages(const Pipeline& p) : pipeline_(p) {
  for (const auto& spec : p.stages()) {
    const StageEntry* e = find_stage(spec.name);
    if (!e) fail(ErrorCode::Internal, "stage " + spec.name + " vanished from the registry");
    auto st = e->make(spec.params, spec.version);
    size_t pos = stages_.size();
    switch (e->kind) {
      case StageKind::Transform: transforms_.push_back(pos); break;
      case StageKind::Sparsifier:
      case StageKind::LowRank: reducer_ = static_cast<int>(pos); break;
      case StageKind::Quantizer: quantizer_ = static_cast<int>(pos); break;
      case StageKind::IndexCoder: indexer_ = static_cast<int>(pos); break;
      case StageKind::Lossless: lossless_.push_back(pos); break;
    }
    stateful_ = stateful_ || st->stateful();
    stochastic_ = stochastic_ || st->stochastic();
    has_stats_ = has_stats_ || st->has_stats();
    stages_.push_back(std::move(st));
  }
  if (quantizer_ < 0) fail(ErrorCode::Internal, "pipeline without a value codec");
  exact_values_ = transforms_.empty() &&
                  (reducer_ < 0 || static_cast<Reducer*>(stages_[reducer_].get())->values_exact());
  bit_exact_ = transforms_.empty() && reducer_ < 0 && p.stages()[quantizer_].name == "raw";
  screens_nonfinite_ = transforms_.empty() && !stateful_ && reducer_ >= 0 &&
                       static_cast<Reducer*>(stages_[reducer_].get())->screens_nonfinite();
  // A control reducer (accordion): one variant per alternative, the alternative's reducer written
  // in place of it (same positions, so the variants share the state slots).
  if (reducer_ >= 0) {
    for (const std::string& alt : static_cast<Reducer*>(stages_[reducer_].get())->alternatives()) {
      std::vector<StageSpec> specs = p.stages();
      specs[static_cast<size_t>(reducer_)] = Pipeline::parse(alt).stages().front();
      variants_.push_back(std::make_unique<PipelineStages>(Pipeline::from_stages(std::move(specs))));
    }
  }
}

const PipelineStages& PipelineStages::variant(int k) const {
  if (k < 0 || static_cast<size_t>(k) >= variants_.size())
    fail(ErrorCode::Internal, "pipeline variant " + std::to_string(k) + " does not exist");
  return *variants_[static_cast<size_t>(k)];
}

PipelineStages::~PipelineStages() = default;
PipelineStages::PipelineStages(PipelineStages&&) noexcept = default;

std::shared_ptr<const StageState> PipelineStages::plan_frame(const FrameView& frame, const StageContext& base,
                                                             const std::function<const TensorState*(size_t)>& states) const {
  if (reducer_ < 0) return nullptr;
  StageContext c = base;
  c.stage_pos = static_cast<uint32_t>(reducer_);
  FrameView v = frame;
  if (states) {
    const auto pos = static_cast<size_t>(reducer_);
    v.state = [&states, pos](size_t i) -> const StageState* {
      const TensorState* ts = states(i);
      return ts && pos < ts->enc.size() ? ts->enc[pos].get() : nullptr;
    };
    v.shared = [&states, pos](size_t i) -> const StageState* {
      const TensorState* ts = states(i);
      return ts && pos < ts->dec.size() ? ts->dec[pos].get() : nullptr;
    };
  }
  return static_cast<Reducer*>(stages_[reducer_].get())->plan_frame(v, c);
}

StageContext PipelineStages::stage_ctx(const StageContext& base, size_t pos,
                                       std::vector<std::unique_ptr<StageState>>& slots) const {
  StageContext c = base;
  c.stage_pos = static_cast<uint32_t>(pos);
  if (slots.size() < stages_.size()) slots.resize(stages_.size());
  c.shared = &slots[pos];
  return c;
}

namespace {
// Times a stage call into `times` when `on`.
struct Timer {
  StageTimes& times;
  StageKind kind;
  bool on;
  std::chrono::steady_clock::time_point start;
  Timer(StageTimes& t, StageKind k, bool enabled) : times(t), kind(k), on(enabled) {
    if (on) start = std::chrono::steady_clock::now();
  }
  ~Timer() {
    if (on) times.add(kind, std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count());
  }
};
}  // namespace

PipelineStages::Encoded PipelineStages::encode(const Tensor& t, const StageContext& base, TensorState& st,
                                               bool timed) const {
  Encoded out;
  Payload p;
  p.source = &t;
  p.info = &t.info;
  p.n = t.elements();
  if (st.enc.size() < stages_.size()) st.enc.resize(stages_.size());
  if (stateful_) st.transform_inputs.assign(transforms_.size(), {});
  auto ctx_for = [&](size_t pos) {
    StageContext c = stage_ctx(base, pos, st.dec);
    c.state = &st.enc[pos];
    return c;
  };
  if (!transforms_.empty()) {
    Timer tm(out.times, StageKind::Transform, timed);
    p.dense_f32();
    p.exact = false;
    for (size_t k = 0; k < transforms_.size(); ++k) {
      size_t pos = transforms_[k];
      static_cast<Transform*>(stages_[pos].get())->encode(p, ctx_for(pos));
      if (stateful_) st.transform_inputs[k] = p.values;
    }
  }
  auto* coder = indexer_ >= 0 ? static_cast<IndexCoder*>(stages_[indexer_].get()) : nullptr;
  const bool selects = coder && coder->selects();
  std::vector<float> dense;  // what the sparsifier selected from, kept only for IndexCoder::select
  if (reducer_ >= 0) {
    Timer tm(out.times, stages_[reducer_]->kind(), timed);
    auto* red = static_cast<Reducer*>(stages_[reducer_].get());
    if (selects || !red->reads_f32_view()) p.dense_f32();
    if (selects) dense = p.values;
    red->encode(p, out.streams, ctx_for(reducer_));
    out.variant = p.alternative;
    if (screens_nonfinite_ && p.nonfinite) {  // the codec refuses the tensor or stores it raw
      out.nonfinite = p.nonfinite;
      out.streams = {};
      return out;
    }
  }
  p.exact = exact_values_;
  if (selects && p.sparse && !p.index_implicit) {
    Timer tm(out.times, StageKind::IndexCoder, timed);
    coder->select(p, dense, ctx_for(indexer_));
    dense = {};
  }
  {
    Timer tm(out.times, StageKind::Quantizer, timed);
    static_cast<Quantizer*>(stages_[quantizer_].get())->encode(p, out.streams, ctx_for(quantizer_));
  }
  out.kept = p.value_count();
  if (coder && p.sparse && !p.index_implicit) {
    Timer tm(out.times, StageKind::IndexCoder, timed);
    coder->encode(p, out.streams, ctx_for(indexer_));
  }
  if (has_stats_)
    for (const auto& st : stages_) st->stream_stats(out.streams, out.stats);
  if (stateful_) out.plain = out.streams;
  Timer tm(out.times, StageKind::Lossless, timed && !lossless_.empty());
  for (size_t pos : lossless_) {
    const auto* l = static_cast<const Lossless*>(stages_[pos].get());
    for (auto& s : out.streams.all())
      if (l->only_stream.empty() || l->only_stream == s.name) s.bytes = l->encode(s.bytes, s.width);
  }
  return out;
}

Tensor PipelineStages::decode(const TensorInfo& info, Streams streams, bool lossless_applied,
                              const StageContext& base, TensorState& st,
                              std::vector<float>* before_transforms, uint64_t* kept) const {
  const uint64_t n = info.elements();
  if (lossless_applied) {
    for (auto it = lossless_.rbegin(); it != lossless_.rend(); ++it) {
      const auto* l = static_cast<const Lossless*>(stages_[*it].get());
      for (auto& s : streams.all())
        if (l->only_stream.empty() || l->only_stream == s.name) s.bytes = l->decode(s.bytes, stream_bound(n));
    }
  }
  Payload p;
  p.info = &info;
  p.n = n;
  p.exact = exact_values_;
  p.exact_dtype = info.dtype;
  auto ctx_for = [&](size_t pos) { return stage_ctx(base, pos, st.dec); };
  Reducer* red = reducer_ >= 0 ? static_cast<Reducer*>(stages_[reducer_].get()) : nullptr;
  if (red) {
    red->prepare_decode(p, streams, ctx_for(reducer_));
    if (indexer_ >= 0 && p.sparse && !p.index_implicit)
      static_cast<IndexCoder*>(stages_[indexer_].get())->decode(p, streams, ctx_for(indexer_));
  }
  if (kept) *kept = p.value_count();
  if (!red && !bit_exact_) reserve_fresh(p.values, n);  // dense values: all n into fresh memory
  static_cast<Quantizer*>(stages_[quantizer_].get())->decode_owned(p, streams, ctx_for(quantizer_));
  if (red) red->decode(p, streams, ctx_for(reducer_));

  Tensor out;
  out.info = info;
  if (!p.exact_bytes.empty() || (n == 0 && p.exact)) {
    if (p.exact_bytes.size() != n * dtype_size(info.dtype))
      fail(ErrorCode::Corrupt, info.name + ": decoded " + std::to_string(p.exact_bytes.size()) + " bytes, expected " +
                                   std::to_string(n * dtype_size(info.dtype)));
    if (before_transforms) {
      before_transforms->resize(n);
      to_f32(info.dtype, p.exact_bytes.data(), n, before_transforms->data());
    }
    out.data = Buffer(std::move(p.exact_bytes));
    return out;
  }
  if (p.values.size() != n)
    fail(ErrorCode::Corrupt, info.name + ": decoded " + std::to_string(p.values.size()) + " values, expected " +
                                 std::to_string(n));
  if (before_transforms) *before_transforms = p.values;
  for (auto it = transforms_.rbegin(); it != transforms_.rend(); ++it)
    static_cast<Transform*>(stages_[*it].get())->decode(p.values, ctx_for(*it));
  if (info.dtype == DType::F32 && n > 0) {  // the f32 values are the tensor's bytes: no copy
    auto keep = std::make_shared<const std::vector<float>>(std::move(p.values));
    out.data = Buffer::view(keep, reinterpret_cast<const uint8_t*>(keep->data()), n * 4);
    return out;
  }
  std::vector<uint8_t> bytes(n * dtype_size(info.dtype));
  from_f32(p.values.data(), n, info.dtype, bytes.data());
  out.data = Buffer(std::move(bytes));
  return out;
}

StageStats PipelineStages::stats(const TensorInfo& info, Streams streams, bool lossless_applied) const {
  StageStats out;
  if (!has_stats_) return out;
  if (lossless_applied) {
    for (auto it = lossless_.rbegin(); it != lossless_.rend(); ++it) {
      const auto* l = static_cast<const Lossless*>(stages_[*it].get());
      for (auto& s : streams.all())
        if (l->only_stream.empty() || l->only_stream == s.name) s.bytes = l->decode(s.bytes, stream_bound(info.elements()));
    }
  }
  for (const auto& st : stages_) st->stream_stats(streams, out);
  return out;
}

void PipelineStages::observe_raw(const Tensor& decoded, const StageContext& base, TensorState& st,
                                 bool encoder_side) const {
  if (!stateful_) return;
  std::vector<float> v(decoded.elements());
  if (!v.empty()) to_f32(decoded.dtype(), decoded.data.data(), v.size(), v.data());
  for (auto it = transforms_.rbegin(); it != transforms_.rend(); ++it)
    static_cast<Transform*>(stages_[*it].get())->on_raw(v, stage_ctx(base, *it, st.dec));
  if (reducer_ >= 0)
    static_cast<Reducer*>(stages_[reducer_].get())->on_raw(v, stage_ctx(base, static_cast<size_t>(reducer_), st.dec));
  if (encoder_side) after_encode(v, base, st);
}

void PipelineStages::after_encode(const std::vector<float>& recon, const StageContext& base, TensorState& st) const {
  if (st.enc.size() < stages_.size()) st.enc.resize(stages_.size());
  for (size_t k = 0; k < transforms_.size(); ++k) {
    size_t pos = transforms_[k];
    StageContext c = stage_ctx(base, pos, st.dec);
    c.state = &st.enc[pos];
    const std::vector<float>& in = k < st.transform_inputs.size() ? st.transform_inputs[k] : recon;
    static_cast<Transform*>(stages_[pos].get())->after_encode(in, recon, c);
  }
  if (reducer_ >= 0) {
    const auto pos = static_cast<size_t>(reducer_);
    StageContext c = stage_ctx(base, pos, st.dec);
    c.state = &st.enc[pos];
    static_cast<Reducer*>(stages_[pos].get())->after_encode(recon, c);
  }
}

// ------------------------------------------------------------------ SequenceEncoder

struct SequenceEncoder::Impl {
  Pipeline pipeline;
  EncodeOptions opt;
  PipelineStages stages;
  std::unordered_map<std::string, PipelineStages::TensorState> states;
  Impl(const Pipeline& p, const EncodeOptions& o) : pipeline(p), opt(o), stages(p) {}
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

namespace {
struct Job {
  Tensor tensor;             // its data is dropped once encoded (see release_input)
  uint64_t input_bytes = 0;  // the tensor's bytes as stored
  Streams streams;
  Storage storage = Storage::Pipeline;
  uint64_t kept = 0;
  StageTimes times;
  StageStats stats;
  int variant = -1;  // PipelineStages::variant() that made the record
  std::exception_ptr error;
};
}  // namespace

std::vector<TensorOutcome> SequenceEncoder::encode_frame(const FrameSource& src, ContainerWriter& w) {
  Impl& im = *impl_;
  const uint32_t frame = frame_;
  const bool keyframe = frame == 0 || (im.opt.keyframe_interval && frame % im.opt.keyframe_interval == 0);
  w.begin_frame({frame, keyframe, src.source});
  std::vector<TensorOutcome> outcomes;
  std::set<std::string> seen;
  const unsigned threads = std::max(1u, im.opt.threads);

  StageContext plan_ctx;
  plan_ctx.seed = im.opt.seed;
  plan_ctx.frame = frame;
  plan_ctx.keyframe = keyframe;
  plan_ctx.threads = threads;
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
      if (t.dtype() == DType::Other) {
        job.storage = Storage::PassThrough;
        job.streams.add("raw").bytes.assign(t.data.data(), t.data.data() + t.data.size());
        return;
      }
      auto& st = im.states.at(t.name());  // created before the workers start
      if (keyframe) st.dec.clear();
      // A lossy pipeline's tensor with NaN/Inf is refused or stored raw. Counted here, or by the
      // pipeline's first stage as it reads an f32 tensor (PipelineStages::screens_nonfinite).
      const bool screened = im.stages.screens_nonfinite() && t.dtype() == DType::F32;
      uint64_t nonfinite = im.stages.lossless() || screened ? 0 : count_nonfinite(t);
      auto refuse_nonfinite = [&] {
        if (nonfinite && im.opt.nonfinite == NonFinite::Refuse)
          fail(ErrorCode::Input, src.source + ": tensor '" + t.name() + "' has " + std::to_string(nonfinite) +
                                     " non-finite value(s) (NaN/Inf) and the pipeline is lossy; --nonfinite=raw "
                                     "stores such tensors raw");
      };
      refuse_nonfinite();
      StageContext ctx;
      ctx.seed = im.opt.seed;
      ctx.frame = frame;
      ctx.tensor = index;
      ctx.keyframe = keyframe;
      ctx.info = &t.info;
      ctx.frame_plan = plan.get();
      PipelineStages::Encoded enc;
      if (!nonfinite) {  // (else NonFinite::Raw: the tensor is stored raw, as it is)
        enc = im.stages.encode(t, ctx, st, im.opt.time_stages);
        job.times = enc.times;
        job.kept = enc.kept;
        if (screened) nonfinite = enc.nonfinite;
        refuse_nonfinite();
      }
      if (nonfinite || enc.streams.total_bytes() >= t.data.size()) {
        enc = PipelineStages::Encoded{};  // free the larger-than-raw streams before the raw copy
        job.kept = t.elements();  // every value sent, exactly
        job.storage = Storage::Raw;
        job.streams.add("raw", static_cast<uint8_t>(dtype_size(t.dtype())))
            .bytes.assign(t.data.data(), t.data.data() + t.data.size());
        im.stages.observe_raw(t, ctx, st, true);
      } else {
        job.storage = Storage::Pipeline;
        job.stats = std::move(enc.stats);
        job.variant = enc.variant;
        if (im.stages.stateful()) {
          // The mirror decoder decodes what the decoder will: the record's variant, if any.
          const PipelineStages& ds = enc.variant >= 0 ? im.stages.variant(enc.variant) : im.stages;
          std::vector<float> recon;
          ds.decode(t.info, std::move(enc.plain), false, ctx, st, &recon);
          im.stages.after_encode(recon, ctx, st);
        }
        job.streams = std::move(enc.streams);
      }
    } catch (...) {
      job.error = std::current_exception();
    }
  };

  // Names first (metadata only): duplicates are refused before any record is written, and every
  // tensor's state slot exists before the workers start (they only look slots up).
  for (size_t i = 0; i < src.count; ++i) {
    const std::string name = src.info(i).name;
    if (!seen.insert(name).second) fail(ErrorCode::Input, src.source + ": tensor '" + name + "' appears twice");
    im.states[name];
  }
  // The records go to the writer in source order, whatever order the tensors finish in.
  auto commit = [&](Job& job) {
    if (job.error) std::rethrow_exception(job.error);
    uint64_t before = w.bytes_written();
    const uint32_t variant = job.variant >= 0 ? w.variant(im.stages.variant(job.variant).pipeline().json()) : 0;
    w.add(job.tensor.info, job.storage, variant, job.streams);
    TensorOutcome o;
    o.info = job.tensor.info;
    o.storage = job.storage;
    o.input_bytes = job.input_bytes;
    o.record_bytes = w.bytes_written() - before;
    for (const auto& s : job.streams.all()) o.streams.emplace_back(s.name, s.bytes.size());
    o.kept = job.kept;
    o.times = job.times;
    o.stats = std::move(job.stats);
    outcomes.push_back(std::move(o));
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
  if (threads == 1 || src.count <= 1) {
    for (size_t i = 0; i < src.count; ++i) {
      Job job;
      load(job, i);
      run(job, static_cast<uint32_t>(i));
      release_input(job);
      commit(job);
    }
  } else {
    // A pool of `threads` workers takes the tensors in order (loading is serialised: format
    // readers need not be thread-safe). Memory stays bounded whatever the tensors' sizes: the
    // tensors loaded and not yet written hold at most (threads + ½) × the largest tensor's bytes
    // (the next tensor to write is always admitted), and at most 4 × threads of them at a time.
    // A byte budget rather than a count keeps small tensors (biases) from stalling the pool,
    // and no more big tensors are in flight than there are threads.
    std::vector<uint64_t> bytes_of(src.count, 0);
    uint64_t largest = 0;
    for (size_t i = 0; i < src.count; ++i) {
      const TensorInfo info = src.info(i);
      if (is_float(info.dtype)) bytes_of[i] = info.elements() * dtype_size(info.dtype);
      largest = std::max(largest, bytes_of[i]);
    }
    const uint64_t budget = threads * largest + largest / 2;
    const size_t most = 4 * static_cast<size_t>(threads);
    std::vector<std::unique_ptr<Job>> slots(src.count);
    std::mutex mu, load_mu;
    std::condition_variable cv;
    size_t next = 0, written = 0;
    uint64_t in_flight = 0;  // bytes of the tensors taken and not yet written
    bool stop = false;
    auto admit = [&] {
      return next == written || (next < written + most && in_flight + bytes_of[next] <= budget);
    };
    auto worker = [&] {
      for (;;) {
        size_t i;
        {
          std::unique_lock<std::mutex> lk(mu);
          cv.wait(lk, [&] { return stop || next >= src.count || admit(); });
          if (stop || next >= src.count) return;
          i = next++;
          in_flight += bytes_of[i];
        }
        auto job = std::make_unique<Job>();
        try {
          std::lock_guard<std::mutex> lk(load_mu);
          load(*job, i);
        } catch (...) {
          job->error = std::current_exception();
        }
        if (!job->error) {
          run(*job, static_cast<uint32_t>(i));
          release_input(*job);
        }
        {
          std::lock_guard<std::mutex> lk(mu);
          if (job->error) stop = true;
          slots[i] = std::move(job);
        }
        cv.notify_all();
      }
    };
    std::vector<std::thread> pool;
    for (unsigned k = 0; k < std::min<size_t>(threads, src.count); ++k) pool.emplace_back(worker);
    std::exception_ptr failure;
    for (size_t i = 0; i < src.count && !failure; ++i) {
      std::unique_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] { return slots[i] != nullptr; });
        job = std::move(slots[i]);
      }
      try {
        commit(*job);
      } catch (...) {
        failure = std::current_exception();
      }
      job.reset();  // the tensor and its streams are freed before the next is admitted
      {
        std::lock_guard<std::mutex> lk(mu);
        in_flight -= bytes_of[i];
        ++written;
        if (failure) stop = true;
      }
      cv.notify_all();
    }
    {
      std::lock_guard<std::mutex> lk(mu);
      stop = true;
    }
    cv.notify_all();
    for (auto& th : pool) th.join();
    if (failure) std::rethrow_exception(failure);
  }
  ++frame_;
  return outcomes;
}

// ------------------------------------------------------------------ SequenceDecoder

struct SequenceDecoder::Impl {
  const ContainerReader& reader;
  std::vector<std::unique_ptr<PipelineStages>> variants;  // lazily built
  struct Chain {
    PipelineStages::TensorState state;
    long long last_frame = -1;  // frame whose record was decoded last
  };
  std::unordered_map<std::string, Chain> chains;
  std::vector<std::unordered_map<std::string, size_t>> names;  // per frame, lazily
  size_t frames_read = 0;
  uint64_t kept = 0;  // of the last record decoded
  bool stateful = false;

  DecodeOptions opt;
  Impl(const ContainerReader& r, DecodeOptions o) : reader(r), opt(o) {
    variants.resize(r.variants().size());
    stateful = stages(0).stateful();
    names.resize(r.frame_count());
  }
  PipelineStages& stages(uint32_t v) {
    if (!variants[v]) variants[v] = std::make_unique<PipelineStages>(Pipeline::from_json(reader.variants()[v]));
    return *variants[v];
  }
  size_t find(size_t f, const std::string& name) {
    auto& m = names[f];
    if (m.empty())
      for (size_t i = 0; i < reader.record_count(f); ++i) m[reader.record(f, i).info.name] = i;
    auto it = m.find(name);
    if (it == m.end())
      fail(ErrorCode::Corrupt, reader.path() + ": tensor '" + name + "' missing from frame " + std::to_string(f) +
                                   " needed to decode later frames");
    return it->second;
  }
  Tensor decode_record(size_t f, size_t i, Chain& chain) {
    RecordMeta m = reader.record(f, i);
    const uint64_t need = m.info.elements() * std::max<uint64_t>(4, dtype_size(m.info.dtype));
    if (m.storage == Storage::Pipeline && need > opt.memory_limit)
      fail(ErrorCode::Input, reader.path() + ": tensor '" + m.info.name + "' of frame " + std::to_string(f) +
                                 " needs " + std::to_string(need) + " bytes to decode, over the memory limit of " +
                                 std::to_string(opt.memory_limit) + " bytes (--memory-limit)");
    Streams s = reader.streams(m);
    Tensor out;
    out.info = m.info;
    if (m.storage == Storage::PassThrough || m.storage == Storage::Raw) {
      std::vector<uint8_t> bytes = std::move(s.all()[0].bytes);
      out.data = Buffer(std::move(bytes));
    }
    StageContext ctx;
    ctx.seed = reader.header().seed;
    ctx.frame = static_cast<uint32_t>(f);
    ctx.tensor = static_cast<uint32_t>(i);
    ctx.keyframe = reader.frame(f).keyframe;
    ctx.info = &out.info;
    if (ctx.keyframe) chain.state.dec.clear();
    kept = 0;
    if (m.storage == Storage::Raw) {
      kept = m.info.elements();  // every value sent, exactly (as the encoder counts it)
      stages(m.variant).observe_raw(out, ctx, chain.state, false);
    } else if (m.storage == Storage::Pipeline) {
      out = stages(m.variant).decode(m.info, std::move(s), true, ctx, chain.state, nullptr, &kept);
    }
    chain.last_frame = static_cast<long long>(f);
    return out;
  }
};

SequenceDecoder::SequenceDecoder(const ContainerReader& r, DecodeOptions o) : impl_(std::make_unique<Impl>(r, o)) {}
SequenceDecoder::~SequenceDecoder() = default;
size_t SequenceDecoder::frames_read() const noexcept { return impl_->frames_read; }
uint64_t SequenceDecoder::kept() const noexcept { return impl_->kept; }
bool SequenceDecoder::stateful() const noexcept { return impl_->stateful; }

Tensor SequenceDecoder::decode(size_t f, size_t i) {
  Impl& im = *impl_;
  const ContainerReader& r = im.reader;
  r.frame(f);
  if (i >= r.record_count(f)) fail(ErrorCode::Internal, "tensor index out of range");
  im.frames_read = 1;
  if (!im.stateful) {
    Impl::Chain scratch;
    return im.decode_record(f, i, scratch);
  }
  const std::string name = r.record(f, i).info.name;
  size_t k = f;
  while (k > 0 && !r.frame(k).keyframe) --k;
  Impl::Chain& chain = im.chains[name];
  size_t start = k;
  if (chain.last_frame >= static_cast<long long>(k) && chain.last_frame < static_cast<long long>(f))
    start = static_cast<size_t>(chain.last_frame) + 1;
  else
    chain = Impl::Chain{};
  im.frames_read = f - start + 1;
  for (size_t g = start; g < f; ++g) im.decode_record(g, im.find(g, name), chain);
  return im.decode_record(f, i, chain);
}

void SequenceDecoder::decode_frame(size_t f, const std::function<void(Tensor&&)>& sink) {
  size_t n = impl_->reader.record_count(f);
  size_t most = 0;
  for (size_t i = 0; i < n; ++i) {
    sink(decode(f, i));
    most = std::max(most, impl_->frames_read);
  }
  impl_->frames_read = most;
}

}  // namespace gradcodec
