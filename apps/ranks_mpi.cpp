// SPDX-License-Identifier: BSD-3-Clause
// ranks.hpp with MPI (Debian's OpenMPI; docs/scale-out.md).
#include "ranks.hpp"

#include "collectives.hpp"

#include <gradcodec/gradcodec.hpp>

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fcntl.h>
#include <limits>
#include <new>
#include <unistd.h>

namespace gradcodec::cli::ranks {

namespace {

bool g_active = false;
int g_rank = 0, g_size = 1, g_local = 1;

// The variables the launchers set in every process they start: Open MPI's mpirun, PMIx (Slurm's
// srun --mpi=pmix, Open MPI 4+), PMI-1/2 (srun --mpi=pmi2, MPICH's Hydra).
bool under_launcher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

[[noreturn]] void mpi_failed(const char* what, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  fail(ErrorCode::Input, std::string(what) + ": " + std::string(text, static_cast<size_t>(len)));
}

void check(int code, const char* what) {
  if (code != MPI_SUCCESS) mpi_failed(what, code);
}

}  // namespace

void start(int& argc, char**& argv) {
  if (!under_launcher()) return;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);  // MPI only from the main thread
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  MPI_Comm node;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    MPI_Comm_size(node, &g_local);
    MPI_Comm_free(&node);
  }
  g_active = true;
  if (g_rank != 0) {  // rank 0 speaks for the job (ranks.hpp)
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) ::dup2(null, STDOUT_FILENO), ::dup2(null, STDERR_FILENO), ::close(null);
  }
}

int finish(int status) {
  if (!g_active) return status;
  // Rank 0 speaks for the job: it exits with its own status or, when only other ranks failed
  // (outside together(), which rank 0 would have reported), with the first of theirs. The other
  // ranks exit 0: mpirun, seeing a process exit non-zero, stops the others with SIGTERM, which
  // must not reach rank 0 before it is done.
  std::vector<int> all(static_cast<size_t>(g_size), 0);
  MPI_Gather(&status, 1, MPI_INT, all.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (g_rank == 0 && status == 0) {
    for (int r = 1; r < g_size; ++r) {
      if (all[static_cast<size_t>(r)] == 0) continue;
      std::fprintf(stderr, "gradcodec: error: rank %d of %d failed with exit status %d\n", r, g_size,
                   all[static_cast<size_t>(r)]);
      status = all[static_cast<size_t>(r)];
      break;
    }
  }
  MPI_Finalize();
  g_active = false;
  return g_rank == 0 ? status : 0;
}

bool active() { return g_active; }
int rank() { return g_rank; }
int size() { return g_size; }
int local_size() { return g_local; }

void together(const std::function<void()>& step) {
  int code = 0;
  std::string message;
  try {
    step();
  } catch (const Error& e) {
    code = static_cast<int>(e.code());
    message = e.what();
  } catch (const std::bad_alloc&) {
    code = static_cast<int>(ErrorCode::Internal);
    message = "out of memory";
  } catch (const std::exception& e) {
    code = static_cast<int>(ErrorCode::Internal);
    message = std::string("internal: ") + e.what();
  }
  if (!g_active) {
    if (code) throw Error(static_cast<ErrorCode>(code), message);
    return;
  }
  // The lowest failing rank, then its code and message from it to all.
  int mine = code ? g_rank : g_size, first = g_size;
  check(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
  if (first == g_size) return;
  check(MPI_Bcast(&code, 1, MPI_INT, first, MPI_COMM_WORLD), "MPI_Bcast");
  int len = static_cast<int>(std::min<size_t>(message.size(), 4096));
  check(MPI_Bcast(&len, 1, MPI_INT, first, MPI_COMM_WORLD), "MPI_Bcast");
  message.resize(static_cast<size_t>(len));
  check(MPI_Bcast(message.data(), len, MPI_CHAR, first, MPI_COMM_WORLD), "MPI_Bcast");
  throw Error(static_cast<ErrorCode>(code), message);
}

std::vector<std::vector<uint8_t>> all_gather(const std::vector<uint8_t>& bytes) {
  return collectives::all_gather(bytes);
}

std::string broadcast(const std::string& text) {
  if (!g_active) return text;
  std::string out = text;
  int len = static_cast<int>(out.size());
  check(MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
  out.resize(static_cast<size_t>(len));
  check(MPI_Bcast(out.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD), "MPI_Bcast");
  return out;
}

SharedFile::SharedFile(const std::string& path) : path_(path) {
  auto* fh = new MPI_File;
  const int rc = MPI_File_open(MPI_COMM_WORLD, path.c_str(), MPI_MODE_WRONLY, MPI_INFO_NULL, fh);
  if (rc != MPI_SUCCESS) {
    delete fh;
    mpi_failed((path + ": cannot open for MPI-IO").c_str(), rc);
  }
  handle_ = fh;
}

SharedFile::~SharedFile() {
  if (!handle_) return;
  auto* fh = static_cast<MPI_File*>(handle_);
  MPI_File_close(fh);  // (collective: reached by every rank, as the owners unwind alike)
  delete fh;
}

void SharedFile::write_at(uint64_t offset, std::span<const uint8_t> bytes) {
  auto* fh = static_cast<MPI_File*>(handle_);
  constexpr size_t kChunk = size_t{1} << 30;  // MPI counts are ints
  for (size_t done = 0; done < bytes.size();) {
    const size_t n = std::min(kChunk, bytes.size() - done);
    MPI_Status st;
    const int rc = MPI_File_write_at(*fh, static_cast<MPI_Offset>(offset + done), bytes.data() + done,
                                     static_cast<int>(n), MPI_BYTE, &st);
    if (rc != MPI_SUCCESS) mpi_failed((path_ + ": write failed").c_str(), rc);
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    if (count != static_cast<int>(n)) fail(ErrorCode::Input, path_ + ": write failed (short write)");
    done += n;
  }
}

void SharedFile::close() {
  auto* fh = static_cast<MPI_File*>(handle_);
  handle_ = nullptr;
  const int sync = MPI_File_sync(*fh);
  const int rc = MPI_File_close(fh);
  delete fh;
  if (sync != MPI_SUCCESS) mpi_failed((path_ + ": write failed").c_str(), sync);
  if (rc != MPI_SUCCESS) mpi_failed((path_ + ": close failed").c_str(), rc);
}

}  // namespace gradcodec::cli::ranks
