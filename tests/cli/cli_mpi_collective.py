#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""`mpirun -np N gradcodec bench --collective auto --workers ...` (docs/scale-out.md): each rank is
one worker; the aggregate of every row and step equals what `gradcodec merge` computes from the
workers' containers (each `encode --seed r`): --method marsit for the one-bit ring rows, mean for
the allgather rows, bit for bit; the fp32 and fp16 all-reduce baselines equal the mean up to their
own rounding. The report's byte counts follow their definitions; the refusals are one line each.
Runs Debian's Open MPI with --oversubscribe: 3 ranks on a 2-core machine."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
import gcz
from clitest import fails, path, run
from cli_mpi import SRC, gradcodec_lines, mpirun

WORKERS = [os.path.join(SRC, "test_data", "workers", f"worker_{m}.npz") for m in range(4)]
# Two steps of three workers: rank r reads STEPS_OF[s][r] (a manifest lists one step per line).
STEPS_OF = [WORKERS[0:3], WORKERS[1:4]]
# A ring row, a stateful ring row (error feedback), a stateless and two stateful allgather rows.
ROWS = {"signsgd": "marsit", "ef-signsgd": "marsit", "qsgd4": "mean", "dgc": "mean", "powersgd-r2": "mean"}


def manifest():
    m = path("steps.txt")
    with open(m, "w") as f:
        for step in STEPS_OF:
            f.write(" ".join(step) + "\n")
    return m


def decoded_frame(container, name, frame):
    out = path(f"{name}.npz")
    run("decode", container, "-o", out, "--frame", str(frame), "--force", "--quiet")
    z = np.load(out)
    return {k: z[k] for k in z.files}


def test_the_aggregates_equal_merge_of_the_workers_containers():
    steps = manifest()
    agg = path("aggregates")
    report = path("collective.json")
    args = ["bench", "--collective", "auto", "--workers", steps, "--repeat", "2", "--json", report,
            "--aggregates", agg, "--force"]
    for p in ROWS:
        args += ["--preset", p]
    args += ["--preset", "fp16", "--pipeline", "ef | bf16"]  # casts: summed by all-reduce
    out, _ = mpirun(3, *args)
    assert b"allreduce-fp32" in out and b"powersgd-r2" in out
    rep = json.load(open(report))
    assert rep["schema"] == "gradcodec-bench-collective/1" and rep["ranks"] == 3 and rep["steps"] == 2
    rows = rep["rows"]
    assert [r["name"] for r in rows] == ["allreduce-fp32", "allreduce-fp16", *ROWS, "fp16", "ef | bf16"]
    assert [r["collective"] for r in rows] == ["allreduce", "allreduce", "ring", "ring", "allgather", "allgather",
                                               "allgather", "allreduce", "allreduce"]
    # The true mean of each step, from the raw worker files.
    truth = []
    for step in STEPS_OF:
        zs = [np.load(f) for f in step]
        truth.append({k: np.mean([z[k].astype(np.float64) for z in zs], axis=0) for k in zs[0].files})
    params = sum(v.size for v in truth[0].values())
    assert rep["parameters"] == params

    for k, (preset, method) in enumerate(ROWS.items(), start=2):
        # Worker r's container: its inputs of both steps, as two frames, seed r.
        workers = []
        for r in range(3):
            w = path(f"{preset}_w{r}.gcz")
            run("encode", STEPS_OF[0][r], STEPS_OF[1][r], "--preset", preset, "--seed", str(r),
                "--keyframe-interval", "0", "-o", w, "--force", "--quiet")
            workers.append(w)
        merged = path(f"{preset}_merged.gcz")
        run("merge", *workers, "-o", merged, "--method", method, "--force", "--quiet")
        ours = rows[k]["aggregate"]
        assert os.path.basename(ours) == f"row{k}.gcz"
        for f in range(2):
            a = decoded_frame(ours, f"{preset}_ours{f}", f)
            b = decoded_frame(merged, f"{preset}_merge{f}", f)
            assert a.keys() == b.keys() == truth[f].keys()
            for name in a:
                assert np.array_equal(a[name].view(np.uint32), b[name].view(np.uint32)), (preset, f, name)
        # The payload: the ring's packed bits and one f64 per tensor; allgather's records, each
        # after a u64 length (the records a container holds, as `inspect` counts them).
        if method == "marsit":
            expect = sum((v.size + 7) // 8 + 8 for v in truth[0].values())
            assert rows[k]["payload_bytes"] == expect, (preset, rows[k]["payload_bytes"], expect)
            assert rows[k]["sent_bytes"] == 2 * 2 / 3 * expect
        else:
            # The records sent are the Compressor's, each a 1.0 tensor record (TREC) on its own:
            # their sizes are those a 1.0 container holds, so the workers are encoded again with
            # --format-version 1.0 for the count (the same records as in their 1.1 containers).
            total = 0
            for r, w in enumerate(workers):
                w10 = path(f"{preset}_w{r}_10.gcz")
                run("encode", STEPS_OF[0][r], STEPS_OF[1][r], "--preset", preset, "--seed", str(r),
                    "--keyframe-interval", "0", "-o", w10, "--force", "--quiet", "--format-version", "1.0")
                c10, c11 = (gcz.Container(open(x, "rb").read()) for x in (w10, w))
                assert (c10.minor, c11.minor) == (0, 1)
                assert [[x.key() for x in c10.records(f)] for f in range(2)] == \
                    [[x.key() for x in c11.records(f)] for f in range(2)]
                info = json.loads(run("inspect", w10, "--json")[0])
                assert sum(fr["record_bytes"] for fr in info["frames"]) == sum(x.size for x in c10.records())
                total += sum(fr["record_bytes"] for fr in info["frames"]) + 8 * len(truth[0]) * 2
            assert rows[k]["payload_bytes"] == total / 6, (preset, rows[k]["payload_bytes"], total / 6)
            assert rows[k]["sent_bytes"] == 2 * rows[k]["payload_bytes"]
        assert rows[k]["bits_per_param"] == 8 * rows[k]["payload_bytes"] / params

    # The baselines: 4 and 2 bytes per parameter; their aggregates are the mean up to the
    # rounding of the sums: fp32's two additions, and fp16's five roundings to binary16 (three workers' values
    # and two additions, each within half a spacing of the sum of the |values|), divided by 3.
    assert rows[0]["payload_bytes"] == 4 * params and rows[1]["payload_bytes"] == 2 * params
    for f in range(2):
        fp32 = decoded_frame(rows[0]["aggregate"], f"base0_{f}", f)
        fp16 = decoded_frame(rows[1]["aggregate"], f"base1_{f}", f)
        zs = [np.load(w) for w in STEPS_OF[f]]
        for name, want in truth[f].items():
            total = sum(np.abs(z[name].astype(np.float64)) for z in zs)
            bound = np.spacing(total.astype(np.float32)).astype(np.float64) * 2 / 3 + np.spacing(np.abs(want).astype(np.float32))
            assert np.all(np.abs(fp32[name] - want) <= bound), (f, name)
            bound = np.spacing(total.astype(np.float16)).astype(np.float64) * 2.5 / 3 + 1e-6 * np.abs(want)
            assert np.all(np.abs(fp16[name] - want) <= bound), (f, name)
    assert rows[0]["rel_l2"] < 1e-6 and 1e-6 < rows[1]["rel_l2"] < 1e-2
    # The fp16 preset's records are the gradients in binary16: its all-reduce is the baseline's,
    # bit for bit. ef | bf16 sums bfloat16 values (2 bytes each) and stays near the mean.
    fp16_row, bf16_row = rows[7], rows[8]
    assert fp16_row["payload_bytes"] == 2 * params and bf16_row["payload_bytes"] == 2 * params
    assert fp16_row["sent_bytes"] == 2 * 2 / 3 * 2 * params
    for f in range(2):
        a = decoded_frame(fp16_row["aggregate"], f"fp16row{f}", f)
        b = decoded_frame(rows[1]["aggregate"], f"base1b_{f}", f)
        assert all(np.array_equal(a[n].view(np.uint32), b[n].view(np.uint32)) for n in a)
    assert fp16_row["rel_l2"] == rows[1]["rel_l2"] and 1e-4 < bf16_row["rel_l2"] < 5e-2, bf16_row["rel_l2"]
    for r in rows:
        assert r["step_seconds"] > 0 and r["transfer_seconds"] > 0
        assert abs(r["speedup_fp32"] - rows[0]["step_seconds"] / r["step_seconds"]) < 1e-12
        assert abs(r["speedup_fp16"] - rows[1]["step_seconds"] / r["step_seconds"]) < 1e-12
    # rel_l2 against the true mean, from the aggregate written.
    agg_qsgd = [decoded_frame(rows[4]["aggregate"], f"q{f}", f) for f in range(2)]
    err = sum(np.sum((agg_qsgd[f][n].astype(np.float64) - truth[f][n]) ** 2) for f in range(2) for n in truth[f])
    ref = sum(np.sum(truth[f][n] ** 2) for f in range(2) for n in truth[f])
    assert abs(rows[4]["rel_l2"] - np.sqrt(err / ref)) < 1e-9 * max(1, rows[4]["rel_l2"])


def test_refusals():
    steps = manifest()
    glob3 = os.path.join(SRC, "test_data", "workers", "worker_[012].npz")
    # One rank per worker.
    _, err = mpirun(2, "bench", "--collective", "auto", "--workers", glob3, "--preset", "qsgd4", expect=1)
    assert len(gradcodec_lines(err)) == 1 and "mpirun -np 3" in err, err
    # Alone, there is no aggregation to measure.
    fails("bench", "--collective", "auto", "--workers", glob3, "--preset", "qsgd4", code=1, contains="mpirun")
    fails("bench", "--collective", "ring", "--workers", glob3, code=1, contains="auto")
    fails("bench", "--aggregates", path("x"), "--workers", glob3, code=1, contains="--collective")
    fails("bench", WORKERS[0], "--collective", "auto", "--workers", glob3, code=1, contains="INPUT")
    # Every row sends every tensor through its pipeline: --nonfinite raw does not apply.
    fails("bench", "--collective", "auto", "--workers", glob3, "--nonfinite", "raw", code=1,
          contains="--nonfinite raw")
    # Values a row's pipeline cannot code (beyond float16's range): exit 2, one line, advice this
    # command can follow (not --nonfinite=raw, which it refuses).
    big = []
    for m in range(3):
        z = np.load(WORKERS[m])
        f = path(f"big_worker_{m}.npz")
        np.savez(f, **{k: (z[k] * np.float32(1e9)).astype(z[k].dtype) if z[k].dtype.kind == "f" else z[k]
                       for k in z.files})
        big.append(f)
    big_steps = path("big_steps.txt")
    with open(big_steps, "w") as f:
        f.write(" ".join(big) + "\n")
    _, err = mpirun(3, "bench", "--collective", "auto", "--workers", big_steps, "--pipeline", "fp16", expect=2)
    assert len(gradcodec_lines(err)) == 1 and "float16" in err, err
    assert "bench --collective sends no tensor raw" in err and "--nonfinite" not in err, err
    # A worker whose tensors differ from the others': exit 2, one line, no report.
    odd = path("odd_worker.npz")
    z = np.load(WORKERS[2])
    np.savez(odd, **{("renamed_" + k if i == 0 else k): z[k] for i, k in enumerate(z.files)})
    bad = path("bad_steps.txt")
    with open(bad, "w") as f:
        f.write(f"{WORKERS[0]} {WORKERS[1]} {odd}\n")
    report = path("refused.json")
    if os.path.exists(report):
        os.remove(report)
    _, err = mpirun(3, "bench", "--collective", "auto", "--workers", bad, "--preset", "qsgd4", "--json", report,
                    expect=2)
    assert len(gradcodec_lines(err)) == 1 and "odd_worker.npz" in err, err
    assert not os.path.exists(report)


if __name__ == "__main__":
    clitest.run_all(globals())
