# SPDX-License-Identifier: BSD-3-Clause
# The one configuration of build/ that scripts/demo.sh and scripts/test.sh share (sourced by
# both): the same directory and flags, so that a demo then a test run builds gradcodec once (a
# change of flags, such as -Werror, would recompile every file).
GRADCODEC_CONFIGURE=(-S . -B build -DCMAKE_BUILD_TYPE=Release -DGRADCODEC_WERROR=ON -DGRADCODEC_BUILD_TESTS=ON
  -DGRADCODEC_BUILD_BENCH=ON)

# cmake --build "$@" with its progress shown: on a terminal one line that updates ("[ 42%]
# Building CXX object lib/engine/codec.cpp.o"), else every line; warnings and errors in full.
gradcodec_build() {
  if [ -t 1 ]; then
    cmake --build "$@" 2>&1 | awk '
      /^\[ *[0-9]+%\]/ { line = substr($0, 1, 100); printf "\r\033[K%s", line; fflush(); shown = 1; next }
      { if (shown) { printf "\n"; shown = 0 } print; fflush() }
      END { if (shown) printf "\r\033[K" }'
  else
    cmake --build "$@"
  fi
}
