// SPDX-License-Identifier: BSD-3-Clause
#include "common.hpp"
#include "name_filter.hpp"
#include "progress.hpp"
#include "ranks.hpp"

#include <gradcodec/gradcodec.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <map>
#include <thread>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace gradcodec::cli {

namespace {

// Why an array of numpy dtype `descr` is not compressed: only 16-, 32- and 64-bit floats (and
// bfloat16) are, so an extended-precision float or a complex number is named as such.
std::string not_compressible(const std::string& descr) {
  const bool tagged = descr.size() >= 3 && std::string("<>|=").find(descr[0]) != std::string::npos;
  const char kind = tagged ? descr[1] : 0;
  const std::string bytes = tagged ? descr.substr(2) : "";
  if (kind == 'f') return bytes + "-byte floats are not compressed (only 2-, 4- and 8-byte floats and bfloat16 are)";
  if (kind == 'c') return "complex numbers are not compressed (only real floats are)";
  return "not floating-point data";
}

// `s` as a regular expression matching it literally (for a suggested --exclude).
std::string regex_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

bool g_quiet = false;

}  // namespace

void set_quiet(bool q) { g_quiet = q; }
bool quiet() { return g_quiet; }

void warn(const std::string& msg) {
  if (g_quiet) return;
  auto hold = hold_progress_line();
  std::fprintf(stderr, "gradcodec: warning: %s\n", one_line(msg).c_str());
}

std::string one_line(const std::string& msg) { return gradcodec::one_line(msg); }  // (one_line.hpp)

CLI::Validator non_empty_text() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        return s.find_first_not_of(" \t\n\r") == std::string::npos ? "is empty" : "";
      },
      "TEXT");
}

void refuse_stdin_across_ranks() {
  if (ranks::active() && ranks::size() > 1)
    fail(ErrorCode::Usage, "standard input ('-') reaches rank 0 alone under MPI (" + std::to_string(ranks::size()) +
                               " ranks): give the input as a file");
}

CLI::Validator whole_number() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        uint64_t v = 0;
        const char* end = s.data() + s.size();
        const auto [p, ec] = std::from_chars(s.data(), end, v);
        if (s.empty() || ec != std::errc() || p != end) return "'" + s + "' is not a whole number from 0 to 2^64-1";
        return "";
      },
      "UINT");
}

std::string format(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

// --memory-limit of decode and encode: "8G", "512M", "64k" or a byte count (powers of 1024);
// a usage error otherwise.
uint64_t parse_memory_limit(const std::string& s) {
  size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = s.substr(used);
  const std::string units = "KMGT";
  unsigned shift = 0;
  if (used == 0 || s[0] == '-' || unit.size() > 1 || (unit.size() == 1 && units.find(static_cast<char>(std::toupper(unit[0]))) == std::string::npos))
    fail(ErrorCode::Usage, "--memory-limit: '" + s + "' is not a size (e.g. 512M, 8G)");
  if (unit.size() == 1) shift = 10 * (1 + static_cast<unsigned>(units.find(static_cast<char>(std::toupper(unit[0])))));
  if (shift && v > (~0ull >> shift)) fail(ErrorCode::Usage, "--memory-limit: '" + s + "' is too large");
  return static_cast<uint64_t>(v) << shift;
}

unsigned thread_count(unsigned requested) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return requested ? std::min(requested, cores) : cores;
}

void bound_heap_growth() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
  mallopt(M_TRIM_THRESHOLD, 4 << 20);
#endif
}

void reuse_freed_heap() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
}

std::string human_bytes(uint64_t n) {
  if (n < 10'000) return format("%llu B", static_cast<unsigned long long>(n));
  if (n < 10'000'000) return format("%.1f kB", n / 1e3);
  if (n < 10'000'000'000ULL) return format("%.2f MB", n / 1e6);
  return format("%.2f GB", n / 1e9);
}

OpenInput open_input(const std::string& path, const InputOptions& opt) {
  OpenInput in;
  in.path = path;
  in.reader = formats::open_snapshot(path);
  const NameFilter filter(opt.include, opt.exclude);
  for (const auto& note : in.reader->notes()) warn(path + ": " + note);
  const auto& arrays = in.reader->arrays();
  bool any_float = false;
  for (size_t i = 0; i < arrays.size(); ++i) {
    const TensorInfo& a = arrays[i];
    if (!filter.keeps(a.name)) continue;
    const std::string tensor = "tensor '" + a.name + "' (dtype " + (is_float(a.dtype) ? dtype_name(a.dtype) : a.descr) +
                               ", shape " + shape_string(a.shape) + ")";
    // Data the reader already knows it cannot read (HDF5 variable-length strings, references,
    // external data): refused now, before anything is encoded, or skipped without promising
    // that --pass-through would keep it.
    const std::string unreadable = in.reader->unreadable(i);
    if (!unreadable.empty() && (is_float(a.dtype) || opt.non_float != NonFloat::Skip))
      fail(ErrorCode::Input, path + ": " + tensor + ": " + unreadable + "; leave it out with --exclude '^" +
                                 regex_escape(a.name) + "$'");
    if (!is_float(a.dtype)) {
      const std::string what = tensor + ": " + not_compressible(a.descr);
      if (opt.non_float == NonFloat::Strict) fail(ErrorCode::Input, path + ": " + what + "; --strict refuses it");
      if (opt.non_float == NonFloat::Skip) {
        warn(path + ": skipping " + (unreadable.empty() ? what + "; use --pass-through to keep it"
                                                        : tensor + ": " + unreadable));
        continue;
      }
    } else {
      any_float = true;
      in.float_elements += a.elements();
      in.float_bytes += a.elements() * dtype_size(a.dtype);
    }
    in.selected.push_back(i);
  }
  if (!any_float) {
    const bool filtered = !opt.include.empty() || !opt.exclude.empty();
    fail(ErrorCode::Input, path + ": no floating-point tensor to encode" +
                               std::string(filtered ? " after --include/--exclude" : ""));
  }
  return in;
}

void check_output_path(const std::string& output, const std::vector<std::string>& inputs, bool dir_ok) {
  if (output == "-") return;
  std::error_code ec;
  if (!dir_ok && std::filesystem::is_directory(output, ec))
    fail(ErrorCode::Usage, output + ": is a directory (give a file name for the output)");
  for (const auto& in : inputs) {
    if (in == "-") continue;
    if (std::filesystem::equivalent(output, in, ec))  // false, with ec set, when either is missing
      fail(ErrorCode::Usage, output + ": is also an input (" + in + "); refusing to replace a file being read");
  }
}

FrameSource frame_source(OpenInput& in) {
  FrameSource s;
  s.count = in.selected.size();
  s.source = in.path;
  s.load = [&in](size_t k) {
    check_inputs_unchanged();  // stop at the next tensor once an input has shrunk under us
    return in.reader->read(in.selected[k]);
  };
  s.info = [&in](size_t k) { return in.reader->arrays()[in.selected[k]]; };
  return s;
}

void add_input_options(CLI::App& app, InputOptions& opt) {
  app.add_option("--include", opt.include, "only tensors whose name matches this regex");
  app.add_option("--exclude", opt.exclude, "leave out tensors whose name matches this regex");
  auto* pt = app.add_flag_callback("--pass-through", [&opt] { opt.non_float = NonFloat::PassThrough; },
                                   "store non-floating arrays losslessly instead of skipping them");
  auto* st = app.add_flag_callback("--strict", [&opt] { opt.non_float = NonFloat::Strict; },
                                   "refuse inputs holding non-floating arrays");
  pt->excludes(st);
}

void add_nonfinite_option(CLI::App& app, NonFinite& policy) {
  // A string checked against the names, then mapped: CLI11's transformer to an enum would print
  // the enum's values as raw bytes (a NUL among them) in --help and in its error line.
  app.add_option_function<std::string>(
         "--nonfinite", [&policy](const std::string& s) { policy = s == "raw" ? NonFinite::Raw : NonFinite::Refuse; },
         "refuse (default): a lossy pipeline refuses a tensor holding NaN/Inf, or values a stage would "
         "turn into Inf (beyond fp16's range, an overflowing norm); raw: store such tensors raw "
         "(lossless pipelines always keep them bit-exact)")
      ->check(CLI::IsMember({"refuse", "raw"}));
}

void check_container_name(const std::string& output, bool force_name) {
  if (output == "-" || force_name) return;
  std::string ext = std::filesystem::path(output).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  const char* title = ext == ".npz"                       ? "an NPZ"
                      : ext == ".npy"                     ? "an NPY"
                      : ext == ".h5" || ext == ".hdf5"    ? "an HDF5"
                      : ext == ".safetensors"             ? "a safetensors"
                      : ext == ".pt" || ext == ".pth"     ? "a PyTorch"
                                                          : nullptr;
  if (!title) return;
  const std::string stem = (std::filesystem::path(output).parent_path() / std::filesystem::path(output).stem()).string();
  fail(ErrorCode::Usage, output + ": the name promises " + title + " file, but this writes a gradcodec container; "
                             "name it " + stem + ".gcz, or give --force-name to keep the name");
}

std::string recorded_path(const std::string& path, RecordPaths mode) {
  namespace fs = std::filesystem;
  if (path == "-" || path.empty()) return path;
  const fs::path given(path);
  // The base name of a path: "dir/" names the directory itself.
  auto base = [](const fs::path& p) {
    const fs::path n = p.lexically_normal();
    fs::path name = n.filename();
    if (name.empty()) name = n.parent_path().filename();
    return name.empty() ? n.string() : name.string();
  };
  if (mode == RecordPaths::Name) return base(given);
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  if (mode == RecordPaths::Absolute) {
    if (given.is_absolute() || ec) return given.lexically_normal().string();
    return (cwd / given).lexically_normal().string();
  }
  fs::path rel = given.is_absolute() ? (ec ? fs::path() : given.lexically_normal().lexically_relative(cwd))
                                     : given.lexically_normal();
  std::string r = rel.string();
  while (r.size() > 1 && r.back() == '/') r.pop_back();  // "dir/" -> "dir"
  if (r.empty() || r == ".." || r.rfind("../", 0) == 0 || fs::path(r).is_absolute()) return base(given);
  return r;
}

void add_record_paths_option(CLI::App& app, RecordPaths& mode) {
  app.add_option_function<std::string>(
         "--record-paths",
         [&mode](const std::string& s) {
           mode = s == "absolute" ? RecordPaths::Absolute : s == "name" ? RecordPaths::Name : RecordPaths::Relative;
         },
         "how the container names its inputs: relative (default: relative to the working directory, "
         "or the base name for a file outside it), name (base name only) or absolute")
      ->check(CLI::IsMember({"relative", "name", "absolute"}));
}

}  // namespace gradcodec::cli
