// SPDX-License-Identifier: BSD-3-Clause
// An input file truncated while it is read (<gradcodec/input_changes.hpp>): a fault on its
// mapping is recovered from by recover_input_fault() — the read completes, with zeros past the
// new end — and recorded, so that the next check throws the error naming the file with the code
// it was opened with; a read_at() past the new end fails the same way. Other addresses are left
// to the signal's default action.
#include <catch2/catch.hpp>

#include <gradcodec/file_io.hpp>
#include <gradcodec/input_changes.hpp>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace gradcodec;

namespace {

extern "C" void test_bus_handler(int, siginfo_t* info, void*) {
  if (!recover_input_fault(info->si_addr)) _exit(90);  // not an input's fault: the test fails
}

struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/gradcodec-input-changes-XXXXXX";
    REQUIRE(::mkdtemp(t) != nullptr);
    path = t;
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

const size_t kPage = static_cast<size_t>(::sysconf(_SC_PAGESIZE));

void write_file(const std::string& p, size_t n, char c) {
  std::ofstream(p, std::ios::binary) << std::string(n, c);
}

// The child's checks, as an exit status: 0 when all hold, else which one failed.
int truncated_while_mapped(const std::string& dir) {
  struct sigaction sa {};
  sa.sa_sigaction = test_bus_handler;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGBUS, &sa, nullptr) != 0) return 1;
  const std::string file = dir + "/in.gcz";
  const size_t size = 64 * kPage;
  write_file(file, size, '\xab');
  auto in = InputFile::open(file, false, ErrorCode::Corrupt);
  Buffer whole = in->slice(0, size);
  if (input_change()) return 2;
  if (::truncate(file.c_str(), static_cast<off_t>(8 * kPage)) != 0) return 3;
  // Read on another thread: the handler works wherever the fault happens.
  size_t kept = 0, zeros = 0;
  std::thread reader([&] {
    const volatile uint8_t* p = whole.data();
    for (size_t i = 0; i < size; ++i) {
      const uint8_t v = p[i];
      kept += v == 0xab;
      zeros += v == 0;
    }
  });
  reader.join();
  if (kept != 8 * kPage || zeros != size - 8 * kPage) return 4;
  const auto e = input_change();
  if (!e || e->code() != ErrorCode::Corrupt) return 5;
  if (std::string(e->what()) != file + ": the file shrank (or could not be read) while it was being read") return 6;
  // Nothing is sealed once an input changed: the output's temporary goes with it.
  {
    AtomicOutput out(dir + "/out.npz", false);
    out.write("x", 1);
    try {
      out.seal();
      return 7;
    } catch (const Error& err) {
      if (err.code() != ErrorCode::Corrupt) return 8;
    }
  }
  if (path_exists(dir + "/out.npz")) return 9;
  // An address in no input's mapping is not recovered from.
  int local = 0;
  if (recover_input_fault(&local)) return 10;
  return 0;
}

}  // namespace

TEST_CASE("a mapped input truncated while it is read: zeros read, the change recorded and reported",
          "[file_io][input_changes]") {
  TempDir dir;
  // In a child process: the record of a change is for the rest of the process (the run fails).
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) _exit(truncated_while_mapped(dir.path));
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("read_at of a file that shrank fails with the code it was opened with", "[file_io][input_changes]") {
  TempDir dir;
  const std::string file = dir.path + "/c.gcz";
  write_file(file, 4 * kPage, 'z');
  auto in = InputFile::open(file, true, ErrorCode::Corrupt);
  REQUIRE(::truncate(file.c_str(), static_cast<off_t>(kPage)) == 0);
  std::vector<uint8_t> buf(2 * kPage);
  try {
    in->read_at(kPage, buf.data(), buf.size());
    FAIL("read_at past the new end succeeded");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Corrupt);
    CHECK(std::string(e.what()) == file + ": the file shrank (or could not be read) while it was being read");
  }
}

TEST_CASE("special files are refused before they are opened", "[file_io][input_changes]") {
  TempDir dir;
  const std::string fifo = dir.path + "/f.npz";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // Opening a FIFO nobody writes to for reading would wait forever.
  try {
    InputFile::open(fifo);
    FAIL("a FIFO was opened");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Input);
    CHECK(std::string(e.what()).find("is a FIFO (named pipe), not a regular file") != std::string::npos);
  }
  CHECK_THROWS_AS(InputFile::open("/dev/null"), Error);
}
