#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# `cmake --install` puts the Python package where Debian's /usr/bin/python3 looks for a prefix
# /usr/local (its site directory, as site.getsitepackages() names it), and it imports from there.
set -euo pipefail
build_dir=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/root/usr/local" >/dev/null
site=$(/usr/bin/python3 -c 'import site; print("\n".join(site.getsitepackages()))' | grep '^/usr/local/lib/python3' | head -1)
test -n "$site"
test -f "$work/root$site/gradcodec/__init__.py"
test -f "$work/root$site/gradcodec/torch.py"
ls "$work/root$site"/gradcodec/_core*.so >/dev/null
cd "$work"
PYTHONPATH="$work/root$site" /usr/bin/python3 - "$work/root" <<'PY'
import sys
import numpy
import gradcodec
assert gradcodec.__file__.startswith(sys.argv[1]), gradcodec.__file__
x = numpy.arange(10, dtype=numpy.float32)
assert gradcodec.decode(gradcodec.encode({"x": x}))["x"].tobytes() == x.tobytes()
PY
