// SPDX-License-Identifier: BSD-3-Clause
// gradcodec under an MPI launcher (docs/scale-out.md). One binary, two modes: started alone it
// runs as one process and MPI is never initialised; started by mpirun or srun (the launcher's
// variables say so) it is one rank of a job. Built without MPI (-DGRADCODEC_MPI=OFF), a run under
// a launcher with more than one process is refused rather than repeated by every process.
//
// Every step a rank may fail in runs inside together(): the ranks then agree on the error of the
// lowest rank that failed and every rank throws it; rank 0 prints it and exits with its code (so
// mpirun returns it), the others exit 0 and print nothing (their standard output and error go to
// /dev/null; see finish()). A job thus fails with one line as a single process does, and no
// rank waits for one that has gone.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace gradcodec::cli::ranks {

// Starts MPI when under a launcher (main calls it first, and finish() last).
void start(int& argc, char**& argv);
// Ends MPI (collective); returns the process's exit status. Rank 0 returns its `status` or, if it
// succeeded, the first failed rank's (saying which rank failed); the other ranks return 0.
int finish(int status);
// Whether this process is one rank of an MPI job (perhaps of one rank).
bool active();
int rank();
int size();
// The ranks on this machine (MPI_COMM_TYPE_SHARED); 1 when not under MPI.
int local_size();
// Runs `step` on every rank; then, if it threw on any, every rank throws the error (code and
// message) of the lowest rank where it did.
void together(const std::function<void()>& step);
// Every rank's `bytes`, in rank order, on every rank.
std::vector<std::vector<uint8_t>> all_gather(const std::vector<uint8_t>& bytes);
// Rank 0's `text` on every rank.
std::string broadcast(const std::string& text);

// A file every rank writes parts of (MPI-IO): opened by all, written at offsets by each, synced
// and closed by all. Errors are Error(Input) naming the path.
class SharedFile {
 public:
  explicit SharedFile(const std::string& path);  // collective; the file exists
  ~SharedFile();
  void write_at(uint64_t offset, std::span<const uint8_t> bytes);
  void close();  // collective: synced to storage, then closed

 private:
  std::string path_;
  void* handle_ = nullptr;
};

}  // namespace gradcodec::cli::ranks
