#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""smartidx through the CLI (docs/stages.md "smartidx"): a conv weight round-trips to its top-k
with the promoted kernel sent whole; a corrupt package stream, with the container's checksums
resealed so that the stage's own decoder sees it, makes `decode` exit 3 with one error line naming
smartidx and what is wrong, and no output file; every truncation and a bit flip in every byte of
the container exit 3 as well; a NaN makes `encode` refuse the tensor with exit 2."""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
import gcz
from clitest import EXE, path, run

# [4, 1, 3, 3]: kernels 0 and 2 large with one sign pattern, element 13 large, the rest small.
SGN = np.array([1, -1, 1, -1, -1, 1, 1, 1, -1], np.float32)
W = np.zeros((4, 1, 3, 3), np.float32)
W[0, 0] = (SGN * (10 + np.arange(9, dtype=np.float32))).reshape(3, 3)
W[2, 0] = (SGN * (20 + np.arange(9, dtype=np.float32))).reshape(3, 3)
W[1, 0] = (0.01 * np.arange(1, 10, dtype=np.float32)).reshape(3, 3)
W[3, 0] = (-0.02 * np.arange(1, 10, dtype=np.float32)).reshape(3, 3)
W.reshape(-1)[13] = 5.0
np.savez(path("conv.npz"), w=W)
run("encode", path("conv.npz"), "-o", path("conv.gcz"), "--pipeline", "smartidx(k=19)", "--quiet")
GOOD = open(path("conv.gcz"), "rb").read()
# The package stream of docs/stages.md's example, as written.
INDEX = bytes([0x01, 0x05, 0x01, 0x02, 0x00, 0xB5, 0x63, 0x40])


def test_round_trip():
    run("decode", path("conv.gcz"), "-o", path("back.npz"), "--force")
    want = W.copy()
    want[1, 0] = 0
    want[1, 0].reshape(-1)[4] = 5.0  # element 13 alone of kernel 1
    want[3, 0] = 0
    got = np.load(path("back.npz"))["w"]
    assert got.tobytes() == want.tobytes(), got


def sealed(new_index):
    """GOOD with its record's `index` stream replaced and the container re-sealed (gcz.py)."""
    return gcz.with_stream(GOOD, "index", INDEX, new_index)


def decode_must_fail(data, what, *needles):
    with open(path("c.gcz"), "wb") as f:
        f.write(data)
    if os.path.exists(path("c.npz")):
        os.remove(path("c.npz"))
    p = subprocess.run([EXE, "decode", path("c.gcz"), "-o", path("c.npz"), "--force"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    lines = p.stderr.decode().splitlines()
    assert p.returncode == 3, f"{what}: exit {p.returncode}: {p.stderr.decode()}"
    assert len(lines) == 1 and lines[0].startswith("gradcodec: error: "), f"{what}: {lines}"
    for n in needles:
        assert n in lines[0], f"{what}: {lines[0]!r} lacks {n!r}"
    assert not os.path.exists(path("c.npz")), what


def test_resealed_corrupt_package_streams():
    # The resealed copy of the good stream decodes: the sealing itself is right.
    with open(path("same.gcz"), "wb") as f:
        f.write(sealed(INDEX))
    run("decode", path("same.gcz"), "-o", path("same.npz"), "--force")
    cases = [
        (bytes([0x01, 0x05, 0x09]) + INDEX[3:], "pattern package count 9"),
        (INDEX[:3] + bytes([0x00]) + INDEX[4:], "holds no kernel"),
        (INDEX[:3] + bytes([0x05]) + INDEX[4:], "more than the 4 kernels"),
        (bytes([0x01, 0x40]) + INDEX[2:], "Rice parameter 64"),
        (INDEX[:7] + bytes([0x41]), "nonzero padding"),
        (bytes([0x09]) + INDEX[1:], "count 9"),
    ]
    for data, why in cases:
        decode_must_fail(sealed(data), why, "smartidx", why)


def test_every_truncation_and_bit_flip():
    for cut in range(len(GOOD)):
        decode_must_fail(GOOD[:cut], f"truncated to {cut}")
    for pos in range(len(GOOD)):
        bad = bytearray(GOOD)
        bad[pos] ^= 1 << (pos % 8)
        decode_must_fail(bytes(bad), f"bit {pos % 8} of byte {pos}")


def test_nonfinite_refused():
    bad = W.copy()
    bad[2, 0, 1, 1] = np.nan
    np.savez(path("nan.npz"), w=bad)
    p = subprocess.run([EXE, "encode", path("nan.npz"), "-o", path("nan.gcz"), "--preset", "smartidx", "--force"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    lines = p.stderr.decode().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("gradcodec: error: "), (p.returncode, lines)
    assert "NaN" in lines[0] and "'w'" in lines[0], lines
    assert not os.path.exists(path("nan.gcz"))


clitest.run_all(globals())
