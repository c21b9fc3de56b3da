// SPDX-License-Identifier: BSD-3-Clause
// The transfers `bench --collective` measures (docs/scale-out.md): MPI's own collectives and
// point-to-point messages on MPI_COMM_WORLD, checked (an MPI error is Error(Input)). Started
// alone, the process is the one rank of a job of one: a reduction or gather returns its input,
// and there is no one to send to. Call them on every rank in the same order, from the main thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace gradcodec::cli::collectives {

void barrier();
// Every rank's `v`, summed element by element, in place on every rank (MPI_Allreduce, MPI_SUM).
void all_reduce_sum(std::span<float> v);
void all_reduce_sum(std::span<double> v);
// IEEE binary16 values (their bit patterns) summed element by element with a user-defined MPI
// operation: each addition rounds to binary16 (f32 sum, round to nearest even), as an fp16
// all-reduce does.
void all_reduce_sum_f16(std::span<uint16_t> v);
// The same for bfloat16 values (each addition rounded to bfloat16, nearest even).
void all_reduce_sum_bf16(std::span<uint16_t> v);
// The largest `x` of every rank, on every rank.
double all_max(double x);
// Every rank's `bytes`, in rank order, on every rank (sizes first, then MPI_Allgatherv).
std::vector<std::vector<uint8_t>> all_gather(std::span<const uint8_t> bytes);
// `bytes` to rank `to`; a message from rank `from`, of whatever size it has (MPI_Probe).
void send(std::span<const uint8_t> bytes, int to);
std::vector<uint8_t> receive(int from);
// Rank `root`'s `bytes` on every rank (size first).
void broadcast(std::vector<uint8_t>& bytes, int root);

}  // namespace gradcodec::cli::collectives
