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
import gcz
from clitest import EXE, path, run

SRC = sys.argv[2]
MPIRUN = shutil.which("mpirun")
STEPS = sorted(glob.glob(os.path.join(SRC, "test_data", "snapshots", "step_*.npz")))


def mpirun(n, *args, expect=0, stdin=None):
    """Runs `mpirun -np n gradcodec args` (stdin: bytes for its standard input); checks the exit
    status; returns (stdout, stderr)."""
    assert MPIRUN, "mpirun not found (Debian: openmpi-bin), though gradcodec was built with MPI"
    # Shared memory between ranks without Linux's cross-memory attach, which containers that
    # restrict ptrace refuse (Open MPI would warn and fall back, or fail).
    cmd = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "--mca", "btl_vader_single_copy_mechanism", "none",
           "-np", str(n), EXE, *map(str, args)]
    p = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
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


def test_failures_on_several_ranks_give_the_error_one_process_meets_first():
    # Two tensors with a NaN: 'a' first in record order, on rank 1 (the larger 'b' goes to rank
    # 0). The error was the lowest rank's ('b'); it is now the first record's, as one process says.
    # Across frames: rank 0's failure in frame 0 comes before rank 1's in frame 1.
    a = np.ones(1000, np.float32)
    a[5] = np.nan
    b = np.ones(2000, np.float32)
    b[7] = np.nan
    np.savez(path("twobad.npz"), z_ok=np.ones(10, np.float32), a=a, b=b, c=np.ones(500, np.float32))
    np.savez(path("bad_b.npz"), z_ok=np.ones(10, np.float32), a=np.ones(1000, np.float32), b=b,
             c=np.ones(500, np.float32))
    np.savez(path("bad_a.npz"), z_ok=np.ones(10, np.float32), a=a, b=np.ones(2000, np.float32),
             c=np.ones(500, np.float32))
    out = path("twobad.gcz")
    for inputs in ([path("twobad.npz")], [path("bad_b.npz"), path("bad_a.npz")]):
        p = subprocess.run([EXE, "encode", *inputs, "--preset", "qsgd4", "-o", out], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
        one = p.stderr.decode().strip()
        assert p.returncode == 2 and ("tensor 'a'" in one) == (len(inputs) == 1), one
        for n in (2, 3):
            _, err = mpirun(n, "encode", *inputs, "--preset", "qsgd4", "-o", out, expect=2)
            assert gradcodec_lines(err) == [one], (inputs, n, err)
            assert not os.path.exists(out) and not leftovers(clitest.WORK), os.listdir(clitest.WORK)


def test_refusals_under_mpi():
    out = path("exists.gcz")
    run("encode", STEPS[0], "-o", out, "--quiet")
    before = open(out, "rb").read()
    _, err = mpirun(2, "encode", STEPS[1], "-o", out, expect=1)
    assert len(gradcodec_lines(err)) == 1 and "already exists" in err, err
    assert open(out, "rb").read() == before and not leftovers(clitest.WORK)
    # (mpirun gives each rank a terminal for stdout, even when the job's is a pipe: the MPI
    # refusal must come first, not the terminal one.)
    _, err = mpirun(2, "encode", STEPS[1], "-o", "-", expect=1)
    lines = gradcodec_lines(err)
    assert len(lines) == 1 and "under MPI the container is written to a file" in lines[0], err
    # Standard input reaches rank 0 alone: refused on every rank at once (before, the other
    # ranks read nothing and the job hung, or failed after rank 0 had written its output).
    with open(STEPS[0], "rb") as f:
        snapshot = f.read()
    for args in (("encode", "-", "-o", path("stdin.gcz")), ("decode", "-", "-o", path("stdin_dir") + "/"),
                 ("bench", "-", "--preset", "qsgd4", "--repeat", "1", "--min-time", "0")):
        _, err = mpirun(2, *args, expect=1, stdin=snapshot)
        lines = gradcodec_lines(err)
        assert len(lines) == 1 and "reaches rank 0 alone" in lines[0], (args, err)
    assert not os.path.exists(path("stdin.gcz")) and not os.path.exists(path("stdin_dir"))
    # One rank reads it as one process does.
    mpirun(1, "encode", "-", "-o", path("stdin1.gcz"), "--quiet", stdin=snapshot)
    run("encode", "-", "-o", path("stdin0.gcz"), "--quiet", stdin=snapshot)
    assert open(path("stdin1.gcz"), "rb").read() == open(path("stdin0.gcz"), "rb").read()


def test_decode_to_standard_output_under_mpi():
    # docs/scale-out.md: a one-file decode runs on rank 0 alone; `-o -` goes where mpirun sends
    # the job's output (each rank's stdout is a terminal of mpirun's, so no terminal refusal).
    run("encode", STEPS[0], "-o", path("to_stdout.gcz"), "--quiet", "--force")
    out, err = mpirun(2, "decode", path("to_stdout.gcz"), "-o", "-")
    with open(path("from_mpi.npz"), "wb") as f:
        f.write(out)
    run("decode", path("to_stdout.gcz"), "-o", path("plain.npz"), "--quiet", "--force")
    assert npz_equal(path("from_mpi.npz"), path("plain.npz")), err


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


def tree(directory):
    """{file name: bytes} of every file under `directory` (a missing one: None)."""
    if not os.path.exists(directory):
        return None
    out = {}
    for root, _, files in os.walk(directory):
        for f in files:
            p = os.path.join(root, f)
            out[os.path.relpath(p, directory)] = open(p, "rb").read()
    return out


def owners(c, frame, n):
    """Which rank decodes each tensor of `frame` into DIR/ on n ranks, by name: the largest first,
    each to the rank with the fewest bytes so far, ties to the lower rank (docs/scale-out.md)."""
    tensors = json.loads(run("inspect", c, "--json")[0])["frames"][frame]["tensors"]
    load, own = [0] * n, {}
    for t in sorted(tensors, key=lambda t: -t["input_bytes"]):  # stable: record order among equals
        r = load.index(min(load))
        load[r] += max(t["input_bytes"], 1)
        own[t["name"]] = r
    return [t["name"] for t in tensors], own


def corrupt_record(c, names, out, occurrence=0):
    """A copy of container `c` with one byte of the first stream of each tensor of `names` flipped
    (its record in frame `occurrence`): its checksum fails when that record is decoded."""
    data = bytearray(open(c, "rb").read())
    recs = gcz.Container(data).records(occurrence)
    for name in names:
        rec = next(r for r in recs if r.name == name)
        assert rec.streams[0][2], name  # a stream with a byte to flip
        data[rec.offset] ^= 0x40
    open(out, "wb").write(data)


def test_decode_dir_shares_the_tensors():
    """One frame into DIR/ on 2 and 3 ranks: the ranks share its tensors (the verbose line says
    how), and DIR/ holds the files one process writes, byte for byte: stateless and stateful
    pipelines (ef, powersgd's warm start, tcs), a one-frame container, and frames of a 4-frame
    one chosen with --frame (frame 2 replays frames 0 and 1, frame 3 is a keyframe)."""
    for preset in ("qsgd4", "ef-signsgd", "powersgd-r2", "tcs", "fp16"):
        c = path(f"dir_{preset}.gcz")
        run("encode", *STEPS, "-o", c, "--preset", preset, "--keyframe-interval", "3", "--quiet")
        c1 = path(f"dir1_{preset}.gcz")
        run("encode", STEPS[0], "-o", c1, "--preset", preset, "--quiet")
        for container, frame in ((c1, None), (c, 2), (c, 3), (c, -1)):
            pick = [] if frame is None else ["--frame", frame]
            one = path(f"dir_one_{preset}/")
            run("decode", container, *pick, "-o", one, "--quiet")
            expected = tree(one)
            assert len(expected) == 47, sorted(expected)
            for n in (2, 3):
                many = path(f"dir_np{n}_{preset}/")
                _, err = mpirun(n, "decode", container, *pick, "-o", many, "--verbose")
                lines = [l for l in gradcodec_lines(err) if l.startswith("gradcodec: frame ")]
                assert len(lines) == 1 and f"the tensors on {n} rank(s), the largest share " in lines[0], err
                share = float(lines[0].split("the largest share ")[1].split("%")[0])
                assert 100.0 / n <= share <= {2: 55.0, 3: 40.0}[n], lines[0]
                got = tree(many)
                assert got == expected, f"{preset} frame {frame} on {n} ranks: " + str(
                    sorted(k for k in set(got) | set(expected) if got.get(k) != expected.get(k)))
                shutil.rmtree(many)
            shutil.rmtree(one)
    assert not leftovers(clitest.WORK), os.listdir(clitest.WORK)


def test_decode_dir_failures_leave_nothing():
    """A failure while the ranks share a frame's tensors: one error line, the exit code and
    message one process gives, and DIR/ as it was (absent, or its files untouched)."""
    c = path("dirfail.gcz")
    run("encode", *STEPS, "-o", c, "--preset", "powersgd-r2", "--keyframe-interval", "3", "--quiet")
    names, own2 = owners(c, 2, 2)
    _, own3 = owners(c, 2, 3)
    # A damaged record in frame 0 (replayed for frame 2) of a tensor rank 1 decodes, and another
    # of a later tensor rank 0 decodes: the error is the earlier record's, as for one process.
    on1 = next(t for t in names if own2[t] == 1 and own3[t] == 1)
    later0 = next(t for t in names[names.index(on1) + 1:] if own2[t] == 0 and own3[t] == 0)
    bad = path("dirfail_bad.gcz")
    corrupt_record(c, [on1], path("dirfail_one.gcz"))
    corrupt_record(c, [on1, later0], bad)
    cases = [
        ("damaged", [path("dirfail_one.gcz"), "--frame", "2", "-o", path("dirfail_out/")]),
        ("damaged twice", [bad, "--frame", "2", "-o", path("dirfail_out/")]),
        ("unwritable", [c, "--frame", "2", "-o", path("dirfail_file.npy", "out/")]),
    ]
    open(path("dirfail_file.npy"), "wb").write(b"not a directory")
    for what, args in cases:
        p = subprocess.run([EXE, "decode", *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        one = p.stderr.decode().strip()
        assert p.returncode in (1, 2, 3) and len(one.splitlines()) == 1, (what, p.returncode, one)
        assert what != "damaged" or on1 in one, one
        assert what != "damaged twice" or (on1 in one and later0 not in one), one
        for n in (2, 3):
            _, err = mpirun(n, "decode", *args, expect=p.returncode)
            assert gradcodec_lines(err) == [one], (what, n, err)
            assert not os.path.exists(path("dirfail_out")) and not leftovers(clitest.WORK), os.listdir(clitest.WORK)
    assert open(path("dirfail_file.npy"), "rb").read() == b"not a directory"
    # A tensor's file that exists (without --force), the tensor rank 1 decodes: nothing in DIR/
    # changes; with --force DIR/ gets one process's files and keeps the one that was no tensor's.
    out = path("dirfail_exists/")
    for n in (2, 3):
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        owned = owners(c, 2, n)[1]
        target = next(t for t in names if owned[t] == 1)
        open(os.path.join(out, target + ".npy"), "wb").write(b"mine")
        open(os.path.join(out, "notes.txt"), "wb").write(b"keep")
        before = tree(out)
        p = subprocess.run([EXE, "decode", c, "--frame", "2", "-o", out], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=300)
        assert p.returncode == 1 and tree(out) == before, p.stderr
        _, err = mpirun(n, "decode", c, "--frame", "2", "-o", out, expect=1)
        assert gradcodec_lines(err) == [p.stderr.decode().strip()], err
        assert "already exists" in err and target in err, err
        assert tree(out) == before, sorted(tree(out))
        mpirun(n, "decode", c, "--frame", "2", "-o", out, "--force")
        shutil.rmtree(path("dirfail_ref"), ignore_errors=True)
        run("decode", c, "--frame", "2", "-o", path("dirfail_ref/"), "--quiet")
        assert tree(out) == {**tree(path("dirfail_ref")), "notes.txt": b"keep"}
    assert not leftovers(clitest.WORK) and not leftovers(out), os.listdir(out)


SPEED = ("mbps", "seconds", "time_", "runs", "spread", "speedup")  # measured times and what follows from them


def test_a_failed_multi_frame_decode_leaves_no_new_directory():
    """Several frames into a new DIR/ (DIR/frame000/, ...) shared by 4 ranks, one record damaged
    in the last frame: DIR/ is removed. It was created by whichever rank came first and removed
    by that rank only if the others' frame directories had gone: 2 runs in 3 left it, empty."""
    c = path("mf.gcz")
    run("encode", *STEPS, "-o", c, "--preset", "lossless", "--quiet")
    bad = path("mf_bad.gcz")
    frames = len(json.loads(run("inspect", c, "--json")[0])["frames"])
    names = [t["name"] for t in json.loads(run("inspect", c, "--json")[0])["frames"][frames - 1]["tensors"]]
    corrupt_record(c, names[:1], bad, occurrence=frames - 1)
    out = path("mf_out/")
    for _ in range(6):
        _, err = mpirun(4, "decode", bad, "-o", out, expect=3)
        assert len(gradcodec_lines(err)) == 1 and not os.path.exists(out), (err, tree(out))
    mpirun(4, "decode", c, "-o", out, "--quiet")
    assert sorted(os.listdir(out)) == [f"frame{f:03d}" for f in range(frames)]
    shutil.rmtree(out)


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
