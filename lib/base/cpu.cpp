// SPDX-License-Identifier: BSD-3-Clause
#include "base/cpu.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>

namespace gradcodec {

bool cpu_popcnt() noexcept {
  static const bool yes = __builtin_cpu_supports("popcnt");
  return yes;
}

bool cpu_avx2() noexcept {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

bool cpu_f16c() noexcept {
  // Not a name every compiler's __builtin_cpu_supports knows; "avx" also tells that the OS saves
  // the YMM registers.
  static const bool yes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0 && __builtin_cpu_supports("avx");
  }();
  return yes;
}

bool cpu_avx512dq() noexcept {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  return yes;
}

bool cpu_avx512vl() noexcept {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
  return yes;
}

bool cpu_avx512vbmi() noexcept {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vbmi");
  return yes;
}

}  // namespace gradcodec

#else  // other CPUs and compilers: the portable paths everywhere

namespace gradcodec {

bool cpu_popcnt() noexcept { return false; }
bool cpu_avx2() noexcept { return false; }
bool cpu_f16c() noexcept { return false; }
bool cpu_avx512dq() noexcept { return false; }
bool cpu_avx512vl() noexcept { return false; }
bool cpu_avx512vbmi() noexcept { return false; }

}  // namespace gradcodec

#endif
