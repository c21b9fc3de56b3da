// SPDX-License-Identifier: BSD-3-Clause
// ranks.hpp in a build without MPI (-DGRADCODEC_MPI=OFF): always one process. Started by a
// launcher with more than one process, every process would repeat the whole run and write the
// same outputs at once; it is refused instead (docs/scale-out.md).
#include "ranks.hpp"

#include <gradcodec/gradcodec.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace gradcodec::cli::ranks {

void start(int&, char**&) {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* n = std::getenv(v);
    if (n && std::atoi(n) > 1) {
      std::fprintf(stderr, "gradcodec: error: started by an MPI launcher with %s processes, but this gradcodec was "
                           "built without MPI (configure with -DGRADCODEC_MPI=ON; see docs/scale-out.md)\n", n);
      std::exit(1);
    }
  }
}
int finish(int status) { return status; }
bool active() { return false; }
int rank() { return 0; }
int size() { return 1; }
int local_size() { return 1; }
void together(const std::function<void()>& step) { step(); }
std::vector<std::vector<uint8_t>> all_gather(const std::vector<uint8_t>& bytes) { return {bytes}; }
std::string broadcast(const std::string& text) { return text; }

SharedFile::SharedFile(const std::string& path) : path_(path) {
  fail(ErrorCode::Internal, path + ": MPI-IO in a build without MPI");
}
SharedFile::~SharedFile() = default;
void SharedFile::write_at(uint64_t, std::span<const uint8_t>) {}
void SharedFile::close() {}

}  // namespace gradcodec::cli::ranks
