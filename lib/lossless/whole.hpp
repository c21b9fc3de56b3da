// SPDX-License-Identifier: BSD-3-Clause
// A lossless stage's ByteOut that takes its input whole — in place when it comes in one write(),
// else gathered — and codes it with done() once it is all in (stages whose coders work on
// buffers: lzma, zsplit).
#pragma once

#include <gradcodec/plugin/stage.hpp>

#include <string>
#include <vector>

namespace gradcodec::stages {

class WholeInput : public ByteOut {
 public:
  WholeInput(ByteOut& out, uint64_t size, const char* who) : out_(out), size_(size), who_(who) {}
  void begin(uint64_t, bool) override {}
  void write(std::span<const uint8_t> bytes) override {
    got_ += bytes.size();
    if (got_ > size_) fail(ErrorCode::Internal, std::string(who_) + ": more input than announced");
    if (bytes.size() == size_) return done(bytes);
    if (held_.empty()) held_.reserve(static_cast<size_t>(size_));
    held_.insert(held_.end(), bytes.begin(), bytes.end());
    if (got_ == size_) done(held_);
  }
  void end() override {
    if (got_ != size_) fail(ErrorCode::Internal, std::string(who_) + ": input ended early");
    if (size_ == 0) done({});
    out_.end();
  }

 protected:
  virtual void done(std::span<const uint8_t> in) = 0;  // writes into out_, and not out_.end()
  ByteOut& out_;

 private:
  uint64_t size_, got_ = 0;
  const char* who_;
  std::vector<uint8_t> held_;
};

}  // namespace gradcodec::stages
