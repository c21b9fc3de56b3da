// SPDX-License-Identifier: BSD-3-Clause
// Running a pipeline over one tensor: PipelineStages (see codec.hpp). The sequence encoder and
// decoder that drive it over frames are in sequence_encoder.cpp and sequence_decoder.cpp.
#include <gradcodec/codec.hpp>

#include <gradcodec/detail/pages.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

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
  screens_nonfinite_ = transforms_.empty() && !stateful_ &&
                       (reducer_ >= 0 ? static_cast<Reducer*>(stages_[reducer_].get())->screens_nonfinite()
                                      : static_cast<Quantizer*>(stages_[quantizer_].get())->screens_nonfinite());
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

double PipelineStages::work_per_element(const TensorInfo& t) const noexcept {
  const auto* red = reducer_ >= 0 ? static_cast<const Reducer*>(stages_[reducer_].get()) : nullptr;
  const double kept = red ? std::clamp(red->kept_fraction(t), 0.0, 1.0) : 1.0;
  // The index coder codes one position per kept block.
  const double positions = red ? kept / static_cast<double>(std::max<uint64_t>(1, red->kept_block(t))) : kept;
  double per = 0, streams = 0;
  for (size_t i = 0; i < stages_.size(); ++i) {
    const StageKind k = stages_[i]->kind();
    if (k == StageKind::Lossless) continue;
    const double w = stages_[i]->work_per_element(t, k == StageKind::IndexCoder ? positions : kept);
    if (k == StageKind::Quantizer || k == StageKind::IndexCoder) streams += w;
    // `raw` on the dense tensor lends the tensor's own bytes to the lossless stages (no copy).
    if (static_cast<int>(i) == quantizer_ && bit_exact_ && !lossless_.empty()) continue;
    per += w;
  }
  // The lossless stages run one after another on a stream, each output replacing its input: one
  // output at a time, at most the streams' size (plus what an incompressible stream gains).
  if (!lossless_.empty()) per += streams * 1.01 + 0.01;
  return per;
}

namespace {
// Bytes per element of a non-floating tensor from its numpy description ("<i8": 8, "<U10": 40);
// 1 for a description this does not read (structured, object): a lower bound.
uint64_t described_item_size(const std::string& d) noexcept {
  if (d.size() < 3 || std::string("<>|=").find(d[0]) == std::string::npos) return 1;
  uint64_t v = 0;
  for (size_t i = 2; i < d.size(); ++i) {
    if (d[i] < '0' || d[i] > '9' || v > (uint64_t{1} << 40)) return 1;
    v = v * 10 + static_cast<uint64_t>(d[i] - '0');
  }
  return std::max<uint64_t>(1, d[1] == 'U' ? 4 * v : v);
}
}  // namespace

uint64_t PipelineStages::work_bytes(const TensorInfo& t) const noexcept {
  const uint64_t n = t.elements(), es = is_float(t.dtype) ? dtype_size(t.dtype) : described_item_size(t.descr);
  const double in = static_cast<double>(n) * static_cast<double>(es);
  // Stages compute in f32; wider values (f64 kept exact by `raw`) widen their streams alike.
  const double need = is_float(t.dtype)
                          ? std::max(2 * in, in + static_cast<double>(n) * work_per_element(t) *
                                                      static_cast<double>(std::max<uint64_t>(4, es)) / 4)
                          : 2 * in;
  return need >= 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(std::ceil(need));
}

const PipelineStages& PipelineStages::variant(int k) const {
  if (k < 0 || static_cast<size_t>(k) >= variants_.size())
    fail(ErrorCode::Internal, "pipeline variant " + std::to_string(k) + " does not exist");
  return *variants_[static_cast<size_t>(k)];
}

PipelineStages::~PipelineStages() = default;
PipelineStages::PipelineStages(PipelineStages&&) noexcept = default;

bool PipelineStages::plans_frame() const noexcept {
  return reducer_ >= 0 && static_cast<const Reducer*>(stages_[static_cast<size_t>(reducer_)].get())->plans_frame();
}

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
  // A stage found values it cannot represent (Payload::overflow): no output; the codec refuses
  // the tensor or stores it raw.
  auto overflowed = [&] {
    if (p.overflow.empty()) return false;
    out.overflow = std::move(p.overflow);
    out.streams = {};
    return true;
  };
  if (!transforms_.empty()) {
    Timer tm(out.times, StageKind::Transform, timed);
    p.dense_f32();
    p.exact = false;
    for (size_t k = 0; k < transforms_.size(); ++k) {
      size_t pos = transforms_[k];
      static_cast<Transform*>(stages_[pos].get())->encode(p, ctx_for(pos));
      if (stateful_) st.transform_inputs[k] = p.values;
      if (overflowed()) return out;
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
    if (overflowed()) return out;
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
  if (screens_nonfinite_ && reducer_ < 0 && p.nonfinite) {  // the quantizer read the source first
    out.nonfinite = p.nonfinite;
    out.streams = {};
    return out;
  }
  if (overflowed()) return out;
  out.kept = p.value_count();
  if (coder && p.sparse && !p.index_implicit) {
    Timer tm(out.times, StageKind::IndexCoder, timed);
    coder->encode(p, out.streams, ctx_for(indexer_));
  }
  if (has_stats_)
    for (const auto& st : stages_) st->stream_stats(out.streams, out.stats);
  if (stateful_) {
    out.plain = out.streams;
    for (auto& s : out.plain.all()) s.own();
  }
  // The streams go on owning their bytes: the lossless stages' output, else their own copy.
  Timer tm(out.times, StageKind::Lossless, timed && !lossless_.empty());
  for (auto& s : out.streams.all()) {
    if (!encode_lossless(s, s.view())) s.own();
  }
  return out;
}

std::vector<const Lossless*> PipelineStages::lossless_for(const std::string& stream) const {
  std::vector<const Lossless*> chain;
  for (size_t pos : lossless_) {
    const auto* l = static_cast<const Lossless*>(stages_[pos].get());
    if (l->only_stream.empty() || l->only_stream == stream) chain.push_back(l);
  }
  return chain;
}

bool PipelineStages::encode_lossless(Stream& s, std::span<const uint8_t> in) const {
  const std::vector<const Lossless*> chain = lossless_for(s.name);
  if (chain.empty()) return false;
  std::vector<uint8_t> out;
  Lossless::encode_chain(chain, in, s.width, out);
  s.bytes = std::move(out);
  s.lent = {};
  s.is_lent = false;
  return true;
}

bool PipelineStages::undo_lossless(Stream& s, const std::function<void(ByteOut&)>& feed, uint64_t size,
                                   uint64_t n) const {
  const std::vector<const Lossless*> chain = lossless_for(s.name);
  if (chain.empty()) return false;
  std::vector<uint8_t> out;
  Lossless::decode_chain(chain, size, feed, stream_bound(n), out);
  s.bytes = std::move(out);
  s.lent = {};
  s.is_lent = false;
  return true;
}

void PipelineStages::undo_lossless(Streams& streams, uint64_t n) const {
  if (lossless_.empty()) return;
  for (auto& s : streams.all()) {
    std::vector<uint8_t> stored = std::move(s.bytes);
    const std::span<const uint8_t> in = s.is_lent ? s.lent : std::span<const uint8_t>(stored);
    if (!undo_lossless(s, [in](ByteOut& o) { if (!in.empty()) o.write(in); }, in.size(), n) && !s.is_lent)
      s.bytes = std::move(stored);
  }
}

Streams PipelineStages::read_streams(const ContainerReader& reader, const RecordMeta& m) const {
  Streams out;
  std::vector<bool> chunked(m.streams.size());
  bool any_chunked = false;
  for (size_t k = 0; k < m.streams.size(); ++k) {
    Stream& s = out.add(m.streams[k].name, m.streams[k].width);
    chunked[k] = !lossless_for(s.name).empty();
    any_chunked = any_chunked || chunked[k];
  }
  // A stream that lossless stages undo is read in chunks as they ask for them: its checksum (a
  // 1.1 record's one check for all its streams) is checked by the reader before the last chunk
  // is handed out, and a stage's error on bytes that fail it is reported as the checksum
  // mismatch. These streams go first, so the others are used only once the check has passed.
  for (size_t k = 0; k < m.streams.size(); ++k) {
    if (!chunked[k]) continue;
    Stream& s = out.all()[k];
    // 2 MiB chunks: a decoder that works on whole blocks (zsplit's are under 1 MiB) finds most
    // of them inside one chunk, not cut (1 MiB cut nearly every one; 4 MiB measured no faster).
    ContainerReader::StreamChunks stored = reader.stream_chunks(m, k, size_t{2} << 20);
    try {
      undo_lossless(
          s,
          [&stored](ByteOut& o) {
            for (std::span<const uint8_t> c; !(c = stored.next()).empty();) o.write(c);
          },
          stored.size(), m.info.elements());
    } catch (const Error&) {
      stored.finish();
      throw;
    }
    stored.finish();
  }
  // The others are lent: the decoders read the container's bytes.
  std::vector<std::span<const uint8_t>> whole;
  if (m.whole_check && !any_chunked) whole = reader.record_streams(m);
  for (size_t k = 0; k < m.streams.size(); ++k) {
    if (chunked[k]) continue;
    Stream& s = out.all()[k];
    s.lend(!m.whole_check ? reader.stream_bytes(m, k) : any_chunked ? reader.stream_bytes_unchecked(m, k) : whole[k]);
  }
  return out;
}

Tensor PipelineStages::decode(const TensorInfo& info, Streams streams, bool lossless_applied,
                              const StageContext& base, TensorState& st,
                              std::vector<float>* before_transforms, uint64_t* kept) const {
  const uint64_t n = info.elements();
  if (lossless_applied) undo_lossless(streams, n);
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
  if (lossless_applied) undo_lossless(streams, info.elements());
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

}  // namespace gradcodec
