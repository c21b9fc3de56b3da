// SPDX-License-Identifier: BSD-3-Clause
// collectives.hpp with MPI (Debian's OpenMPI). MPI counts are ints: reductions go in chunks, and
// a message or a gathered whole above 2 GiB is refused (Error(Input)).
#include "collectives.hpp"

#include "ranks.hpp"

#include <gradcodec/gradcodec.hpp>

#include <mpi.h>

#include <algorithm>
#include <limits>
#include <string>

namespace gradcodec::cli::collectives {

namespace {

constexpr size_t kChunk = size_t{1} << 28;  // elements per MPI_Allreduce call
constexpr size_t kMaxMessage = static_cast<size_t>(std::numeric_limits<int>::max());

void check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  fail(ErrorCode::Input, std::string(what) + ": " + std::string(text, static_cast<size_t>(len)));
}

int message_size(size_t n, const char* what) {
  if (n > kMaxMessage)
    fail(ErrorCode::Input, std::string(what) + ": " + std::to_string(n) + " bytes exceed one MPI message (2 GiB)");
  return static_cast<int>(n);
}

bool shared() { return ranks::active() && ranks::size() > 1; }

template <class T>
void reduce_in_chunks(std::span<T> v, MPI_Datatype type, MPI_Op op) {
  for (size_t at = 0; at < v.size(); at += kChunk) {
    const int n = static_cast<int>(std::min(kChunk, v.size() - at));
    check(MPI_Allreduce(MPI_IN_PLACE, v.data() + at, n, type, op, MPI_COMM_WORLD), "MPI_Allreduce");
  }
}

// inout[i] = f16(f32(in[i]) + f32(inout[i])): binary16 addition, rounded once (the f32 sum of
// two binary16 values is exact). In blocks, with the vectorised conversions of half.hpp.
void add_f16(void* in, void* inout, int* len, MPI_Datatype*) {
  constexpr int kBlock = 1024;
  float x[kBlock], y[kBlock];
  const auto* a = static_cast<const uint8_t*>(in);
  auto* b = static_cast<uint8_t*>(inout);
  for (int at = 0; at < *len; at += kBlock) {
    const int n = std::min(kBlock, *len - at);
    f16_to_f32_n(a + 2 * static_cast<size_t>(at), static_cast<uint64_t>(n), x);
    f16_to_f32_n(b + 2 * static_cast<size_t>(at), static_cast<uint64_t>(n), y);
    for (int i = 0; i < n; ++i) y[i] += x[i];
    f32_to_f16_n(y, static_cast<uint64_t>(n), b + 2 * static_cast<size_t>(at));
  }
}

// inout[i] = bf16(f32(in[i]) + f32(inout[i])): bfloat16 addition, rounded once.
void add_bf16(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = f32_to_bf16(bf16_to_f32(a[i]) + bf16_to_f32(b[i]));
}

// v summed with a user-defined operation on 16-bit values.
void reduce_with(std::span<uint16_t> v, MPI_User_function* add) {
  MPI_Op op;
  check(MPI_Op_create(add, 1, &op), "MPI_Op_create");
  try {
    reduce_in_chunks(v, MPI_UINT16_T, op);
  } catch (...) {
    MPI_Op_free(&op);
    throw;
  }
  MPI_Op_free(&op);
}

}  // namespace

void barrier() {
  if (shared()) check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

void all_reduce_sum(std::span<float> v) {
  if (shared()) reduce_in_chunks(v, MPI_FLOAT, MPI_SUM);
}

void all_reduce_sum(std::span<double> v) {
  if (shared()) reduce_in_chunks(v, MPI_DOUBLE, MPI_SUM);
}

void all_reduce_sum_f16(std::span<uint16_t> v) {
  if (shared()) reduce_with(v, &add_f16);
}

void all_reduce_sum_bf16(std::span<uint16_t> v) {
  if (shared()) reduce_with(v, &add_bf16);
}

double all_max(double x) {
  if (shared()) check(MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  return x;
}

std::vector<std::vector<uint8_t>> all_gather(std::span<const uint8_t> bytes) {
  if (!shared()) return {std::vector<uint8_t>(bytes.begin(), bytes.end())};
  const int ranks = ranks::size();
  const int n = message_size(bytes.size(), "MPI_Allgatherv");
  std::vector<int> sizes(static_cast<size_t>(ranks)), at(static_cast<size_t>(ranks));
  check(MPI_Allgather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
  size_t total = 0;
  for (int r = 0; r < ranks; ++r) at[r] = static_cast<int>(std::min(total, kMaxMessage)), total += sizes[r];
  message_size(total, "MPI_Allgatherv (every rank's bytes together)");
  std::vector<uint8_t> all(total);
  check(MPI_Allgatherv(bytes.data(), n, MPI_BYTE, all.data(), sizes.data(), at.data(), MPI_BYTE, MPI_COMM_WORLD),
        "MPI_Allgatherv");
  std::vector<std::vector<uint8_t>> out;
  for (int r = 0; r < ranks; ++r) out.emplace_back(all.begin() + at[r], all.begin() + at[r] + sizes[r]);
  return out;
}

void send(std::span<const uint8_t> bytes, int to) {
  const int n = message_size(bytes.size(), "MPI_Send");
  check(MPI_Send(bytes.data(), n, MPI_BYTE, to, 0, MPI_COMM_WORLD), "MPI_Send");
}

std::vector<uint8_t> receive(int from) {
  MPI_Status st;
  check(MPI_Probe(from, 0, MPI_COMM_WORLD, &st), "MPI_Probe");
  int n = 0;
  check(MPI_Get_count(&st, MPI_BYTE, &n), "MPI_Get_count");
  std::vector<uint8_t> bytes(static_cast<size_t>(n));
  check(MPI_Recv(bytes.data(), n, MPI_BYTE, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
  return bytes;
}

void broadcast(std::vector<uint8_t>& bytes, int root) {
  if (!shared()) return;
  uint64_t n = bytes.size();
  check(MPI_Bcast(&n, 1, MPI_UINT64_T, root, MPI_COMM_WORLD), "MPI_Bcast");
  bytes.resize(message_size(n, "MPI_Bcast"));
  check(MPI_Bcast(bytes.data(), static_cast<int>(n), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
}

}  // namespace gradcodec::cli::collectives
