#!/usr/bin/python3
"""Every truncation of a small container, and a single-bit flip in every byte of it (the bit
rotating with the position), make `gradcodec decode` exit 3 with one error line — never a crash,
a hang or an output file."""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import EXE, path, run

np.savez(path("small.npz"), w=np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6), b=np.ones(3, np.float32))
run("encode", path("small.npz"), "-o", path("small.gcz"), "--pipeline", "fp16 | zstd(level=1)", "--quiet")
GOOD = open(path("small.gcz"), "rb").read()


def decode_must_fail(data, what):
    with open(path("c.gcz"), "wb") as f:
        f.write(data)
    p = subprocess.run([EXE, "decode", path("c.gcz"), "-o", path("c.npz"), "--force"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    lines = p.stderr.decode().splitlines()
    assert p.returncode == 3, f"{what}: exit {p.returncode}: {p.stderr.decode()}"
    assert len(lines) == 1 and lines[0].startswith("gradcodec: error: "), f"{what}: {lines}"
    assert not os.path.exists(path("c.npz")), what


def test_every_truncation():
    for cut in range(len(GOOD)):
        decode_must_fail(GOOD[:cut], f"truncated to {cut}")


def test_bit_flip_in_every_byte():
    for pos in range(len(GOOD)):
        bad = bytearray(GOOD)
        bad[pos] ^= 1 << (pos % 8)
        decode_must_fail(bytes(bad), f"bit {pos % 8} of byte {pos}")


clitest.run_all(globals())
