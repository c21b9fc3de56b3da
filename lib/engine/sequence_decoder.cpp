// SPDX-License-Identifier: BSD-3-Clause
// SequenceDecoder (see codec.hpp): container records back into tensors, following each tensor's
// chain of frames for stateful pipelines.
#include <gradcodec/codec.hpp>
#include <gradcodec/container_error.hpp>

#include "base/ordered_pool.hpp"

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

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
  std::mutex lazy_mu;  // guards the lazily built variants and names (decode_frame's workers)
  size_t frames_read = 0;
  uint64_t kept = 0;  // of the last record decoded
  bool stateful = false;

  DecodeOptions opt;  // opt.workers: DecodeOptions::workers, or the decoder's own
  Impl(const ContainerReader& r, DecodeOptions o) : reader(r), opt(std::move(o)) {
    if (!opt.workers) opt.workers = make_workers();
    variants.resize(r.variants().size());
    stateful = stages(0).stateful();
    names.resize(r.frame_count());
  }
  PipelineStages& stages(uint32_t v) {
    std::lock_guard<std::mutex> lk(lazy_mu);
    if (!variants[v]) variants[v] = std::make_unique<PipelineStages>(Pipeline::from_json(reader.variants()[v]));
    return *variants[v];
  }
  size_t find(size_t f, const std::string& name) {
    std::lock_guard<std::mutex> lk(lazy_mu);
    auto& m = names[f];
    if (m.empty())
      for (size_t i = 0; i < reader.record_count(f); ++i) m[reader.record(f, i).info.name] = i;
    auto it = m.find(name);
    if (it == m.end())
      fail(ErrorCode::Corrupt, reader.path() + ": tensor '" + name + "' missing from frame " + std::to_string(f) +
                                   " needed to decode later frames");
    return it->second;
  }
  // Record i of frame f with the tensor's chain at frame f − 1 (or any chain at a keyframe);
  // `kept` gets the values it sent.
  Tensor decode_record(size_t f, size_t i, Chain& chain, uint64_t& kept) {
    RecordMeta m = reader.record(f, i);
    const uint64_t need = m.info.elements() * std::max<uint64_t>(4, dtype_size(m.info.dtype));
    if (m.storage == Storage::Pipeline && need > opt.memory_limit)
      fail(ErrorCode::Input, reader.path() + ": tensor '" + m.info.name + "' of frame " + std::to_string(f) +
                                 " needs " + std::to_string(need) + " bytes to decode, over the memory limit of " +
                                 std::to_string(opt.memory_limit) + " bytes (--memory-limit)");
    try {
      return decode_streams(f, i, m, chain, kept);
    } catch (...) {
      rethrow_located(reader, f, i, m);  // a stage's error names the file, frame, tensor and offset
    }
  }
  Tensor decode_streams(size_t f, size_t i, const RecordMeta& m, Chain& chain, uint64_t& kept) {
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
  // Tensor i of frame f, its chain brought up from the last keyframe (or from where it stands,
  // when it stands between them) to f. Touches only `chain` and the lazily built tables, so
  // several tensors can be decoded at once, each with its own chain.
  Tensor decode_chain(size_t f, size_t i, Chain& chain, size_t& read, uint64_t& sent) {
    const ContainerReader& r = reader;
    if (!stateful) {
      read = 1;
      return decode_record(f, i, chain, sent);
    }
    const std::string name = r.record(f, i).info.name;
    size_t k = f;
    while (k > 0 && !r.frame(k).keyframe) --k;
    size_t start = k;
    if (chain.last_frame >= static_cast<long long>(k) && chain.last_frame < static_cast<long long>(f))
      start = static_cast<size_t>(chain.last_frame) + 1;
    else
      chain = Chain{};
    read = f - start + 1;
    uint64_t ignored = 0;
    for (size_t g = start; g < f; ++g) decode_record(g, find(g, name), chain, ignored);
    return decode_record(f, i, chain, sent);
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
  Impl::Chain scratch;
  Impl::Chain& chain = im.stateful ? im.chains[r.record(f, i).info.name] : scratch;
  return im.decode_chain(f, i, chain, im.frames_read, im.kept);
}

void SequenceDecoder::decode_frame(size_t f, const std::function<void(Tensor&&)>& sink) {
  impl_->reader.frame(f);
  std::vector<size_t> all(impl_->reader.record_count(f));
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  decode_frame(f, all, sink);
}

void SequenceDecoder::decode_frame(size_t f, std::span<const size_t> which,
                                   const std::function<void(Tensor&&)>& sink) {
  Impl& im = *impl_;
  const ContainerReader& r = im.reader;
  r.frame(f);
  for (size_t k = 0; k < which.size(); ++k)
    if (which[k] >= r.record_count(f) || (k > 0 && which[k] <= which[k - 1]))
      fail(ErrorCode::Internal, "tensor indices out of range or out of order");
  // Item k of the pool is record which[k].
  const size_t n = which.size();
  // Per record: the memory its decoded tensor holds until the sink has it (0 when its metadata
  // is damaged: the worker reports that, in its turn), and its chain. A stateful pipeline's
  // tensors each follow their own chain, created here before any worker starts; a damaged
  // container that names a tensor twice in the frame is decoded on one thread, in order, as the
  // two records share a chain.
  std::vector<uint64_t> bytes(n, 0);
  std::vector<Impl::Chain*> chains(n, nullptr);
  std::vector<Impl::Chain> scratch(im.stateful ? 0 : n);
  unsigned threads = im.opt.threads;
  std::unordered_set<std::string> named;
  for (size_t i = 0; i < n; ++i) {
    if (!im.stateful) chains[i] = &scratch[i];
    try {
      const RecordMeta m = r.record(f, which[i]);
      bytes[i] = m.info.elements() * std::max<uint64_t>(4, dtype_size(m.info.dtype));
      if (im.stateful) {
        chains[i] = &im.chains[m.info.name];
        if (!named.insert(m.info.name).second) threads = 1;
      }
    } catch (const Error&) {
      bytes[i] = 0;  // the worker meets the same error in its turn
    }
  }
  std::vector<Tensor> done(n);
  std::vector<size_t> read(n, 0);
  std::vector<uint64_t> sent(n, 0);
  size_t most = 0;
  run_ordered(
      *im.opt.workers, bytes, threads,
      [&](size_t i) {
        if (!chains[i]) {  // the metadata was damaged: reading it again reports that
          r.record(f, which[i]);
          fail(ErrorCode::Internal, r.path() + ": record " + std::to_string(which[i]) + " of frame " +
                                        std::to_string(f) + " read differently twice");
        }
        done[i] = im.decode_chain(f, which[i], *chains[i], read[i], sent[i]);
        return bytes[i];  // the decoded tensor, held until the sink takes it
      },
      [&](size_t i) {
        im.kept = sent[i];
        most = std::max(most, read[i]);
        sink(std::move(done[i]));
        done[i] = Tensor{};
      });
  im.frames_read = most;
}

}  // namespace gradcodec
