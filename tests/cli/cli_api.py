#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The public API (docs/api.md) against the CLI: a program using only <gradcodec/gradcodec.hpp>
writes the same container bytes as `gradcodec encode` for the same tensors, pipeline and seed,
and decodes the same tensors as `gradcodec decode`; the three examples/ programs run.
Arguments: EXE ROOT API_VS_CLI EXAMPLES_DIR."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import path, run

import numpy as np

ROOT, API_VS_CLI, EXAMPLES = sys.argv[2], sys.argv[3], sys.argv[4]
PRESETS = ["lossless", "fp16", "topk-1pct", "randk-1pct", "qsgd4", "signsgd", "bird+", "powersgd-r1", "tcs"]


def tensors():
    """The tensors api_vs_cli.cpp builds in memory, in the same order and the same float32 steps."""
    i = np.arange(300 * 40, dtype=np.int64)
    a = ((i * 7919 % 1000) - 500).astype(np.float32) / np.float32(1000)
    j = np.arange(1000, dtype=np.int64)
    b = ((j * 104729 % 2001) - 1000).astype(np.float32) / np.float32(4096)
    k = np.arange(77, dtype=np.int64)
    c = ((k * 31 % 97) - 48).astype(np.float64) / 64.0
    return {"layer1.weight": a.reshape(300, 40), "layer1.bias": b, "head.weight": c.reshape(7, 11),
            "step": np.array([1, 2, 3], dtype=np.int64)}


def program(cmd, cwd):
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert p.returncode == 0, f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr.decode()}"
    return p.stdout.decode()


def test_api_writes_the_cli_bytes_and_decodes_the_cli_tensors():
    work = path("same")
    os.makedirs(work)
    np.savez(os.path.join(work, "snap.npz"), **tensors())
    for preset in PRESETS:
        for threads in (1, 2):
            # The CLI records the input's path as given relative to the working directory: run
            # the API program in the same directory with the name the CLI recorded.
            subprocess.run([clitest.EXE, "encode", "snap.npz", "-o", "cli.gcz", "--preset", preset, "--seed", "5",
                            "--threads", str(threads), "--pass-through", "-f"], cwd=work, check=True,
                           stderr=subprocess.DEVNULL)
            program([API_VS_CLI, "api.gcz", preset, "5", str(threads), "snap.npz", "decoded.bin"], work)
            cli = open(os.path.join(work, "cli.gcz"), "rb").read()
            api = open(os.path.join(work, "api.gcz"), "rb").read()
            assert cli == api, f"{preset}, {threads} thread(s): the API's container differs from the CLI's " \
                               f"({len(api)} vs {len(cli)} bytes)"
            run("decode", os.path.join(work, "cli.gcz"), "-o", os.path.join(work, "cli.npz"), "-f")
            with np.load(os.path.join(work, "cli.npz")) as z:
                want = b"".join(z[n].tobytes() for n in tensors())
            got = open(os.path.join(work, "decoded.bin"), "rb").read()
            assert got == want, f"{preset}: the Decoder's tensors differ from the CLI's decode"


def test_examples_run_on_the_api():
    work = path("examples")
    os.makedirs(work)
    exe = lambda name: os.path.join(EXAMPLES, "example_" + name)
    out = program([exe("encode_memory"), "mem.gcz", "topk-1pct", "3"], work)
    m = re.search(r"ratio ([0-9.]+)x, ([0-9.]+) bits/param", out)
    assert m and float(m.group(1)) > 10, out
    stdout, _ = run("inspect", os.path.join(work, "mem.gcz"), "--json")
    assert b'"fc.weight"' in stdout

    out = program([exe("decode_one"), "mem.gcz", "0", "fc.weight"], work)
    first, values = out.splitlines()[:2]
    assert first.startswith("fc.weight f32 [64, 128] (pipeline topk("), first
    run("decode", os.path.join(work, "mem.gcz"), "-o", os.path.join(work, "mem.npz"))
    with np.load(os.path.join(work, "mem.npz")) as z:
        want = z["fc.weight"].reshape(-1)[:8]
    assert np.array_equal(np.array([float(v) for v in values.split()], dtype=np.float32), want), (values, want)

    snaps = os.path.join(ROOT, "test_data", "snapshots")
    snap = os.path.join(snaps, sorted(f for f in os.listdir(snaps) if f.endswith(".npz"))[0])
    run("encode", snap, "-o", os.path.join(work, "snap.gcz"))
    out = program([exe("compare_presets"), "snap.gcz", "lossless", "topk-1pct"], work)
    rows = {l.split()[0]: [float(x) for x in l.split()[1:]] for l in out.splitlines()[1:]}
    assert rows["lossless"][2] == 0.0, out
    assert rows["topk-1pct"][0] > 10 and 0 < rows["topk-1pct"][2] < 1, out
    # The ratio the example reports is the CLI's for the same snapshot and preset.
    run("decode", os.path.join(work, "snap.gcz"), "-o", os.path.join(work, "snap.npz"))
    _, err = run("encode", os.path.join(work, "snap.npz"), "-o", os.path.join(work, "t.gcz"), "--preset", "topk-1pct")
    cli_ratio = float(re.search(r"ratio ([0-9.]+)x", err).group(1))
    assert abs(cli_ratio / rows["topk-1pct"][0] - 1) < 0.05, (err, out)


if __name__ == "__main__":
    clitest.run_all(globals())
