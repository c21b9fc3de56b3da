# SPDX-License-Identifier: BSD-3-Clause
"""Shared fixtures of the Python module's tests (run by ctest: python_api, python_torch).

The environment names the CLI (GRADCODEC_CLI) and the source tree (GRADCODEC_SOURCE); the
module is imported from build/python (PYTHONPATH)."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

CLI = os.environ.get("GRADCODEC_CLI", "")
SOURCE = Path(os.environ.get("GRADCODEC_SOURCE", Path(__file__).resolve().parents[2]))
SNAPSHOTS = SOURCE / "test_data" / "snapshots"
sys.path.insert(0, str(SOURCE / "tests" / "cli"))
import gcz  # noqa: E402  (the test-side reader of .gcz containers)


def cli(*args, check=True):
    """Runs the gradcodec CLI; returns the CompletedProcess (text)."""
    assert CLI, "GRADCODEC_CLI names the gradcodec binary"
    p = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=600)
    if check:
        assert p.returncode == 0, f"gradcodec {' '.join(map(str, args))}: exit {p.returncode}\n{p.stderr}"
    return p


def load_npz(path):
    """The snapshot's arrays in the file's order, as the CLI reads them."""
    with np.load(path) as z:
        return {name: z[name] for name in z.files}


def records(blob):
    """Every tensor record, frame by frame, as what makes two records the same (gcz.py's
    Record.key(): name, type, shape, storage, variant, streams) with its check, read by the
    test-side reader of docs/format.md (every checksum checked); format 1.1 or 1.0."""
    out = [[(r.key(), r.check) for r in recs] for _, _, recs in gcz.Container(blob).frames]
    assert out and all(out)
    return out


def container(blob):
    """The container, read by gcz.py."""
    return gcz.Container(blob)


@pytest.fixture(scope="session")
def steps():
    """Two real gradient snapshots (the bundled CNN + transformer, steps 0 and 10)."""
    paths = [SNAPSHOTS / "step_000.npz", SNAPSHOTS / "step_001.npz"]
    return paths, [load_npz(p) for p in paths]
