// SPDX-License-Identifier: BSD-3-Clause
#include <gradcodec/plugin/byte_out.hpp>

#include <gradcodec/detail/pages.hpp>
#include <gradcodec/error.hpp>

#include <string>

#include <algorithm>

namespace gradcodec {

namespace {
constexpr size_t kAhead = size_t{1} << 20;  // pages mapped at a time ahead of a bound's writes
}

void write_into_room(ByteOut& to, std::span<const uint8_t> bytes, const char* who) {
  while (!bytes.empty()) {
    const std::span<uint8_t> r = to.room(bytes.size());
    if (r.empty()) fail(ErrorCode::Internal, std::string(who) + ": more input than announced");
    std::copy_n(bytes.begin(), r.size(), r.begin());
    to.commit(r.size());
    bytes = bytes.subspan(r.size());
  }
}

void AppendOut::begin(uint64_t size, bool exact) {
  const size_t want = out_.size() + static_cast<size_t>(size);
  if (exact) {
    reserve_fresh(out_, want);  // written whole: huge pages and the edges mapped now
    return;
  }
  if (out_.capacity() >= want) return;
  // Address space only: a bound is rarely written whole (and not a step more: a tiny stream
  // then holds a few bytes, not a 128 KiB step).
  out_.reserve(want);
  advise_huge_pages(out_.data(), out_.capacity());
  lazy_ = true;
}

void AppendOut::map_ahead(size_t end) {
  if (!lazy_ || end > out_.capacity()) return;
  const size_t pos = out_.size(), mapped = (pos + kAhead - 1) / kAhead * kAhead;
  if (end > mapped && mapped < out_.capacity())
    populate_write(out_.data() + mapped, std::min(kAhead, out_.capacity() - mapped));
}

void AppendOut::write(std::span<const uint8_t> bytes) {
  map_ahead(out_.size() + bytes.size());
  out_.insert(out_.end(), bytes.begin(), bytes.end());
}

std::span<uint8_t> AppendOut::room(size_t want) {
  base_ = out_.size();
  const size_t left = out_.capacity() - base_;
  const size_t step = std::min(want, left > 0 ? std::min(left, kStep) : kStep);
  map_ahead(base_ + step);
  out_.resize(base_ + step);
  return {out_.data() + base_, step};
}

void AppendOut::commit(size_t k) { out_.resize(base_ + k); }

}  // namespace gradcodec
