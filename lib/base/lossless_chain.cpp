// SPDX-License-Identifier: BSD-3-Clause
// Lossless stages chained: each stage's output is the next one's input, handed over as it is
// written (Lossless::encode_chain, decode_chain; the interface is in plugin/stage.hpp).
#include <gradcodec/plugin/stage.hpp>

#include <optional>
#include <utility>

namespace gradcodec {

namespace {

// The input of one stage, made once the bytes before it say how many they are. When they give
// only a bound, they are held whole and handed over at their end.
class Link final : public ByteOut {
 public:
  using Make = std::function<std::unique_ptr<ByteOut>(ByteOut& out, uint64_t size)>;
  Link(Make make, ByteOut& out) : make_(std::move(make)), out_(out) {}
  void begin(uint64_t size, bool exact) override {
    if (exact) {
      stage_ = make_(out_, size);
      return;
    }
    held_.emplace(held_bytes_);
    held_->begin(size, false);
  }
  void write(std::span<const uint8_t> bytes) override { target().write(bytes); }
  std::span<uint8_t> room(size_t want) override { return target().room(want); }
  void commit(size_t k) override { target().commit(k); }
  void end() override {
    if (!stage_) {
      stage_ = make_(out_, held_bytes_.size());
      if (!held_bytes_.empty()) stage_->write(held_bytes_);
      held_.reset();
      std::vector<uint8_t>().swap(held_bytes_);  // (a write() is done with its bytes when it returns)
    }
    stage_->end();
  }

 private:
  ByteOut& target() { return stage_ ? *stage_ : static_cast<ByteOut&>(*held_); }
  Make make_;
  ByteOut& out_;
  std::unique_ptr<ByteOut> stage_;
  std::vector<uint8_t> held_bytes_;
  std::optional<AppendOut> held_;
};

// Links for `stages` in the order `order` gives (the first one made writes into `last`); returns
// the head, into which the input goes.
template <class MakeFor>
ByteOut& build(std::vector<std::unique_ptr<Link>>& links, size_t count, ByteOut& last, MakeFor make_for) {
  ByteOut* next = &last;
  for (size_t k = 0; k < count; ++k) {
    links.push_back(std::make_unique<Link>(make_for(k), *next));
    next = links.back().get();
  }
  return *next;
}

}  // namespace

void Lossless::encode_chain(std::span<const Lossless* const> stages, std::span<const uint8_t> in, uint8_t width,
                            std::vector<uint8_t>& out) {
  AppendOut last(out);
  std::vector<std::unique_ptr<Link>> links;
  // Made from the last stage back: stage k writes into stage k+1's link.
  ByteOut& head = build(links, stages.size(), last, [&](size_t k) {
    const Lossless* stage = stages[stages.size() - 1 - k];
    return [stage, width](ByteOut& o, uint64_t size) { return stage->encoder(o, size, width); };
  });
  head.begin(in.size(), true);
  if (!in.empty()) head.write(in);
  head.end();
}

void Lossless::decode_chain(std::span<const Lossless* const> stages, uint64_t size,
                            const std::function<void(ByteOut&)>& feed, uint64_t max_out, std::vector<uint8_t>& out) {
  AppendOut last(out);
  std::vector<std::unique_ptr<Link>> links;
  // The first stage's decoder writes into `out`; the last stage's reads the stored bytes.
  ByteOut& head = build(links, stages.size(), last, [&](size_t k) {
    const Lossless* stage = stages[k];
    return [stage, max_out](ByteOut& o, uint64_t n) { return stage->decoder(o, n, max_out); };
  });
  head.begin(size, true);
  feed(head);
  head.end();
}

std::vector<uint8_t> Lossless::encode(std::span<const uint8_t> in, uint8_t width) const {
  std::vector<uint8_t> out;
  const Lossless* self = this;
  encode_chain({&self, 1}, in, width, out);
  return out;
}

std::vector<uint8_t> Lossless::decode(std::span<const uint8_t> in, uint64_t max_out) const {
  std::vector<uint8_t> out;
  const Lossless* self = this;
  decode_chain({&self, 1}, in.size(), [in](ByteOut& o) { if (!in.empty()) o.write(in); }, max_out, out);
  return out;
}

}  // namespace gradcodec
