#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Assembles docs/stages.md from docs/stages.d/*.md (one file per stage kind, in name order).
set -euo pipefail
cd "$(dirname "$0")"
{
  for f in stages.d/*.md; do
    cat "$f"
    echo
  done
} > stages.md
