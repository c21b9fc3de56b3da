#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Golden containers (test_data/golden, written by tests/fixtures/make_golden.py): every preset
has one, and every one still decodes to exactly the tensors recorded when it was made, on one
decode thread and on three. Also:
every preset encodes the golden inputs to the same bytes with 1 and 2 threads and across runs."""
import hashlib
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import path, run

GOLDEN = os.path.join(sys.argv[2], "test_data", "golden")
MANIFEST = json.load(open(os.path.join(GOLDEN, "manifest.json")))
PRESETS = json.loads(run("list", "presets", "--json")[0])
INPUTS = [os.path.join(GOLDEN, f) for f in MANIFEST["frames"]]


def test_every_preset_has_a_golden_container():
    missing = [p["name"] for p in PRESETS if p["name"] not in MANIFEST["presets"]]
    assert not missing, f"presets without a golden container (run tests/fixtures/make_golden.py): {missing}"


def test_golden_containers_decode_identically():
    for name, g in sorted(MANIFEST["presets"].items()):
        got = {}
        for threads in (1, 3):
            for f in range(len(MANIFEST["frames"])):
                out = path(f"golden_{name}_{f}.npz")
                run("decode", os.path.join(GOLDEN, g["file"]), "--frame", f, "-o", out, "--force", "--threads", threads)
                with np.load(out, allow_pickle=False) as z:
                    assert len(z.files) == len(set(z.files))
                    for t in z.files:
                        a = z[t]
                        got[f"{f}/{t}"] = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode() + a.tobytes()).hexdigest()
            assert got == g["decoded_sha256"], f"golden container {g['file']} ({threads} decode threads) no longer " \
                                               "decodes identically"
            got = {}


def test_same_bytes_for_1_and_2_threads_and_across_runs():
    for p in PRESETS:
        outs = []
        for threads, k in ((1, 0), (2, 1), (2, 2), (1, 3)):
            out = path(f"det_{p['name']}_{k}.gcz")
            run("encode", *INPUTS, "-o", out, "--preset", p["name"], "--seed", 7, "--threads", threads, "--force",
                "--quiet")
            outs.append(open(out, "rb").read())
        assert all(o == outs[0] for o in outs), f"preset {p['name']}: output depends on threads or run"


clitest.run_all(globals())
