#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Every truncation of a small container, and a single-bit flip in every byte of it (the bit
rotating with the position), make `gradcodec decode` exit 3 with one error line — never a crash,
a hang or an output file."""
import json
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


def test_committed_must_fail_containers():
    # test_data/corrupt: one container per malformed field (tests/fixtures/make_corrupt.py), each
    # with the exact error line decode (on one thread or several) and inspect must print.
    folder = os.path.join(sys.argv[2], "test_data", "corrupt")
    expected = json.load(open(os.path.join(folder, "expected.json")))
    assert len(expected) >= 15
    for name, want in sorted(expected.items()):
        f = os.path.join(folder, name)
        for cmd in (["decode", f, "-o", path("never.npz"), "--threads", "1"],
                    ["decode", f, "-o", path("never.npz"), "--threads", "3"], ["inspect", f]):
            p = subprocess.run([EXE, *cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
            err = p.stderr.decode().strip()
            assert p.returncode == want["exit"], (name, cmd[0], p.returncode, err)
            assert err == want["error"].format(path=f), (name, cmd[0], err, want["error"])
        assert not os.path.exists(path("never.npz"))


clitest.run_all(globals())
