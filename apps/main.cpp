// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — command-line entry point: dispatches to one subcommand per file and maps
// gradcodec::Error codes to exit statuses (0 ok, 1 usage, 2 input, 3 corrupt container,
// 4 internal, 5 round-trip mismatch). Every error is one line on stderr.
#include "commands.hpp"
#include "common.hpp"
#include "progress.hpp"
#include "ranks.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <new>
#include <string>
#include <vector>

#include <gradcodec/gradcodec.hpp>

#include <signal.h>
#include <unistd.h>

using namespace gradcodec;

namespace {

// SIGINT, SIGTERM, SIGHUP: the outputs' temporaries are removed (an interrupted run leaves no
// partial file), then the signal takes its default course, so the exit status says which it was.
extern "C" void on_interrupt(int sig) {
  remove_temporary_outputs();
  cli::clear_progress_line_in_signal();
  constexpr char kMsg[] = "gradcodec: interrupted; no output was written\n";
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// CLI11's help names an option's value by its C++ type and appends each check's description
// ("--seed UINT:UINT", "--preset TEXT:TEXT", "--nonfinite TEXT:{refuse,raw}"). This formatter
// shows one word instead: the choices when a check lists them, FILE for the files an option
// writes, N for whole numbers, NUM for other numbers, TEXT otherwise; none for positionals and
// flags, whose name says it all. (The option itself is unchanged, so CLI11's parse errors still
// see the type: main() reads it to say what a value must be.)
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override {
    std::string text = CLI::Formatter::make_option_opts(opt);
    const std::string type = opt->get_type_name();
    const std::string shown = " " + get_label(type);
    if (type.empty() || text.rfind(shown, 0) != 0) return text;
    return (opt->nonpositional() && !label(opt, type).empty() ? " " + label(opt, type) : "") + text.substr(shown.size());
  }

 private:
  static std::string label(const CLI::Option* opt, const std::string& type) {
    const size_t brace = type.find('{');
    if (brace != std::string::npos) return type.substr(brace, type.find('}', brace) + 1 - brace);
    const std::string base = type.substr(0, type.find(':'));
    for (const char* file : {"output", "json", "csv"})
      if (opt->check_lname(file)) return "FILE";
    if (base == "UINT" || base == "INT") return "N";
    if (base == "FLOAT") return "NUM";
    if (base == "BOOLEAN") return "";
    return "TEXT";
  }
};
// SIGBUS: an input file truncated by another process while its mapping is read. The library
// makes the read complete with zeros and records the file (recover_input_fault), and the run
// fails at its next check with the error naming the file. Any other SIGBUS takes its default
// course once the temporaries are removed.
extern "C" void on_bus_error(int sig, siginfo_t* info, void*) {
  if (recover_input_fault(info->si_addr)) return;
  remove_temporary_outputs();
  cli::clear_progress_line_in_signal();
  std::signal(sig, SIG_DFL);  // the faulting access, executed again, ends the process
}

}  // namespace

namespace {

int run_main(int argc, char** argv) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, on_interrupt);
  struct sigaction bus {};
  bus.sa_sigaction = on_bus_error;
  bus.sa_flags = SA_SIGINFO;
  sigemptyset(&bus.sa_mask);
  sigaction(SIGBUS, &bus, nullptr);
  CLI::App app{"gradcodec — compress neural-network gradients into self-describing .gcz containers",
               "gradcodec"};
  app.formatter(std::make_shared<HelpFormatter>());  // before the subcommands, which copy it
  app.require_subcommand(1);
  app.fallthrough();
  app.set_version_flag("--version", gradcodec::version());
  bool quiet = false;
  app.add_flag("-q,--quiet", quiet, "no warnings, summaries or progress bars");
  cli::Runner run;
  cli::setup_encode(app, run);
  cli::setup_decode(app, run);
  cli::setup_inspect(app, run);
  cli::setup_bench(app, run);
  cli::setup_merge(app, run);
  cli::setup_list(app, run);
  // An empty value ("--threads ''") would otherwise parse as the option's default and run
  // silently: every option's value must say something (--tensor may name a tensor "").
  for (CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    for (CLI::Option* opt : sub->get_options())
      if (!opt->get_type_name().empty() && opt->nonpositional() && !opt->check_lname("tensor"))  // not flags
        opt->check(cli::non_empty_text());
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 says "A subcommand is required" for `gradcodec foo`: name what was not understood.
    const std::string first = argc > 1 ? argv[1] : "";
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) known |= sub->get_name() == first;
    if (!first.empty() && first[0] != '-' && !known) {
      std::fprintf(stderr, "gradcodec: error: unknown command '%s' (commands: encode, decode, inspect, bench, merge, "
                           "list; see gradcodec --help)\n", cli::one_line(argv[1]).c_str());
      return 1;
    }
    // The help that answers it: the subcommand's own, when the error is in one.
    const std::vector<CLI::App*> parsed = app.get_subcommands();
    const std::string help = parsed.empty() ? "gradcodec --help" : "gradcodec " + parsed[0]->get_name() + " --help";
    // CLI11 says "Could not convert: --threads = -3": say what the option takes instead.
    if (dynamic_cast<const CLI::ConversionError*>(&e)) {
      const std::string msg = e.what(), head = "Could not convert: ";
      const size_t eq = msg.find(" = ");
      if (msg.rfind(head, 0) == 0 && eq != std::string::npos) {
        const std::string opt = msg.substr(head.size(), eq - head.size()), value = msg.substr(eq + 3);
        const CLI::App* where = parsed.empty() ? &app : parsed[0];
        const CLI::Option* o = where->get_option_no_throw(opt);
        const std::string type = o ? o->get_type_name() : "";
        const char* kind = type.rfind("UINT", 0) == 0    ? "a whole number >= 0"
                           : type.rfind("INT", 0) == 0   ? "a whole number"
                           : type.rfind("FLOAT", 0) == 0 ? "a number"
                                                         : "a valid value";
        std::fprintf(stderr, "gradcodec: error: %s: '%s' is not %s (see %s)\n", cli::one_line(opt).c_str(),
                     cli::one_line(value).c_str(), kind, help.c_str());
        return 1;
      }
    }
    // An option nobody knows is the error to report, whatever CLI11 checked first ("A subcommand
    // is required" for `gradcodec --bogus`, "--output is required" for `encode --bogus x`).
    std::vector<std::string> extra = app.remaining();
    if (!parsed.empty())
      for (const std::string& r : parsed[0]->remaining()) extra.push_back(r);
    for (const std::string& r : extra) {
      if (r.size() > 1 && r[0] == '-' && r.find_first_not_of("-0123456789.eE") != std::string::npos) {
        const std::string name = r.substr(0, r.find('='));  // --bogus=3 names --bogus
        std::fprintf(stderr, "gradcodec: error: unknown option '%s' (see %s)\n", cli::one_line(name).c_str(),
                     help.c_str());
        return 1;
      }
    }
    std::fprintf(stderr, "gradcodec: error: %s (see %s)\n", cli::one_line(e.what()).c_str(), help.c_str());
    return 1;
  }
  cli::set_quiet(quiet);
  // Under MPI, encode, decode and bench share their work across the ranks (docs/scale-out.md); any other
  // command runs on rank 0 alone, as it would started by itself.
  const std::string command = app.get_subcommands()[0]->get_name();
  if (cli::ranks::active() && cli::ranks::rank() != 0 && command != "encode" && command != "decode" &&
      command != "bench")
    return 0;
  try {
    const int status = run();
    // A report or a listing that did not reach standard output (a full disk, a closed pipe) is
    // a failed run, as a failed write of a container to "-" is.
    if (std::fflush(stdout) != 0 || std::ferror(stdout))
      fail(ErrorCode::Input, "<stdout>: write failed: " + std::string(std::strerror(errno)));
    check_inputs_unchanged();
    return status;
  } catch (const Error& e) {
    // An input that changed while it was read is the cause of whatever failed after it (a
    // checksum over the zeros read in its place, say): that is the error reported.
    const std::optional<Error> changed = input_change();
    const Error& shown = changed ? *changed : e;
    std::fprintf(stderr, "gradcodec: error: %s\n", cli::one_line(shown.what()).c_str());
    return static_cast<int>(shown.code());
  } catch (const std::bad_alloc&) {
    if (const auto changed = input_change()) {
      std::fprintf(stderr, "gradcodec: error: %s\n", cli::one_line(changed->what()).c_str());
      return static_cast<int>(changed->code());
    }
    std::fprintf(stderr, "gradcodec: error: out of memory\n");
    return static_cast<int>(ErrorCode::Internal);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gradcodec: error: internal: %s\n", cli::one_line(e.what()).c_str());
    return static_cast<int>(ErrorCode::Internal);
  }
}

}  // namespace

int main(int argc, char** argv) {
  cli::ranks::start(argc, argv);
  return cli::ranks::finish(run_main(argc, argv));
}
