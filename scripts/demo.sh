#!/usr/bin/env bash
# The demo: builds gradcodec (release) and compares the presets on the bundled real gradients.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target gradcodec >/dev/null
./build/apps/gradcodec bench "$@"
