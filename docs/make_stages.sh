#!/usr/bin/env bash
# Assembles docs/stages.md from docs/stages.d/*.md (one file per stage kind, in name order).
set -euo pipefail
cd "$(dirname "$0")"
{
  for f in stages.d/*.md; do
    cat "$f"
    echo
  done
} > stages.md
