// SPDX-License-Identifier: BSD-3-Clause
#include "plot.hpp"

#include "common.hpp"

#include <gradcodec/gradcodec.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#ifndef GRADCODEC_PYTHON
#define GRADCODEC_PYTHON "python3"
#endif
#ifndef GRADCODEC_PYTHON_DIR
#define GRADCODEC_PYTHON_DIR ""
#endif

extern char** environ;

namespace gradcodec::cli {

namespace {

std::string lower_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

// The last non-empty line of a file (the drawing program's error line).
std::string last_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  const std::string prefix = "gradcodec: error: ";
  return last.rfind(prefix, 0) == 0 ? last.substr(prefix.size()) : last;
}

}  // namespace

void check_chart_path(const std::string& path, bool force) {
  const std::string ext = lower_extension(path);
  if (ext != ".svg" && ext != ".png" && ext != ".pdf")
    fail(ErrorCode::Usage, "--plot " + path + ": the chart is written as .svg, .png or .pdf (by its extension)");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(ErrorCode::Usage, path + ": is a directory");
  // Its folder is checked now, as the reports' are, not after the run.
  const std::filesystem::path parent = std::filesystem::absolute(path, ec).parent_path();
  if (!std::filesystem::is_directory(parent, ec))
    fail(ErrorCode::Input, path + ": cannot create output: No such directory " + parent.string());
  if (!force && std::filesystem::exists(path, ec))
    fail(ErrorCode::Usage, path + ": already exists (use --force to replace it)");
}

void draw_chart(const std::string& report_json, const std::string& path) {
  // The report goes to the drawing program in a temporary file, removed whatever happens.
  const std::string dir = std::filesystem::temp_directory_path().string();
  std::string report = dir + "/gradcodec-plot-XXXXXX";
  const int fd = ::mkstemp(report.data());
  if (fd < 0) fail(ErrorCode::Input, "--plot: cannot create a temporary file in " + dir + ": " + std::strerror(errno));
  const ScratchFile report_file(report);
  const ScratchFile errors_file(report + ".err");
  FILE* f = ::fdopen(fd, "w");
  if (!f || std::fwrite(report_json.data(), 1, report_json.size(), f) != report_json.size() || std::fclose(f) != 0)
    fail(ErrorCode::Input, "--plot: cannot write " + report);

  // The package of the build tree this CLI belongs to, when there is one, before any installed.
  std::vector<std::string> env;
  const std::string tree = GRADCODEC_PYTHON_DIR;
  const char* old_path = std::getenv("PYTHONPATH");
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "PYTHONPATH=", 11) != 0) env.emplace_back(*e);
  if (!tree.empty() && std::filesystem::exists(tree + "/gradcodec/plot.py"))
    env.push_back("PYTHONPATH=" + tree + (old_path && *old_path ? ":" + std::string(old_path) : ""));
  else if (old_path)
    env.push_back("PYTHONPATH=" + std::string(old_path));
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  std::string python = GRADCODEC_PYTHON, m = "-m", module = "gradcodec.plot", o = "-o";
  std::string out = path;
  std::vector<char*> argv = {python.data(), m.data(), module.data(), report.data(), o.data(), out.data(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, errors_file.path().c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, python.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0)
    fail(ErrorCode::Input, "--plot: cannot run " + python + " (" + std::strerror(rc) + "); the chart needs Python 3 "
                           "with matplotlib (Debian: python3-matplotlib)");
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string why = last_line(errors_file.path());
    if (why.find("No module named 'gradcodec'") != std::string::npos)
      why = "the gradcodec Python module is not installed (cmake --install, or PYTHONPATH=build/python)";
    fail(ErrorCode::Input, "--plot " + path + ": the chart was not drawn: " + (why.empty() ? "python3 failed" : why));
  }
}

}  // namespace gradcodec::cli
