// SPDX-License-Identifier: BSD-3-Clause
#include "quantize/raw.hpp"

#include <gradcodec/detail/pages.hpp>

#include <cstring>

namespace gradcodec::stages {

namespace {

class Raw final : public Quantizer {
 public:
  void encode(Payload& p, Streams& out, const StageContext&) override {
    if (p.exact && p.source) {
      const size_t es = dtype_size(p.source->dtype());
      Stream& s = out.add(kValueStream, static_cast<uint8_t>(es));
      const uint8_t* src = p.source->data.data();
      if (!p.sparse) {  // the tensor's bytes verbatim: lent, not copied
        s.lend({src, p.n * es});
        return;
      }
      s.bytes.resize(p.index.size() * p.block * es);
      uint8_t* dst = s.bytes.data();
      const size_t run = static_cast<size_t>(p.block) * es;
      for (uint64_t pos : p.index) {
        std::memcpy(dst, src + pos * run, run);
        dst += run;
      }
      return;
    }
    Stream& s = out.add(kValueStream, 4);
    s.bytes.resize(p.values.size() * 4);
    if (!s.bytes.empty()) std::memcpy(s.bytes.data(), p.values.data(), s.bytes.size());
  }

  void decode(Payload& p, const Streams& in, const StageContext&) override {
    auto bytes = in.get(kValueStream);
    const uint64_t count = p.value_count();
    if (p.exact) {
      expect_exact(p, bytes.size());
      p.exact_bytes.assign(bytes.begin(), bytes.end());
      return;
    }
    if (bytes.size() != count * 4)
      fail(ErrorCode::Corrupt, "raw: value stream holds " + std::to_string(bytes.size()) +
                                   " bytes, expected " + std::to_string(count * 4));
    p.values.resize(count);
    if (count) std::memcpy(p.values.data(), bytes.data(), bytes.size());
  }

  void decode_owned(Payload& p, Streams& in, const StageContext& ctx) override {
    Stream* s = in.find(kValueStream);
    if (!p.exact || !s) return decode(p, in, ctx);
    expect_exact(p, s->view().size());
    if (s->is_lent) {  // the container's bytes: one copy, into the decoded tensor
      p.exact_bytes.assign(s->lent.begin(), s->lent.end());
      return;
    }
    p.exact_bytes = std::move(s->bytes);  // the source's own bytes: no copy
    s->bytes.clear();
  }

 private:
  // The exact value stream holds the source dtype's bytes of every coded value; sets exact_dtype.
  static void expect_exact(Payload& p, size_t size) {
    const size_t es = dtype_size(p.info->dtype);
    if (size != p.value_count() * es)
      fail(ErrorCode::Corrupt, "raw: value stream holds " + std::to_string(size) + " bytes, expected " +
                                   std::to_string(p.value_count() * es));
    p.exact_dtype = p.info->dtype;
  }
};

}  // namespace

std::unique_ptr<Stage> make_raw(const Params&, uint32_t) { return std::make_unique<Raw>(); }

}  // namespace gradcodec::stages
