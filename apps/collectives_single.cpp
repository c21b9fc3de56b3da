// SPDX-License-Identifier: BSD-3-Clause
// collectives.hpp in a build without MPI: a job of one rank.
#include "collectives.hpp"

#include <gradcodec/gradcodec.hpp>

namespace gradcodec::cli::collectives {

void barrier() {}
void all_reduce_sum(std::span<float>) {}
void all_reduce_sum(std::span<double>) {}
void all_reduce_sum_f16(std::span<uint16_t>) {}
void all_reduce_sum_bf16(std::span<uint16_t>) {}
double all_max(double x) { return x; }
std::vector<std::vector<uint8_t>> all_gather(std::span<const uint8_t> bytes) {
  return {std::vector<uint8_t>(bytes.begin(), bytes.end())};
}
void send(std::span<const uint8_t>, int to) {
  fail(ErrorCode::Internal, "send to rank " + std::to_string(to) + " in a job of one rank");
}
std::vector<uint8_t> receive(int from) {
  fail(ErrorCode::Internal, "receive from rank " + std::to_string(from) + " in a job of one rank");
}
void broadcast(std::vector<uint8_t>&, int) {}

}  // namespace gradcodec::cli::collectives
