// SPDX-License-Identifier: BSD-3-Clause
// Shared pieces of the gradcodec subcommands: error reporting, exit codes, input selection.
#pragma once

#include <gradcodec/gradcodec.hpp>
#include <gradcodec/formats/snapshot_io.hpp>

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gradcodec::cli {

// A subcommand: its CLI11 app is set up by `setup`, which returns the function to run.
using Runner = std::function<int()>;

// Prints "gradcodec: warning: MSG" to stderr (unless quiet was set globally), on one line.
void warn(const std::string& msg);
// MSG on one line: control characters (a newline in a tensor name, say) as \n, \t, \r or \xNN.
std::string one_line(const std::string& msg);
// Option checks: a text that is not empty or blank (--preset "", an unset shell variable, must
// not silently mean the default), and a whole number 0..2^64-1 written in decimal digits
// (CLI11 lets "-1" wrap and clamps what overflows).
CLI::Validator non_empty_text();
CLI::Validator whole_number();
// An input read from standard input ('-') with more than one MPI rank is refused on every rank
// (Usage): mpirun hands standard input to rank 0 alone, and the others would read nothing.
void refuse_stdin_across_ranks();
void set_quiet(bool quiet);
bool quiet();

// How non-floating arrays are treated (docs/formats.md "Reading", Dtypes).
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

// Refuses (Usage), before any work, an output path that is one of the inputs (the same file
// under any name: a hard or symbolic link) — even --force must not replace what is being read —
// and, unless `dir_ok`, an output that is an existing directory. "-" is never refused.
void check_output_path(const std::string& output, const std::vector<std::string>& inputs, bool dir_ok = false);
// The frame source that loads the selected arrays one by one.
FrameSource frame_source(OpenInput& in);
// Registers --include/--exclude/--pass-through/--strict on a subcommand.
void add_input_options(CLI::App& app, InputOptions& opt);
// --nonfinite refuse|raw: what a lossy pipeline does with a tensor holding NaN/Inf.
void add_nonfinite_option(CLI::App& app, NonFinite& policy);
// How the library's refusals of NaN/Inf end on the command line: the option above.
inline constexpr const char* kCliNonfiniteAdvice = "--nonfinite=raw stores such tensors raw";
// How a container records where each input came from (the header's inputs[].path and each
// frame's source), so that a container shared with someone else does not reveal the writer's
// directories. Relative (default): a relative path that stays under the working directory is
// kept as given, lexically normalized ("./a/../b.npz" -> "b.npz"); an absolute one under the
// working directory is made relative to it; any other path (outside it, or climbing out with
// "..") is reduced to its base name. Name: always the base name. Absolute: the absolute path,
// lexically normalized. "-" (standard input) is kept as "-" in every mode.
enum class RecordPaths { Relative, Name, Absolute };
std::string recorded_path(const std::string& path, RecordPaths mode);
// Registers --record-paths relative|name|absolute on a subcommand.
void add_record_paths_option(CLI::App& app, RecordPaths& mode);
// Refuses (Usage), unless `force_name`, a container output whose extension promises a snapshot
// format (.npz, .npy, .h5, .hdf5, .safetensors): numpy or h5py would later fail on it, and a
// decode meant to produce such a file may have been intended. Any other name is accepted.
void check_container_name(const std::string& output, bool force_name);
// --threads N (at most the cores the machine reports: more cannot speed up the work and would
// only hold more tensors in memory at once), or 0 for every core.
unsigned thread_count(unsigned requested);
// --memory-limit SIZE: "8G", "512M", "64k" or a byte count (powers of 1024); Usage error otherwise.
uint64_t parse_memory_limit(const std::string& s);
// glibc raises its mmap threshold to the size of each large block freed (up to 32 MiB), after
// which tensor-sized buffers come from the heaps of the worker threads' arenas, where freed space
// stays resident and fragments: `encode --preset lossless` with 2 threads on a 2 GB snapshot
// peaked well above what it needed (the bound is 3 × largest tensor + 64 MB,
// docs/performance.md). A fixed threshold keeps every buffer of 4 MiB or more in its own
// mapping, returned when freed. Below it, up to 4 MiB of freed heap per arena is kept rather
// than trimmed: a record's buffers (a code stream, norms) freed after each tensor were faulted
// in again for the next one (docs/performance.md, "Figures behind design choices").
// For the subcommands that stream tensors through worker threads.
void bound_heap_growth();
// The opposite choice, for `bench`'s timed runs and for `decode`: blocks up to 32 MiB (glibc's
// largest threshold) come from the heap and freed heap memory stays mapped, so each tensor
// reuses the memory the one before it freed instead of faulting in fresh pages. `bench` reuses
// it as lzbench and `zstd -b` reuse their buffers (the figures are the codec's, not the
// kernel's, whose page faults took a large share of its decode time otherwise).
// `decode --threads 2`, where decoded tensors are freed on another thread than the one that made
// them, faults in fewer pages and is faster with this (docs/performance.md, "Figures behind
// design choices").
void reuse_freed_heap();

// "12.3 MB"-style sizes with MB = 10^6 bytes.
std::string human_bytes(uint64_t n);
// printf-style formatting into a std::string.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace gradcodec::cli
