// SPDX-License-Identifier: BSD-3-Clause
// How long reading a snapshot file takes, for comparing the formats' readers on the same tensors
// (bench/torch_read.py, docs/performance.md). Each round reads every FILE in turn — open it with
// formats::open_snapshot, read every array, and sum |x| over each float32 one (bench/read_pass.hpp:
// the data is touched, as an encoder would) — and times each file's read alone. Prints one line
// per file: its median seconds over the rounds, then every round's seconds.
//   bench_read_snapshot ROUNDS FILE...
#include "read_pass.hpp"

#include <gradcodec/error.hpp>
#include <gradcodec/formats/snapshot_io.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace {

double read_once(const std::string& path, float& sink) {
  const auto t0 = std::chrono::steady_clock::now();
  auto reader = gradcodec::formats::open_snapshot(path);
  for (size_t i = 0; i < reader->arrays().size(); ++i) {
    const gradcodec::Tensor t = reader->read(i);
    if (t.info.dtype == gradcodec::DType::F32)
      sink += gradcodec::bench::abs_sum(reinterpret_cast<const float*>(t.data.data()), t.data.size() / 4);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_read_snapshot ROUNDS FILE...\n");
    return 1;
  }
  const int rounds = std::max(1, std::stoi(argv[1]));
  const std::vector<std::string> files(argv + 2, argv + argc);
  std::vector<std::vector<double>> seconds(files.size());
  float sink = 0;
  try {
    for (const auto& f : files) read_once(f, sink);  // warm-up: the page cache holds every file
    for (int r = 0; r < rounds; ++r)
      for (size_t k = 0; k < files.size(); ++k) seconds[k].push_back(read_once(files[k], sink));
  } catch (const gradcodec::Error& e) {
    std::fprintf(stderr, "bench_read_snapshot: %s\n", e.what());
    return static_cast<int>(e.code());
  }
  for (size_t k = 0; k < files.size(); ++k) {
    std::vector<double> s = seconds[k];
    std::sort(s.begin(), s.end());
    const size_t n = s.size();
    const double median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    std::printf("%s %.6f", files[k].c_str(), median);
    for (double v : seconds[k]) std::printf(" %.6f", v);
    std::printf("\n");
  }
  std::fprintf(stderr, "(checksum %g)\n", double(sink));
  return 0;
}
