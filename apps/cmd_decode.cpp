// SPDX-License-Identifier: BSD-3-Clause
// gradcodec decode IN.gcz -o OUT(.npz|.h5|.safetensors|.pt|.npy|DIR/) [--frame N] [--tensor NAME] [--threads N]
// A container with several frames and no --frame decodes each frame to OUT with ".frameNNN"
// before the extension (DIR/ gets DIR/frameNNN/).
#include "commands.hpp"
#include "decode_ranks.hpp"
#include "ranks.hpp"


#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <charconv>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

namespace gradcodec::cli {

namespace {

struct DecodeArgs {
  std::string input, output;
  std::optional<long long> frame;  // negative: counted from the end (-1 is the last frame)
  std::optional<std::string> tensor;  // given (a tensor may be named "")
  bool force = false, verbose = false;
  std::string memory_limit;
  unsigned threads = 0;
};

// An output that is neither a regular file nor a directory: a device or a FIFO.
bool is_special(const std::string& out, bool& char_device) {
  struct stat st {};
  char_device = false;
  if (out == "-" || ::stat(out.c_str(), &st) != 0 || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) return false;
  char_device = S_ISCHR(st.st_mode);
  return true;
}

// Each frame's input's HDF5 attributes (the header's inputs[f].hdf5_attributes, as JSON text),
// "" where there are none; with `tensor`, only the groups' and that tensor's.
std::vector<std::string> input_attributes(const Decoder& r, const std::optional<std::string>& tensor) {
  std::vector<std::string> out(r.frame_count());
  const auto j = nlohmann::ordered_json::parse(r.inputs_json(), nullptr, false);
  if (!j.is_array() || j.size() != out.size()) return out;
  for (size_t f = 0; f < out.size(); ++f) {
    if (!j[f].is_object() || !j[f].contains("hdf5_attributes") || !j[f]["hdf5_attributes"].is_array()) continue;
    nlohmann::ordered_json kept = nlohmann::ordered_json::array();
    for (const auto& e : j[f]["hdf5_attributes"])
      if (!tensor || !e.is_object() || !e.contains("tensor") || e["tensor"] == *tensor) kept.push_back(e);
    if (!kept.empty()) out[f] = kept.dump();
  }
  return out;
}

std::string frame_path(const std::string& out, size_t f, size_t frames) {
  bool chr = false;
  if (frames == 1 || out == "-" || is_special(out, chr)) return out;
  char tag[32];
  std::snprintf(tag, sizeof tag, "frame%03zu", f);
  if (!out.empty() && (out.back() == '/' || is_directory(out))) {
    std::string d = out.back() == '/' ? out : out + "/";
    return d + tag + "/";
  }
  std::filesystem::path p(out);
  return (p.parent_path() / (p.stem().string() + "." + tag + p.extension().string())).string();
}

int run_decode(const DecodeArgs& a) {
  // (Under mpirun a rank's stdout is a terminal even when the job's output is redirected: rank 0
  // writes `-o -` wherever mpirun sends it.)
  if (a.output == "-" && !ranks::active() && ::isatty(STDOUT_FILENO))
    fail(ErrorCode::Usage, "refusing to write binary output to a terminal (redirect it or use -o FILE)");
  if (a.input == "-") refuse_stdin_across_ranks();
  reuse_freed_heap();
  DecoderOptions dopt;
  if (!a.memory_limit.empty()) dopt.memory_limit = parse_memory_limit(a.memory_limit);
  dopt.threads = a.threads;
  Decoder dec = Decoder::open(a.input, dopt);
  formats::format_for_output(a.output);  // a usage error before any work
  std::vector<size_t> frames;
  if (a.frame) {
    // Python's rule: -1 is the last frame, -N the first of N.
    const long long n = static_cast<long long>(dec.frame_count());
    const long long f = *a.frame < 0 ? *a.frame + n : *a.frame;
    if (f < 0 || f >= n)
      fail(ErrorCode::Usage, "--frame " + std::to_string(*a.frame) + ": the container holds " + std::to_string(n) +
                                 " frame(s): 0.." + std::to_string(n - 1) + ", or -" + std::to_string(n) +
                                 "..-1 counting from the end");
    frames.push_back(static_cast<size_t>(f));
  } else {
    for (size_t f = 0; f < dec.frame_count(); ++f) frames.push_back(f);
  }
  // Several frames into one stream: a character device (/dev/null, to check that every frame
  // decodes) takes each frame in turn; stdout, a FIFO or another device would get several
  // archives back to back, which no reader takes apart, so one frame must be chosen.
  bool char_device = false;
  const bool special = is_special(a.output, char_device);
  if (frames.size() > 1 && (a.output == "-" || (special && !char_device)))
    fail(ErrorCode::Usage, "the container holds " + std::to_string(frames.size()) +
                               " frames: choose one with --frame N (-1: the last) to write to " +
                               (a.output == "-" ? std::string("stdout") : a.output));
  // Under MPI, several frames are shared out: each rank decodes a contiguous run of them (a
  // stateful pipeline's decoder then replays from the last keyframe once per run) and every rank
  // publishes its files only once all have decoded theirs (docs/scale-out.md). One frame into a
  // directory (a file per tensor) is shared by its tensors (decode_ranks.hpp); one frame into
  // one file is decoded by rank 0 alone.
  const bool shared = ranks::active() && ranks::size() > 1 && frames.size() > 1;
  const bool spread = ranks::active() && ranks::size() > 1 && frames.size() == 1 && !a.tensor &&
                      a.output != "-" && !special && formats::format_for_output(a.output) == formats::Format::NpyDir;
  if (ranks::active() && !shared && !spread && ranks::rank() != 0) return 0;
  const std::vector<size_t> all_frames = frames;
  if (shared) {
    const size_t n = frames.size(), r = static_cast<size_t>(ranks::rank()), k = static_cast<size_t>(ranks::size());
    frames = std::vector<size_t>(all_frames.begin() + static_cast<std::ptrdiff_t>(n * r / k),
                                 all_frames.begin() + static_cast<std::ptrdiff_t>(n * (r + 1) / k));
  }
  // The bar counts the decoded tensors' bytes (with --tensor, one tensor per frame).
  uint64_t total = 0;
  std::vector<std::vector<TensorInfo>> infos(dec.frame_count());
  for (size_t f : frames) infos[f] = dec.tensors(f);
  const std::vector<size_t> mine =
      spread ? dir_share(infos[frames[0]], ranks::rank(), ranks::size()) : std::vector<size_t>{};
  for (size_t f : frames)
    for (size_t i = 0; i < infos[f].size(); ++i) {
      const TensorInfo& t = infos[f][i];
      const bool counted =
          spread ? std::binary_search(mine.begin(), mine.end(), i) : !a.tensor || t.name == *a.tensor;
      if (counted) total += t.elements() * dtype_size(t.dtype);
    }
  ProgressBar bar("decode", total, ProgressBar::Unit::Bytes);
  auto advance = [&bar](const Tensor& t) { bar.advance(t.elements() * dtype_size(t.dtype()), t.name()); };
  const auto metadata = dec.input_metadata();
  const auto attributes = input_attributes(dec, a.tensor);
  for (size_t f : frames)  // a directory is a valid output here (one .npy per tensor)
    check_output_path(a.frame ? a.output : frame_path(a.output, f, all_frames.size()), {a.input}, true);
  // Every frame's file is completed under a temporary name, and renamed into place only once
  // all of them are: a failure in frame k leaves no file of frames 0..k-1.
  std::vector<std::unique_ptr<formats::SnapshotWriter>> done;
  // On a failure the completed frames are dropped last first, so each removes the directories
  // it created once the later ones have gone (DIR/frame001/ before DIR/frame000/ and DIR/).
  struct DropInReverse {
    std::vector<std::unique_ptr<formats::SnapshotWriter>>& w;
    ~DropInReverse() {
      while (!w.empty()) w.pop_back();
    }
  } drop{done};
  // Frame f's writer for `out`, with the input's metadata (and a word on HDF5 attributes it drops).
  auto open_writer = [&](const std::string& out, size_t f) {
    auto writer = formats::create_snapshot(out, a.force);
    if (!metadata[f].empty()) writer->set_metadata(metadata[f]);
    if (!attributes[f].empty() && !writer->set_attributes_json(attributes[f])) {
      const auto objects = nlohmann::ordered_json::parse(attributes[f]);
      size_t count = 0;
      for (const auto& e : objects)
        if (e.is_object() && e.contains("attrs") && e["attrs"].is_array()) count += e["attrs"].size();
      warn(out + ": " + std::to_string(count) + " HDF5 attribute(s) of " + std::to_string(objects.size()) +
           " group(s)/dataset(s) not written: " + formats::format_title(formats::format_for_output(out)) +
           " has no place for them (decode to .h5 to keep them)");
    }
    return writer;
  };
  auto say = [&](size_t f, const std::string& out, size_t frames_read, const std::string& shared_by = "") {
    if (!a.verbose) return;
    auto hold = hold_progress_line();
    std::fprintf(stderr, "gradcodec: frame %zu -> %s (read %zu frame(s)%s)%s\n", f, out.c_str(), frames_read,
                 dec.stateful() ? ", stateful pipeline: from the last keyframe" : "", shared_by.c_str());
  };
  if (spread) {
    const size_t f = frames[0];
    const DirDecoded got =
        decode_to_dir_across_ranks(dec, f, mine, [&] { return open_writer(a.output, f); }, advance);
    bar.finish();
    for (const auto& w : got.warnings) warn(a.output + ": " + w);
    say(f, a.output, got.frames_read,
        format(", the tensors on %d rank(s), the largest share %.1f%% of the bytes", ranks::size(), 100.0 * got.largest));
    return 0;
  }
  auto decode_frames = [&] {
    for (size_t f : frames) {
      std::string out = a.frame ? a.output : frame_path(a.output, f, all_frames.size());
      auto writer = open_writer(out, f);
      size_t frames_read = 0;
      if (a.tensor) {
        size_t found = SIZE_MAX;
        std::string names;
        for (size_t i = 0; i < infos[f].size(); ++i) {
          const std::string& n = infos[f][i].name;
          if (n == *a.tensor) found = i;
          if (names.size() < 200) names += (names.empty() ? "" : ", ") + n;
        }
        if (found == SIZE_MAX)
          fail(ErrorCode::Usage, "no tensor '" + *a.tensor + "' in frame " + std::to_string(f) + " (tensors: " + names +
                                     (names.size() >= 200 ? ", ..." : "") + ")");
        if (out != "-") writer->expect({infos[f][found]});
        Tensor t = dec.decode(f, found);
        writer->add(t);
        advance(t);
        frames_read = dec.frames_read();
      } else {
        // Announced first, so that a writer can write each tensor as it is decoded (a file is
        // written under a temporary name and removed on failure; stdout gets nothing until every
        // tensor has decoded, so it is not announced there).
        if (out != "-") writer->expect(infos[f]);
        dec.decode_frame(f, [&](Tensor&& t) {
          check_inputs_unchanged();  // the container shrank: its zeros are not written on
          writer->add(t);
          advance(t);
        });
        frames_read = dec.frames_read();
      }
      writer->complete();
      for (const auto& w : writer->take_warnings()) warn(out + ": " + w);
      say(f, out, frames_read);
      done.push_back(std::move(writer));
    }
  };
  auto publish = [&] {
    for (auto& w : done) w->publish();
  };
  if (shared) {
    // The frames' directories lie in DIR/ (frame_path): a missing DIR/ is created by rank 0 alone
    // before the others open theirs, and removed by it, when left empty, only once every rank
    // has dropped its own. (Created by whichever rank came first, it was removed by that rank
    // only if the others' frame directories had already gone: sometimes it was left behind.)
    std::vector<std::unique_ptr<CreatedDirectory>> top;
    const std::string first = frame_path(a.output, all_frames.front(), all_frames.size());
    const bool in_dir = !first.empty() && first.back() == '/';
    try {
      ranks::together([&] {
        if (ranks::rank() == 0 && in_dir && !is_directory(a.output)) top = create_missing_directories(a.output);
      });
      ranks::together(decode_frames);
      ranks::together(publish);
    } catch (...) {
      while (!done.empty()) done.pop_back();
      ranks::together([] {});  // every rank's frame directories are gone
      std::error_code ec;
      for (const auto& d : top) std::filesystem::remove(d->path(), ec);  // only when empty
      throw;
    }
    for (auto& d : top) d->release();
  } else {
    decode_frames();
    bar.finish();
    publish();
  }
  return 0;
}

}  // namespace

void setup_decode(CLI::App& app, Runner& run) {
  auto a = std::make_shared<DecodeArgs>();
  CLI::App* sub = app.add_subcommand("decode", "decode a .gcz container back to tensors");
  sub->add_option("IN", a->input, "the .gcz container, or - for stdin")->required();
  sub->add_option("-o,--output", a->output, "output: .npz, .h5/.hdf5, .safetensors, .pt/.pth (torch.save), .npy, DIR/ (or - : npz to stdout)")
      ->required();
  sub->add_option("--frame", a->frame, "decode only frame N (0-based; negative counts from the end: -1 is the last)")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {  // (CLI11 would clamp a number out of range)
            if (s.empty()) return "is empty";
            long long v = 0;
            const char* end = s.data() + s.size();
            const auto [p, ec] = std::from_chars(s.data(), end, v);
            return ec != std::errc() || p != end ? "'" + s + "' is not a whole number from -2^63 to 2^63-1" : "";
          },
          "INT"));
  sub->add_option("--tensor", a->tensor, "decode only the tensor with this name");
  sub->add_flag("-f,--force", a->force, "replace outputs that exist");
  sub->add_flag("-v,--verbose", a->verbose, "say which frames were read");
  sub->add_option("--threads", a->threads, "worker threads, at most one per core (default: all cores); the output does not depend on it");
  sub->add_option("--memory-limit", a->memory_limit,
                  "refuse a tensor whose decoding needs more memory than this (default 8G; e.g. 512M, 32G)");
  sub->callback([a, &run] { run = [a] { return run_decode(*a); }; });
}

}  // namespace gradcodec::cli
