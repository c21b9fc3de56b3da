// Shared pieces of the gradcodec subcommands: error reporting, exit codes, input selection.
#pragma once

#include <gradcodec/codec.hpp>
#include <gradcodec/error.hpp>
#include <gradcodec/formats/snapshot_io.hpp>

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gradcodec::cli {

// A subcommand: its CLI11 app is set up by `setup`, which returns the function to run.
using Runner = std::function<int()>;

// Prints "gradcodec: warning: MSG" to stderr (unless quiet was set globally).
void warn(const std::string& msg);
void set_quiet(bool quiet);
bool quiet();

// How non-floating arrays are treated (DESIGN.md "Data model").
enum class NonFloat { Skip, PassThrough, Strict };

struct InputOptions {
  NonFloat non_float = NonFloat::Skip;
  std::string include;  // ECMAScript regex on tensor names; empty = all
  std::string exclude;
};

// One input file opened and filtered: the arrays that will be encoded, in file order.
struct OpenInput {
  std::string path;
  std::unique_ptr<formats::SnapshotReader> reader;
  std::vector<size_t> selected;  // indices into reader->arrays()
  uint64_t float_elements = 0;
  uint64_t float_bytes = 0;
};

// Opens INPUT, applies --include/--exclude and the non-float policy (warning for skipped arrays,
// Error Input for --strict or for a file with no floating array left).
OpenInput open_input(const std::string& path, const InputOptions& opt);
// The frame source that loads the selected arrays one by one.
FrameSource frame_source(OpenInput& in);
// Registers --include/--exclude/--pass-through/--strict on a subcommand.
void add_input_options(CLI::App& app, InputOptions& opt);
// --nonfinite refuse|raw: what a lossy pipeline does with a tensor holding NaN/Inf.
void add_nonfinite_option(CLI::App& app, NonFinite& policy);
// The pipeline chosen by --preset/--pipeline (default: the lossless preset).
Pipeline choose_pipeline(const std::string& preset, const std::string& text);

// "12.3 MB"-style sizes with MB = 10^6 bytes.
std::string human_bytes(uint64_t n);
// printf-style formatting into a std::string.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace gradcodec::cli
