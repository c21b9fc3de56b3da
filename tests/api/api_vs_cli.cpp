// SPDX-License-Identifier: BSD-3-Clause
// The public API against the CLI (tests/cli/cli_api.py): encodes the tensors that test writes
// to NAME.npz, held here in memory, describing the input as `gradcodec encode NAME.npz` does,
// so that the two containers must be the same bytes; then decodes the container with the
// Decoder and writes the tensors' bytes back to back for the test to compare with the CLI's
// decode.
//   api_vs_cli OUT.gcz PRESET SEED THREADS NAME.npz DECODED.bin
// Uses only <gradcodec/gradcodec.hpp>.
#include <gradcodec/gradcodec.hpp>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 7) return 64;
  const std::string out = argv[1], preset = argv[2], name = argv[5], decoded = argv[6];
  // The same values as cli_api.py's numpy: ((i * 7919) % 1000 - 500) / 1000 in float32, and a
  // second tensor from another multiplier; a float64 one; an int64 one kept as it is.
  std::vector<float> a(300 * 40), b(1000);
  std::vector<double> c(77);
  std::vector<long long> steps = {1, 2, 3};
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(int(i * 7919 % 1000) - 500) / 1000.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = float(int(i * 104729 % 2001) - 1000) / 4096.0f;
  for (size_t i = 0; i < c.size(); ++i) c[i] = double(int(i * 31 % 97) - 48) / 64.0;
  const gradcodec::TensorView frame[] = {
      {"layer1.weight", {300, 40}, a.data()},
      {"layer1.bias", {1000}, b.data()},
      {"head.weight", {7, 11}, c.data()},
      gradcodec::TensorView::other("step", "<i8", {3}, steps.data(), 24),
  };
  gradcodec::EncoderOptions o;
  o.preset = preset;
  o.seed = std::stoull(argv[3]);
  o.threads = static_cast<unsigned>(std::stoul(argv[4]));
  o.overwrite = true;
  o.inputs_json = "[{\"path\":\"" + name + "\",\"format\":\"npz\"}]";
  try {
    auto enc = gradcodec::Encoder::to_path(out, o);
    enc.add_frame(frame, name);
    enc.finish();
    auto dec = gradcodec::Decoder::open(out);
    FILE* f = std::fopen(decoded.c_str(), "wb");
    if (!f) return 65;
    dec.decode_frame(0, [f](gradcodec::Tensor&& t) { std::fwrite(t.data.data(), 1, t.data.size(), f); });
    std::fclose(f);
  } catch (const gradcodec::Error& e) {
    std::fprintf(stderr, "api_vs_cli: %s\n", e.what());
    return static_cast<int>(e.code());
  }
  return 0;
}
