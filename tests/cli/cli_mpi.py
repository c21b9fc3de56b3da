#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""gradcodec under MPI (docs/scale-out.md): `mpirun -np N gradcodec encode` writes the container a
single process writes, byte for byte, for every preset and 1, 2 and 3 ranks (the ranks share the
tensors, each tensor's whole sequence on one rank); a failure on any rank ends the job with one
error line, its exit code and no output; the other commands run on rank 0 as they run alone.
Runs Debian's Open MPI with --oversubscribe: 3 ranks on a 2-core machine."""
import filecmp
import glob
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import EXE, path, run

SRC = sys.argv[2]
MPIRUN = shutil.which("mpirun")
STEPS = sorted(glob.glob(os.path.join(SRC, "test_data", "snapshots", "step_*.npz")))


def mpirun(n, *args, expect=0):
    """Runs `mpirun -np n gradcodec args`; checks the exit status; returns (stdout, stderr)."""
    assert MPIRUN, "mpirun not found (Debian: openmpi-bin), though gradcodec was built with MPI"
    # Shared memory between ranks without Linux's cross-memory attach, which containers that
    # restrict ptrace refuse (Open MPI would warn and fall back, or fail).
    cmd = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "--mca", "btl_vader_single_copy_mechanism", "none",
           "-np", str(n), EXE, *map(str, args)]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == expect, f"{' '.join(cmd)}: exit {p.returncode}, expected {expect}\n{err}"
    return p.stdout, err


def gradcodec_lines(err):
    """The lines gradcodec wrote (mpirun adds its own about the exit status)."""
    return [l for l in err.splitlines() if l.startswith("gradcodec")]


def presets():
    out = run("list", "presets")[0].decode()
    return [l.split()[0] for l in out.splitlines() if l and not l[0].isspace()]


def leftovers(directory):
    return [f for f in os.listdir(directory) if ".tmp-" in f]


def test_every_preset_same_bytes_on_1_2_3_ranks():
    assert len(STEPS) == 4 and len(presets()) >= 20
    for preset in presets():
        one = path(f"{preset}.gcz")
        args = ["encode", *STEPS, "--preset", preset, "--seed", "3", "--keyframe-interval", "3", "--threads", "1"]
        run(*args, "-o", one, "--force", "--quiet")
        for n in (1, 2, 3):
            out = path(f"{preset}.np{n}.gcz")
            _, err = mpirun(n, *args, "-o", out, "--force")
            assert filecmp.cmp(one, out, shallow=False), f"{preset}: {n} ranks wrote other bytes"
            # One summary line, from rank 0, counting every rank's tensors.
            lines = gradcodec_lines(err)
            assert len(lines) == 1 and "4 frame(s), 188 tensor(s)" in lines[0], err
            os.remove(out)
        os.remove(one)


def test_ranks_share_the_tensors():
    """The summary says how the bytes were shared: frame 0's tensors balanced by size, so that on
    the bundled snapshot no rank holds much more than its share."""
    args = ["encode", *STEPS, "--preset", "topk-1pct", "--threads", "1", "--force"]
    for n, most in ((1, 100.0), (2, 55.0), (3, 40.0)):
        _, err = mpirun(n, *args, "-o", path("share.gcz"))
        line = gradcodec_lines(err)[0]
        assert f"on {n} rank(s), the largest share " in line, line
        share = float(line.split("the largest share ")[1].split("%")[0])
        assert 100.0 / n <= share <= most, line


def test_failure_on_any_rank_is_one_line_and_no_output():
    # A NaN in the smallest tensor of each of two inputs: whichever rank holds it fails; with a
    # lossy pipeline every rank exits 2, one error line, no file, no temporary.
    bad = path("nan.npz")
    with np.load(STEPS[0]) as z:
        arrays = {k: z[k] for k in z.files}
    small = min(arrays, key=lambda k: arrays[k].size)
    arrays[small] = arrays[small].copy()
    arrays[small].flat[0] = np.nan
    np.savez(bad, **arrays)
    out = path("nan.gcz")
    for n in (1, 2, 3):
        _, err = mpirun(n, "encode", STEPS[0], bad, "--preset", "topk-1pct", "-o", out, expect=2)
        lines = gradcodec_lines(err)
        assert len(lines) == 1 and lines[0].startswith("gradcodec: error: ") and "non-finite" in lines[0], err
        assert small in lines[0], lines[0]
        assert not os.path.exists(out) and not leftovers(clitest.WORK), os.listdir(clitest.WORK)


def test_refusals_under_mpi():
    out = path("exists.gcz")
    run("encode", STEPS[0], "-o", out, "--quiet")
    before = open(out, "rb").read()
    _, err = mpirun(2, "encode", STEPS[1], "-o", out, expect=1)
    assert len(gradcodec_lines(err)) == 1 and "already exists" in err, err
    assert open(out, "rb").read() == before and not leftovers(clitest.WORK)
    _, err = mpirun(2, "encode", STEPS[1], "-o", "-", expect=1)
    lines = gradcodec_lines(err)
    assert len(lines) == 1 and "-o FILE" in lines[0], err


def npz_equal(a, b):
    with np.load(a) as x, np.load(b) as y:
        return x.files == y.files and all(np.array_equal(x[k], y[k]) for k in x.files)


def test_decode_shares_the_frames():
    """decode of 4 frames on 2 and 3 ranks writes the files one process writes (stateless and
    stateful pipelines: each rank replays from the last keyframe before its frames)."""
    for preset in ("qsgd4", "powersgd-r2", "tcs"):
        c = path(f"frames_{preset}.gcz")
        run("encode", *STEPS, "-o", c, "--preset", preset, "--keyframe-interval", "3", "--quiet")
        run("decode", c, "-o", path(f"one_{preset}.npz"), "--quiet")
        for n in (2, 3):
            _, err = mpirun(n, "decode", c, "-o", path(f"np{n}_{preset}.npz"), "--verbose")
            # Rank 0 speaks, of its own frames only: the first 4 // n of them.
            said = [int(l.split()[2]) for l in gradcodec_lines(err) if l.startswith("gradcodec: frame ")]
            assert said == list(range(4 // n)), err
            for f in range(4):
                one, many = path(f"one_{preset}.frame{f:03d}.npz"), path(f"np{n}_{preset}.frame{f:03d}.npz")
                assert npz_equal(one, many), f"{preset}: frame {f} on {n} ranks differs"
                os.remove(many)
    # A frame's file that exists (without --force) stops every rank: one line, exit 1, and no
    # frame's file is published, not even those decoded on other ranks.
    c = path("frames_qsgd4.gcz")
    keep = path("np3_qsgd4.frame003.npz")
    with open(keep, "wb") as f:
        f.write(b"mine")
    _, err = mpirun(3, "decode", c, "-o", path("np3_qsgd4.npz"), expect=1)
    lines = gradcodec_lines(err)
    assert len(lines) == 1 and "already exists" in lines[0] and "frame003" in lines[0], err
    assert open(keep, "rb").read() == b"mine"
    assert not any(os.path.exists(path(f"np3_qsgd4.frame{f:03d}.npz")) for f in range(3))
    assert not leftovers(clitest.WORK), os.listdir(clitest.WORK)


SPEED = ("mbps", "seconds", "time_", "runs", "spread", "speedup")  # measured times and what follows from them


def test_bench_shares_the_rows():
    """bench on 2 and 3 ranks: one report from rank 0, every row in order, every figure but the
    speeds equal to one process's (each row is measured whole on one rank)."""
    args = ["bench", *STEPS[:2], "--preset", "topk-1pct", "--preset", "qsgd4", "--preset", "bird+",
            "--preset", "powersgd-r1", "--preset", "lossless", "--sweep", "topk.ratio=0.01,0.05", "--seeds", "2",
            "--repeat", "1", "--min-time", "0", "--link", "10Gbit/s", "--workers", "4", "--force"]
    run(*args, "--json", path("bench1.json"))
    one = json.load(open(path("bench1.json")))
    assert len(one["rows"]) == 6
    for n in (2, 3):
        out, _ = mpirun(n, *args, "--json", path(f"bench{n}.json"))
        assert out.decode().count("gradcodec bench: ") == 1, out  # the tables printed once, by rank 0
        many = json.load(open(path(f"bench{n}.json")))
        assert {k: v for k, v in many.items() if k != "rows"} == {k: v for k, v in one.items() if k != "rows"}
        assert [r["label"] for r in many["rows"]] == [r["label"] for r in one["rows"]]
        for a, b in zip(one["rows"], many["rows"]):
            same = {k for k in a if not any(w in k for w in SPEED)}
            assert {k: a[k] for k in same} == {k: b[k] for k in same}, (n, a["label"])


def test_other_commands_run_on_rank_0():
    c = path("dec.gcz")
    run("encode", *STEPS[:2], "-o", c, "--preset", "qsgd4", "--quiet")
    run("decode", c, "-o", path("one.npz"), "--frame", "1", "--quiet")
    mpirun(3, "decode", c, "-o", path("three.npz"), "--frame", "1", "--quiet")
    with np.load(path("one.npz")) as a, np.load(path("three.npz")) as b:
        assert a.files == b.files and all(np.array_equal(a[k], b[k]) for k in a.files)
    single = json.loads(run("inspect", c, "--json")[0])
    under, _ = mpirun(3, "inspect", c, "--json")
    assert json.loads(under) == single  # printed once, by rank 0


if __name__ == "__main__":
    clitest.run_all(globals())
