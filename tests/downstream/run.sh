#!/usr/bin/env bash
# Installs the build tree into a scratch prefix and builds + runs tests/downstream against it.
set -euo pipefail
build_dir=$1
src_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
test -x "$work/prefix/bin/gradcodec"
test -f "$work/prefix/include/gradcodec/codec.hpp"
test -f "$work/prefix/include/gradcodec/formats/snapshot_io.hpp"
cmake -S "$src_dir/tests/downstream" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/downstream"
"$work/prefix/bin/gradcodec" list presets >/dev/null
