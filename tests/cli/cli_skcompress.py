#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""skcompress through the CLI (docs/stages.md "skcompress"): docs' 4-value example encodes to its
`value` stream and decodes to the bucket-0 mean with the signs; a corrupt `value` stream, with
the container's checksums resealed so that the stage's own decoder sees it, makes `decode` exit 3
with one error line naming skcompress and what is wrong, and no output file; every truncation and
a bit flip in every byte of a preset container exit 3 as well; a NaN makes `encode --preset
skcompress` refuse the tensor with exit 2."""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
import gcz
from clitest import EXE, path, run

V = np.array([1, -2, 3, -4], np.float32)
np.savez(path("four.npz"), w=V)
run("encode", path("four.npz"), "-o", path("four.gcz"), "--pipeline", "skcompress(buckets=2, rows=1, cols=0.1)", "--quiet")
GOOD = open(path("four.gcz"), "rb").read()
VALUE = bytes([0xA0, 0x80])  # signs 1010, lengths 00001 00000, the one cell '0'


def test_round_trip():
    run("decode", path("four.gcz"), "-o", path("back.npz"), "--force")
    got = np.load(path("back.npz"))["w"]
    assert got.tolist() == [1.5, -1.5, 1.5, -1.5], got


def sealed(new_value):
    """GOOD with its record's `value` stream replaced and the container re-sealed (gcz.py)."""
    return gcz.with_stream(GOOD, "value", VALUE, new_value)


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


def test_resealed_corrupt_value_streams():
    with open(path("same.gcz"), "wb") as f:
        f.write(sealed(VALUE))
    run("decode", path("same.gcz"), "-o", path("same.npz"), "--force")
    cases = [
        (bytes([0xAF, 0x80]), "code length 31 exceeds 24"),  # lengths 11111 00000
        (bytes([0xA0, 0x00]), "no symbol has a code"),       # lengths 00000 00000
        (bytes([0xA0, 0x81]), "nonzero padding"),
    ]
    for data, why in cases:
        decode_must_fail(sealed(data), why, "skcompress", why)


def test_every_truncation_and_bit_flip():
    rng = np.random.default_rng(5)
    np.savez(path("g.npz"), w=rng.standard_normal(3000).astype(np.float32))
    run("encode", path("g.npz"), "-o", path("g.gcz"), "--preset", "skcompress", "--quiet", "--force")
    good = open(path("g.gcz"), "rb").read()
    run("decode", path("g.gcz"), "-o", path("g_back.npz"), "--force")
    for cut in range(len(good)):
        decode_must_fail(good[:cut], f"truncated to {cut}")
    for pos in range(len(good)):
        bad = bytearray(good)
        bad[pos] ^= 1 << (pos % 8)
        decode_must_fail(bytes(bad), f"bit {pos % 8} of byte {pos}")


def test_nonfinite_refused():
    bad = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    bad[17] = np.nan
    np.savez(path("nan.npz"), w=bad)
    p = subprocess.run([EXE, "encode", path("nan.npz"), "-o", path("nan.gcz"), "--preset", "skcompress", "--force"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    lines = p.stderr.decode().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("gradcodec: error: "), (p.returncode, lines)
    assert "NaN" in lines[0] and "'w'" in lines[0], lines
    assert not os.path.exists(path("nan.gcz"))


clitest.run_all(globals())
