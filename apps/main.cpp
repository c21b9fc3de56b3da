// gradcodec — command-line entry point: dispatches to one subcommand per file and maps
// gradcodec::Error codes to exit statuses (0 ok, 1 usage, 2 input, 3 corrupt container,
// 4 internal, 5 round-trip mismatch). Every error is one line on stderr.
#include "commands.hpp"
#include "common.hpp"

#include <cstdio>
#include <exception>
#include <new>

using namespace gradcodec;

int main(int argc, char** argv) {
  CLI::App app{"gradcodec — compress neural-network gradients into self-describing .gcz containers",
               "gradcodec"};
  app.require_subcommand(1);
  app.fallthrough();
  app.set_version_flag("--version", tool_version());
  bool quiet = false;
  app.add_flag("-q,--quiet", quiet, "no warnings, summaries or progress bars");
  cli::Runner run;
  cli::setup_encode(app, run);
  cli::setup_decode(app, run);
  cli::setup_inspect(app, run);
  cli::setup_bench(app, run);
  cli::setup_merge(app, run);
  cli::setup_list(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "gradcodec: error: %s (see gradcodec --help)\n", e.what());
    return 1;
  }
  cli::set_quiet(quiet);
  try {
    return run();
  } catch (const Error& e) {
    std::fprintf(stderr, "gradcodec: error: %s\n", e.what());
    return static_cast<int>(e.code());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "gradcodec: error: out of memory\n");
    return static_cast<int>(ErrorCode::Internal);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gradcodec: error: internal: %s\n", e.what());
    return static_cast<int>(ErrorCode::Internal);
  }
}
