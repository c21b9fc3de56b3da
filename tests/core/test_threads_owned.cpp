// SPDX-License-Identifier: BSD-3-Clause
// The helper threads of SequenceEncoder and SequenceDecoder belong to them (or to the Workers
// they are given): none is left once they are destroyed, an encode in a child made by fork()
// writes the parent's bytes, and several encoders at once write the bytes of a serial encode.
#include <catch2/catch.hpp>

#include "thread_census.hpp"

#include "support.hpp"

#include "base/workers.hpp"

#include <gradcodec/container.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>
#include <sys/wait.h>
#include <unistd.h>

using namespace gradcodec;
using namespace gradcodec::test;

namespace {

using Clock = std::chrono::steady_clock;

// A small snapshot whose biases attach to their weights (bird+ plans the frame on its helpers)
// and with enough tensors for two threads to share.
std::vector<Tensor> snapshot() {
  std::vector<Tensor> s;
  for (uint64_t k = 0; k < 8; ++k) {
    const std::string layer = "features." + std::to_string(k) + ".";
    s.push_back(make_tensor(layer + "weight", {32, 16, 3, 3}, gaussian(32 * 16 * 9, 10 + k, 0.01f)));
    s.push_back(make_tensor(layer + "bias", {32}, gaussian(32, 100 + k, 0.01f)));
  }
  s.push_back(make_tensor("classifier.weight", {10, 512}, gaussian(5120, 7, 0.01f)));
  s.push_back(make_tensor("classifier.bias", {10}, gaussian(10, 8, 0.01f)));
  return s;
}

std::string temp_path() {
  static std::atomic<unsigned> n{0};
  return (std::filesystem::temp_directory_path() /
          ("gradcodec_test_threads_" + std::to_string(::getpid()) + "_" + std::to_string(n++) + ".gcz"))
      .string();
}

// The container an encode of `frame` with `preset` writes (seed 3), on `threads` threads, on
// `workers` (null: the encoder's own).
std::vector<uint8_t> encode(const std::string& preset, const std::vector<Tensor>& frame, unsigned threads,
                            std::shared_ptr<Workers> workers = nullptr) {
  const std::string path = temp_path();
  {
    EncodeOptions eo;
    eo.seed = 3;
    eo.threads = threads;
    eo.workers = std::move(workers);
    SequenceEncoder enc(Pipeline::preset(preset), eo);
    ContainerWriter w(path, true, enc.header(R"([{"path":"mem","format":"npz"}])"));
    enc.encode_frame(frame_source(frame), w);
    w.finish();
  }
  std::ifstream f(path, std::ios::binary);
  std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(f), {}};
  std::filesystem::remove(path);
  return bytes;
}


}  // namespace

TEST_CASE("SequenceEncoder and SequenceDecoder: no helper thread is left once they are destroyed", "[threads]") {
  const std::vector<Tensor> frame = snapshot();
  const size_t before = thread_count();
  for (bool shared : {false, true}) {
    INFO((shared ? "one Workers shared by the encoder and the decoder" : "each its own"));
    std::shared_ptr<Workers> workers = shared ? make_workers() : nullptr;
    const std::string path = temp_path();
    {
      EncodeOptions eo;
      eo.threads = 3;
      eo.workers = workers;
      SequenceEncoder enc(Pipeline::preset("bird+"), eo);
      ContainerWriter w(path, true, enc.header("[]"));
      enc.encode_frame(frame_source(frame), w);
      w.finish();
      CHECK(thread_count() == before + 2);  // the encoder's (or the shared) helpers
    }
    CHECK(threads_back_to(before + (shared ? 2 : 0)));
    {
      ContainerReader r = ContainerReader::open(path);
      DecodeOptions opt;
      opt.threads = 3;
      opt.workers = workers;
      SequenceDecoder dec(r, opt);
      size_t decoded = 0;
      dec.decode_frame(0, [&](Tensor&&) { ++decoded; });
      CHECK(decoded == frame.size());
      CHECK(thread_count() == before + 2);  // the shared helpers served the decoder too
    }
    CHECK(threads_back_to(before + (shared ? 2 : 0)));
    workers.reset();
    CHECK(threads_back_to(before));
    std::filesystem::remove(path);
  }
}

TEST_CASE("SequenceEncoder: in a child made by fork(), encodes on threads write the parent's bytes", "[threads][fork]") {
  const std::vector<Tensor> frame = snapshot();
  const std::shared_ptr<Workers> workers = make_workers();
  const std::vector<uint8_t> parent = encode("bird+", frame, 2, workers);
  REQUIRE(workers->helpers() == 1);  // made in the parent, idle or still polling at the fork
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // no Catch2 here: the exit status says what went wrong
    int status = 0;
    if (encode("bird+", frame, 2, workers) != parent) status |= 1;  // the parent's Workers
    if (workers->helpers() != 1) status |= 2;                        // with a helper of the child's
    if (encode("bird+", frame, 2) != parent) status |= 4;            // a new encoder's own
    if (encode("lossless", frame, 2) != encode("lossless", frame, 1)) status |= 8;
    if (thread_count() != 2) status |= 16;  // this thread and the shared helper: the others joined
    ::_exit(status);
  }
  // The child takes a few milliseconds; one waiting for helpers that exist only in the parent
  // would never finish, and is killed after 10 s.
  int status = -1;
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (::waitpid(child, &status, WNOHANG) == 0) {
    if (Clock::now() > until) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      FAIL("the child did not finish in 10 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(encode("bird+", frame, 2, workers) == parent);  // the parent's helpers still serve
  CHECK(workers->helpers() == 1);
}

TEST_CASE("SequenceEncoder: four encoders at once on two threads each write a serial encode's bytes", "[threads]") {
  const std::vector<Tensor> frame = snapshot();
  const std::vector<std::string> presets = {"bird+", "lossless", "topk-1pct", "signsgd", "qsgd4"};
  std::vector<std::vector<uint8_t>> serial;
  for (const auto& p : presets) serial.push_back(encode(p, frame, 1));
  // Callers 0 and 1 have encoders with helpers of their own; 2 and 3 share one Workers.
  const std::shared_ptr<Workers> shared = make_workers();
  constexpr int kCallers = 4, kRounds = 3;
  std::vector<std::vector<std::vector<uint8_t>>> got(kCallers);  // [caller][round × preset]
  std::vector<std::string> errors(kCallers);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c)
    callers.emplace_back([&, c] {
      try {
        for (int round = 0; round < kRounds; ++round)
          for (const auto& p : presets) got[c].push_back(encode(p, frame, 2, c >= 2 ? shared : nullptr));
      } catch (const std::exception& e) {
        errors[c] = e.what();
      }
    });
  for (auto& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) {
    INFO("caller " << c);
    CHECK(errors[c].empty());
    REQUIRE(got[c].size() == kRounds * presets.size());
    for (size_t k = 0; k < got[c].size(); ++k) {
      INFO(presets[k % presets.size()] << ", round " << k / presets.size());
      CHECK(got[c][k] == serial[k % presets.size()]);
    }
  }
  CHECK(shared->helpers() >= 1);
}
