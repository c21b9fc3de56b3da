#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs the build tree into a scratch prefix and builds + runs tests/downstream against it.
set -euo pipefail
build_dir=$1
src_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
test -x "$work/prefix/bin/gradcodec"
cmp "$src_dir/LICENSE" "$work/prefix/share/doc/gradcodec/LICENSE"
test -f "$work/prefix/include/gradcodec/gradcodec.hpp"
test -f "$work/prefix/include/gradcodec/formats/snapshot_io.hpp"
cmake -S "$src_dir/tests/downstream" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/downstream"
# The examples build on their own against the installed package too (examples/CMakeLists.txt).
cmake -S "$src_dir/examples" -B "$work/examples" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/examples" >/dev/null
"$work/examples/example_encode_memory" "$work/mem.gcz" qsgd4 >/dev/null
"$work/examples/example_decode_one" "$work/mem.gcz" 0 fc.bias | grep -q '^fc.bias f32 \[64\]'
"$work/prefix/bin/gradcodec" list presets >/dev/null

# pkg-config: the installed gradcodec.pc alone compiles and links the same program.
pc=$(find "$work/prefix" -name gradcodec.pc -print -quit)
test -f "$pc"
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
test "$(pkg-config --modversion gradcodec)" = "$("$work/prefix/bin/gradcodec" --version | grep -o '[0-9][0-9.]*' | head -1)"
# shellcheck disable=SC2046  # pkg-config's flags are words
c++ -std=c++20 "$src_dir/tests/downstream/main.cpp" -o "$work/downstream-pc" $(pkg-config --cflags --libs gradcodec)
"$work/downstream-pc"

# The man page: rendered from the help text, one section per command, every option of each.
man1="$work/prefix/share/man/man1/gradcodec.1"
test -f "$man1"
grep -q '^\.TH GRADCODEC 1' "$man1"
for cmd in encode decode inspect bench merge list; do
  grep -q "^\.SH COMMAND ${cmd^^}\$" "$man1"
  for opt in $("$work/prefix/bin/gradcodec" "$cmd" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
    grep -q -- "$opt" "$man1" || { echo "man page: $cmd $opt missing" >&2; exit 1; }
  done
done
