#!/usr/bin/python3
"""What a new user trips over: containers that do not
record the user's directories (--record-paths) (--record-paths)."""
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import EXE, fails, path, run

ROOT = sys.argv[2]


def run_in(cwd, *args, expect=0):
    """Runs gradcodec in directory cwd; checks the exit code; returns stderr."""
    p = subprocess.run([EXE, *map(str, args)], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == expect, f"gradcodec {' '.join(map(str, args))}: exit {p.returncode}, expected {expect}\n{err}"
    return err


def header(gcz):
    out, _ = run("inspect", gcz, "--json")
    return json.loads(out)


def snapshot(name, **arrays):
    p = path(name)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    np.savez(p, **(arrays or {"w": np.arange(64, dtype=np.float32)}))
    return p


# ---- item 3: recorded paths -------------------------------------------------------------------

def recorded(gcz):
    h = header(gcz)
    return [i["path"] for i in h["inputs"]], [f["source"] for f in h["frames"]]


def test_paths_relative_to_cwd_by_default():
    snap = snapshot("proj/private/step_001.npz")
    proj = path("proj")
    # An absolute input under the working directory is recorded relative to it.
    run_in(proj, "encode", snap, "-o", "a.gcz", "--quiet")
    assert recorded(os.path.join(proj, "a.gcz")) == (["private/step_001.npz"], ["private/step_001.npz"])
    # A relative one as given, normalized.
    run_in(proj, "encode", "./private/../private/step_001.npz", "-o", "b.gcz", "--quiet")
    assert recorded(os.path.join(proj, "b.gcz")) == (["private/step_001.npz"], ["private/step_001.npz"])


def test_paths_outside_cwd_keep_only_the_name():
    snap = snapshot("proj/private/step_002.npz")
    elsewhere = path("elsewhere")
    os.makedirs(elsewhere, exist_ok=True)
    run_in(elsewhere, "encode", snap, "-o", "c.gcz", "--quiet")
    run_in(elsewhere, "encode", "../proj/private/step_002.npz", "-o", "d.gcz", "--quiet")
    for gcz in ("c.gcz", "d.gcz"):
        paths, sources = recorded(os.path.join(elsewhere, gcz))
        assert paths == ["step_002.npz"] and sources == ["step_002.npz"], (paths, sources)
        raw = open(os.path.join(elsewhere, gcz), "rb").read()
        assert b"private" not in raw and clitest.WORK.encode() not in raw, "the container names the directories"


def test_record_paths_modes():
    snap = snapshot("proj/private/step_003.npz")
    proj = path("proj")
    run_in(proj, "encode", snap, "-o", "abs.gcz", "--record-paths", "absolute", "--quiet")
    assert recorded(os.path.join(proj, "abs.gcz")) == ([os.path.normpath(snap)], [os.path.normpath(snap)])
    run_in(proj, "encode", snap, "-o", "name.gcz", "--record-paths", "name", "--quiet")
    assert recorded(os.path.join(proj, "name.gcz")) == (["step_003.npz"], ["step_003.npz"])
    fails("encode", snap, "-o", path("x.gcz"), "--record-paths", "full", code=1, contains="--record-paths")


def test_merge_records_relative_paths():
    proj = path("mproj")
    os.makedirs(os.path.join(proj, "runs"), exist_ok=True)
    for i in range(2):
        snapshot(f"mproj/runs/w{i}.npz", w=np.linspace(-1, 1, 64, dtype=np.float32) * (i + 1))
        run_in(proj, "encode", f"runs/w{i}.npz", "-o", f"runs/w{i}.gcz", "--preset", "signsgd", "--quiet")
    workers = [os.path.join(proj, "runs", f"w{i}.gcz") for i in range(2)]
    run_in(proj, "merge", *workers, "-o", "m.gcz", "--method", "majority", "--quiet")
    paths, _ = recorded(os.path.join(proj, "m.gcz"))
    assert paths == ["runs/w0.gcz", "runs/w1.gcz"], paths
    run_in(proj, "merge", *workers, "-o", "n.gcz", "--method", "majority", "--record-paths", "name", "--quiet")
    assert recorded(os.path.join(proj, "n.gcz"))[0] == ["w0.gcz", "w1.gcz"]
    # The merged container still decodes.
    run_in(proj, "decode", "m.gcz", "-o", "m.npz", "--quiet")


if __name__ == "__main__":
    clitest.run_all(globals())
