# SPDX-License-Identifier: BSD-3-Clause
"""Shared fixtures of the Python module's tests (run by ctest: python_api, python_torch).

The environment names the CLI (GRADCODEC_CLI) and the source tree (GRADCODEC_SOURCE); the
module is imported from build/python (PYTHONPATH)."""

import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

CLI = os.environ.get("GRADCODEC_CLI", "")
SOURCE = Path(os.environ.get("GRADCODEC_SOURCE", Path(__file__).resolve().parents[2]))
SNAPSHOTS = SOURCE / "test_data" / "snapshots"


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
    """Every tensor record's bytes (TREC section and streams), frame by frame, from the footer's
    index (docs/format.md, "Footer" and "Trailer")."""
    footer_offset = struct.unpack_from("<Q", blob, len(blob) - 24)[0]
    assert blob[footer_offset:footer_offset + 4] == b"FOOT"
    pos = footer_offset + 12  # tag, u64 payload length
    (frames,) = struct.unpack_from("<I", blob, pos)
    pos += 4
    out = []
    for _ in range(frames):
        _, count = struct.unpack_from("<QI", blob, pos)
        pos += 12
        frame = []
        for _ in range(count):
            offset, size = struct.unpack_from("<QQ", blob, pos)
            pos += 16
            frame.append(bytes(blob[offset:offset + size]))
        out.append(frame)
    assert out and all(frame and all(r[:4] == b"TREC" for r in frame) for frame in out)
    return out


@pytest.fixture(scope="session")
def steps():
    """Two real gradient snapshots (the bundled CNN + transformer, steps 0 and 10)."""
    paths = [SNAPSHOTS / "step_000.npz", SNAPSHOTS / "step_001.npz"]
    return paths, [load_npz(p) for p in paths]
