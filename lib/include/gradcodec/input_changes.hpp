// SPDX-License-Identifier: BSD-3-Clause
// gradcodec — input files that change while they are read.
//
// Inputs are memory-mapped: tensors are read in place, without a copy (docs/performance.md).
// When another process truncates a mapped file, the first touch of a page past its new end
// raises SIGBUS, whose default action kills the process without a word. The library lists every
// mapping it makes (InputFile); a program's SIGBUS handler calls recover_input_fault(), which —
// for an address in a listed mapping — maps zero pages over that mapping from the faulting page
// to its end and records the file as changed. The faulting read then completes (reading zeros)
// and the work goes on until the next check, check_inputs_unchanged(), throws: before every
// output is sealed (AtomicOutput::seal), and wherever the program asks (before each tensor).
// The library itself installs no handler and never prints.
#pragma once

#include <cstddef>
#include <optional>

#include <gradcodec/error.hpp>

namespace gradcodec {

// For a SIGBUS handler (async-signal-safe): true when `addr` lies in a listed mapping, which is
// then readable again (zeros from the faulting page on) and recorded as changed; false for any
// other address (a fault that is not an input's: the handler lets it take its default course).
bool recover_input_fault(const void* addr) noexcept;

// The error for the first input recorded as changed: "<path>: the file shrank (or could not be
// read) while it was being read", with the file's code — Corrupt for a container, Input for
// anything else (InputFile::open's `changed`); empty while none has.
std::optional<Error> input_change();

// Throws input_change(), if any.
void check_inputs_unchanged();

// For a system call that failed with EFAULT on a buffer that may be mapped input (a write(2)
// from it): reads every page of [p, p + n), so that a truncated mapping faults here and is
// recorded, then check_inputs_unchanged().
void check_range_readable(const void* p, size_t n);

}  // namespace gradcodec
