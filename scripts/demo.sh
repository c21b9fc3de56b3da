#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The demo: builds gradcodec (release) and compares the presets on the bundled real gradients.
# It configures build/ exactly as scripts/test.sh does (scripts/build-flags.sh), so a test run
# after the demo reuses what the demo built.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
source scripts/build-flags.sh
echo "gradcodec demo: configuring build/" >&2
cmake "${GRADCODEC_CONFIGURE[@]}" >/dev/null
echo "gradcodec demo: building gradcodec (a first build takes about 5 minutes on 2 cores)" >&2
gradcodec_build build -j"$(nproc)" --target gradcodec
echo "gradcodec demo: running gradcodec bench (every preset on the bundled snapshots)" >&2
./build/apps/gradcodec bench "$@"
