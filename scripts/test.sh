#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The whole test suite, from a clean clone on Debian 12: installs dependencies, builds once
# (warnings are errors), runs every test in parallel, then builds and runs the suite again under
# AddressSanitizer + UndefinedBehaviorSanitizer in a second build directory.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
JOBS=$(nproc)
source scripts/build-flags.sh  # the demo's configuration: what scripts/demo.sh built is reused
cmake "${GRADCODEC_CONFIGURE[@]}" >/dev/null
gradcodec_build build -j"$JOBS"
(cd build && ctest -j"$JOBS" --output-on-failure)
if [ "${GRADCODEC_SKIP_SANITIZERS:-0}" != "1" ]; then
  # -O1 -g1: sanitizer builds compile about twice as fast as at -O2 -g and still run the suite quickly.
  # Warnings are errors here too: the sanitizer build prints none.
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" -DGRADCODEC_SANITIZE=ON -DGRADCODEC_WERROR=ON \
    -DGRADCODEC_BUILD_TESTS=ON -DGRADCODEC_BUILD_BENCH=OFF >/dev/null
  gradcodec_build build-asan -j"$JOBS"
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
     ctest -j"$JOBS" --output-on-failure -LE no_sanitizer)
fi
