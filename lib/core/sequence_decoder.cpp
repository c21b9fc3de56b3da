// SequenceDecoder (see codec.hpp): container records back into tensors, following each tensor's
// chain of frames for stateful pipelines.
#include <gradcodec/codec.hpp>

#include <algorithm>
#include <unordered_map>

namespace gradcodec {

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
    Tensor out;
    out.info = m.info;
    Streams s;
    if (m.storage == Storage::PassThrough || m.storage == Storage::Raw)
      out.data = reader.raw_view(m);  // the container's bytes, checked, not copied when aligned
    else
      s = stages(m.variant).read_streams(reader, m);  // lossless stages undone from the container's bytes
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
      out = stages(m.variant).decode(m.info, std::move(s), false, ctx, chain.state, nullptr, &kept);
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
