#!/usr/bin/env bash
# The whole test suite, from a clean clone on Debian 12: installs dependencies, builds once
# (warnings are errors), runs every test in parallel, then builds and runs the suite again under
# AddressSanitizer + UndefinedBehaviorSanitizer in a second build directory.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
JOBS=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DGRADCODEC_WERROR=ON -DGRADCODEC_BUILD_TESTS=ON -DGRADCODEC_BUILD_BENCH=ON >/dev/null
cmake --build build -j"$JOBS"
(cd build && ctest -j"$JOBS" --output-on-failure)
if [ "${GRADCODEC_SKIP_SANITIZERS:-0}" != "1" ]; then
  # -O1 -g1: sanitizer builds compile about twice as fast as at -O2 -g and still run the suite quickly.
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" -DGRADCODEC_SANITIZE=ON -DGRADCODEC_BUILD_TESTS=ON \
    -DGRADCODEC_BUILD_BENCH=OFF >/dev/null
  cmake --build build-asan -j"$JOBS"
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
     ctest -j"$JOBS" --output-on-failure -LE no_sanitizer)
fi
