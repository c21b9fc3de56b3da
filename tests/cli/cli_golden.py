#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Golden containers (test_data/golden in format 1.0 and test_data/golden/v1.1 in format 1.1,
written by tests/fixtures/make_golden.py): every preset has one of each, and every one still
decodes to exactly the tensors recorded when it was made, on one decode thread and on three. The
golden inputs encode to the 1.1 golden bytes exactly (the 1.1 writer is pinned), and a 1.0 and a
1.1 container of the same inputs, preset and seed decode to the same tensors. Also: every preset
encodes the golden inputs to the same bytes with 1 and 2 threads and across runs."""
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
GOLDEN11 = os.path.join(GOLDEN, "v1.1")
MANIFEST11 = json.load(open(os.path.join(GOLDEN11, "manifest.json")))
PRESETS = json.loads(run("list", "presets", "--json")[0])
INPUTS = [os.path.join(GOLDEN, f) for f in MANIFEST["frames"]]


def test_every_preset_has_a_golden_container():
    for manifest, how in ((MANIFEST, ""), (MANIFEST11, " --v1.1")):
        missing = [p["name"] for p in PRESETS if p["name"] not in manifest["presets"]]
        assert not missing, f"presets without a golden container (run tests/fixtures/make_golden.py{how}): {missing}"


def decoded(container, frames, threads=1):
    """{"frame/tensor": sha256 of the decoded tensor (dtype and shape included)}."""
    got = {}
    for f in range(frames):
        out = path(f"golden_{f}.npz")
        run("decode", container, "--frame", f, "-o", out, "--force", "--threads", threads)
        with np.load(out, allow_pickle=False) as z:
            assert len(z.files) == len(set(z.files))
            for t in z.files:
                a = z[t]
                got[f"{f}/{t}"] = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode() + a.tobytes()).hexdigest()
    return got


def test_golden_containers_decode_identically():
    for folder, manifest in ((GOLDEN, MANIFEST), (GOLDEN11, MANIFEST11)):
        for name, g in sorted(manifest["presets"].items()):
            with open(os.path.join(folder, g["file"]), "rb") as f:
                assert f.read(12)[10] == (1 if folder == GOLDEN11 else 0), g["file"]  # the format's minor version
            for threads in (1, 3):
                got = decoded(os.path.join(folder, g["file"]), len(manifest["frames"]), threads)
                assert got == g["decoded_sha256"], f"golden container {folder}/{g['file']} ({threads} decode " \
                                                   "threads) no longer decodes identically"


def test_golden_inputs_encode_to_the_golden_1_1_bytes_and_1_0_decodes_alike():
    frames = MANIFEST11["frames"]  # relative to GOLDEN11, as the headers record them
    for name, g in sorted(MANIFEST11["presets"].items()):
        containers = {}
        for version in ("1.1", "1.0"):
            out = path(f"again_{name}_{version}.gcz")
            clitest.subprocess.run([clitest.EXE, "encode", *frames, "-o", out, "--pipeline", g["pipeline"], "--seed", "7",
                                    "--threads", "1", "--quiet", "--force", "--format-version", version],
                                   cwd=GOLDEN11, check=True, timeout=120)
            containers[version] = out
        with open(containers["1.1"], "rb") as a, open(os.path.join(GOLDEN11, g["file"]), "rb") as b:
            assert a.read() == b.read(), f"{name}: the golden inputs no longer encode to {g['file']}'s bytes"
        assert decoded(containers["1.0"], len(frames)) == g["decoded_sha256"], \
            f"{name}: its 1.0 container decodes otherwise than its 1.1 container"


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
