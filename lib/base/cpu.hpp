// SPDX-License-Identifier: BSD-3-Clause
// What the CPU running us can execute, for the kernels that have a vector path next to their
// portable one. Each answer is found once (CPUID) and kept. The vector paths give the same
// bits as the portable ones; the tests compare the two wherever both exist.
#pragma once

namespace gradcodec {

// POPCNT (CPUID leaf 1, ECX bit 23).
bool cpu_popcnt() noexcept;
// AVX2 (and an OS that saves the YMM registers).
bool cpu_avx2() noexcept;
// F16C (CPUID leaf 1, ECX bit 29) with AVX: the f32 ↔ f16 conversion instructions.
bool cpu_f16c() noexcept;
// AVX-512 F and DQ (512-bit integer and 64-bit mask operations).
bool cpu_avx512dq() noexcept;
// AVX-512 F and VL (the AVX-512 instructions on 256-bit vectors).
bool cpu_avx512vl() noexcept;
// AVX-512 F, BW and VBMI (masked byte loads and the two-source byte permute).
bool cpu_avx512vbmi() noexcept;

}  // namespace gradcodec
