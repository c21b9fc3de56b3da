// SPDX-License-Identifier: BSD-3-Clause
// The C++ facade's in-memory encode of a snapshot's tensors, the baseline the Python module is
// measured against (bench/python_vs_facade.py, docs/performance.md). Loads every array of FILE
// into memory first, then encodes them REPEAT times into memory with Encoder::to_sink, timing
// each encode alone; prints one line per run, "seconds BYTES", and writes the last container to
// OUT (for the script to check that both sides wrote the same records).
//   bench_facade_encode FILE PRESET THREADS REPEAT OUT
#include <gradcodec/formats/snapshot_io.hpp>
#include <gradcodec/gradcodec.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: bench_facade_encode FILE PRESET THREADS REPEAT OUT\n");
    return 1;
  }
  try {
    auto reader = gradcodec::formats::open_snapshot(argv[1]);
    std::vector<gradcodec::Tensor> tensors;
    for (size_t i = 0; i < reader->arrays().size(); ++i) tensors.push_back(reader->read(i));
    std::vector<gradcodec::TensorView> views;
    for (const auto& t : tensors)
      views.emplace_back(t.info.name, t.info.dtype, t.info.shape, t.data.data());
    gradcodec::EncoderOptions o;
    o.preset = argv[2];
    o.threads = static_cast<unsigned>(std::stoul(argv[3]));
    const int repeat = std::stoi(argv[4]);
    std::vector<uint8_t> bytes;
    for (int r = 0; r < repeat; ++r) {
      bytes = {};  // a new buffer each time, as a caller would have (no capacity kept warm)
      const auto t0 = std::chrono::steady_clock::now();
      gradcodec::VectorSink sink(bytes);
      auto enc = gradcodec::Encoder::to_sink(sink, o);
      enc.add_frame(views);
      enc.finish();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("%.6f %zu\n", s, bytes.size());
    }
    FILE* f = std::fopen(argv[5], "wb");
    if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) return 2;
  } catch (const gradcodec::Error& e) {
    std::fprintf(stderr, "bench_facade_encode: %s\n", e.what());
    return static_cast<int>(e.code());
  }
  return 0;
}
