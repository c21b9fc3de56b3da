#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""gradcodec merge and bench --workers end to end (issue 9, docs/merge.md): merging the bundled
workers' sign containers gives a container plain decode reads; every refusal is one error line
with the right exit code and leaves no output file; the multi-worker bench reports marsit's sign
matching rate above cascade's on the bundled workers."""
import glob
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import fails, path, run

ROOT = sys.argv[2]
WORKERS = sorted(glob.glob(os.path.join(ROOT, "test_data", "workers", "worker_*.npz")))
assert len(WORKERS) == 4, WORKERS


def encode_workers(preset, tag):
    outs = []
    for i, w in enumerate(WORKERS):
        out = path(f"{tag}_{i}.gcz")
        run("encode", w, "-o", out, "--preset", preset, "--seed", i, "--force", "--quiet")
        outs.append(out)
    return outs


SIGN = encode_workers("signsgd", "sign")
LOSSLESS = encode_workers("lossless", "lossless")


def decode(gcz, name):
    out = path(name)
    run("decode", gcz, "-o", out, "--force", "--quiet")
    return dict(np.load(out))


def test_marsit_of_bundled_sign_workers_decodes():
    out = path("marsit.gcz")
    _, err = run("merge", *SIGN, "-o", out, "--method", "marsit", "--seed", "3", "--force")
    assert "marsit of 4 workers" in err and "the ring's 3 hops send" in err, err
    _, err = run("merge", *SIGN[:2], "-o", path("two.gcz"), "--method", "marsit", "--force")
    assert "the ring's 1 hop sends" in err, err
    merged = decode(out, "marsit.npz")
    raw = [dict(np.load(w)) for w in WORKERS]
    assert sorted(merged) == sorted(raw[0])
    agree_total = agree_same = 0
    for k, v in merged.items():
        assert v.shape == raw[0][k].shape and v.dtype == np.float32
        # signsgd = sign(scale=none): every worker's scale is 1, so eta = 1 and values are +-1.
        assert np.all(np.abs(v) == 1.0), k
        signs = np.stack([r[k] >= 0 for r in raw])
        unanimous = np.all(signs == signs[0], axis=0)
        assert np.all((v >= 0)[unanimous] == signs[0][unanimous]), k
    inspect, _ = run("inspect", out, "--json")
    assert json.loads(inspect)["pipeline"] == "sign"


def test_same_seed_same_bytes_any_thread_count():
    a, b = path("t1.gcz"), path("t2.gcz")
    run("merge", *SIGN, "-o", a, "--method", "marsit", "--seed", "9", "--threads", "1", "--force", "--quiet")
    run("merge", *SIGN, "-o", b, "--method", "marsit", "--seed", "9", "--threads", "2", "--force", "--quiet")
    assert open(a, "rb").read() == open(b, "rb").read()


def test_mean_is_the_average_and_reencodes():
    out = path("mean.gcz")
    run("merge", *LOSSLESS, "-o", out, "--method", "mean", "--force", "--quiet")
    merged = decode(out, "mean.npz")
    raw = [dict(np.load(w)) for w in WORKERS]
    for k, v in merged.items():
        expect = (sum(r[k].astype(np.float64) for r in raw) / 4).astype(np.float32)
        assert np.array_equal(v, expect), k
    run("merge", *LOSSLESS, "-o", path("mean_fp16.gcz"), "--method", "mean", "--preset", "fp16", "--force", "--quiet")
    assert os.path.getsize(path("mean_fp16.gcz")) < os.path.getsize(out)


def test_majority_and_cascade_write_sign_containers():
    for method, inputs in (("majority", SIGN), ("cascade", LOSSLESS)):
        out = path(f"{method}.gcz")
        run("merge", *inputs, "-o", out, "--method", method, "--force", "--quiet")
        merged = decode(out, f"{method}.npz")
        for k, v in merged.items():
            if v.size > 1:  # (a 1-element tensor may be stored raw; still +-scale)
                assert len(np.unique(np.abs(v))) == 1, (method, k)


def refuse(args, code, contains, out):
    if os.path.exists(out):
        os.remove(out)
    err = fails("merge", *args, "-o", out, code=code, contains=contains)
    assert not os.path.exists(out), f"{out} left behind"
    leftovers = [f for f in os.listdir(os.path.dirname(out)) if f.startswith(os.path.basename(out)) and f != os.path.basename(out)]
    assert not leftovers, leftovers
    print("   ", err)


def test_refusals():
    out = path("refused.gcz")
    rng = np.random.default_rng(0)
    a = {"w": rng.standard_normal((8, 4)).astype(np.float32), "b": rng.standard_normal(4).astype(np.float32)}
    np.savez(path("a.npz"), **a)
    np.savez(path("renamed.npz"), w=a["w"], c=a["b"])
    np.savez(path("reshaped.npz"), w=a["w"].reshape(4, 8), b=a["b"])
    for n in ("a", "renamed", "reshaped"):
        run("encode", path(f"{n}.npz"), "-o", path(f"{n}.gcz"), "--preset", "signsgd", "--force", "--quiet")
    run("encode", path("a.npz"), path("a.npz"), "-o", path("a2.gcz"), "--preset", "signsgd", "--force", "--quiet")
    run("encode", path("a.npz"), "-o", path("a_topk.gcz"), "--preset", "topk-1pct", "--force", "--quiet")
    refuse([path("a.gcz"), "--method", "marsit"], 1, "at least 2", out)
    refuse([path("a.gcz"), path("renamed.gcz"), "--method", "marsit"], 2, "'c'", out)
    refuse([path("a.gcz"), path("reshaped.gcz"), "--method", "mean"], 2, ["[8, 4]", "[4, 8]"], out)
    refuse([path("a.gcz"), path("a2.gcz"), "--method", "majority"], 2, "frame(s)", out)
    refuse([path("a.gcz"), path("a_topk.gcz"), "--method", "marsit"], 1, ["not a 1-bit sign pipeline", "topk"], out)
    refuse([*LOSSLESS, "--method", "majority"], 1, "not a 1-bit sign pipeline", out)
    refuse([*SIGN, "--method", "average"], 1, "unknown merge method", out)
    refuse([*SIGN, "--method", "marsit", "--preset", "fp16"], 1, "--method mean only", out)
    refuse([*SIGN, "--method", "mean", "--eta", "2"], 1, "--eta", out)
    refuse([path("a.gcz"), path("missing.gcz"), "--method", "mean"], 2, "missing.gcz", out)
    # An existing output is never clobbered without --force.
    open(out, "wb").write(b"keep")
    fails("merge", *SIGN, "-o", out, "--method", "marsit", code=1, contains="exists")
    assert open(out, "rb").read() == b"keep"


def test_nonfinite_refusals_name_their_cause():
    # Finite workers whose float32 ring sum overflows: cascade says so (before, the encoder's
    # message advised --nonfinite=raw, which merge does not take); mean, summing in double, merges them.
    big, nan = [], []
    for k in range(3):
        b = np.ones(16, np.float32)
        if k == 1:
            b[3] = np.nan
        np.savez(path(f"big{k}.npz"), a=np.full(64, 2.5e38, np.float32), b=np.ones(16, np.float32))
        np.savez(path(f"nan{k}.npz"), a=np.ones(64, np.float32), b=b)
        for tag, lst in (("big", big), ("nan", nan)):
            run("encode", path(f"{tag}{k}.npz"), "-o", path(f"{tag}{k}.gcz"), "--preset", "lossless", "--force", "--quiet")
            lst.append(path(f"{tag}{k}.gcz"))
    out = path("nonfinite.gcz")
    refuse([*big, "--method", "cascade"], 2, ["tensor 'a'", "exceed float32's range", "--method mean"], out)
    run("merge", *big, "-o", out, "--method", "mean", "--force", "--quiet")
    assert np.all(decode(out, "big_mean.npz")["a"] == np.float32(2.5e38))
    # A worker's NaN is named with its container, for the sign pipeline of cascade and for a lossy mean.
    os.remove(out)
    for extra in (["--method", "cascade"], ["--method", "mean", "--preset", "signsgd"]):
        err = fails("merge", *nan, "-o", out, *extra, code=2, contains=["tensor 'b'", "nan1.gcz", "NaN/Inf"])
        assert "--nonfinite" not in err and not os.path.exists(out), err
    # A lossless mean keeps it, as the inputs held it.
    run("merge", *nan, "-o", out, "--method", "mean", "--force", "--quiet")
    assert np.isnan(decode(out, "nan_mean.npz")["b"][3])
    # Finite merged values a lossy stage cannot represent (qsgd's bucket norm beyond float32):
    # the encoder's refusal advised --nonfinite=raw, which merge does not take; it names its own way.
    os.remove(out)
    err = fails("merge", *big, "-o", out, "--method", "mean", "--preset", "qsgd4", code=2,
                contains=["tensor 'a'", "beyond float32's range", "--preset lossless"])
    assert "--nonfinite" not in err and not os.path.exists(out), err
    # bench --workers printed figures for both (cascade's rel_l2 23.3 on the overflow, 177 with
    # the NaN): now one error line each.
    fails("bench", "--workers", path("nan*.npz"), code=2, contains=["nan1.npz", "tensor 'b'", "NaN/Inf"])
    fails("bench", "--workers", path("big*.npz"), code=2, contains=["tensor 'a'", "cascade", "exceed float32's range"])


def test_corrupt_input_exit_3():
    bad = path("bad.gcz")
    data = bytearray(open(SIGN[1], "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(bad, "wb").write(bytes(data))
    out = path("from_bad.gcz")
    fails("merge", SIGN[0], bad, "-o", out, "--method", "marsit", code=3)
    assert not os.path.exists(out)


def test_bench_workers_marsit_beats_cascade():
    rep_path = path("workers.json")
    stdout, _ = run("bench", "--workers", os.path.join(ROOT, "test_data", "workers", "worker_*.npz"),
                    "--seeds", "5", "--json", rep_path, "--quiet")
    text = stdout.decode()
    print(text)
    assert "match_rate = " in text and "rel_l2 = " in text and "hop h = " in text
    rep = json.load(open(rep_path))
    assert rep["schema"] == "gradcodec-bench-workers/1"
    assert rep["workers"] == 4 and rep["parameters"] == 111796
    rows = {r["method"]: r for r in rep["rows"]}
    assert list(rows) == ["marsit", "cascade", "majority", "mean"]
    print("   match_rate: " + ", ".join(f"{m} {r['match_rate']:.4f}" for m, r in rows.items()))
    print("   rel_l2:     " + ", ".join(f"{m} {r['rel_l2']:.4f}" for m, r in rows.items()))
    assert rows["marsit"]["match_rate_min"] > rows["cascade"]["match_rate_max"]
    assert rows["mean"]["match_rate"] == 1.0 and rows["mean"]["rel_l2"] < 1e-6
    # 1 bit per element (+ 32 per tensor) for marsit and cascade at every hop; majority grows.
    assert rows["marsit"]["hop_bits"] == rows["cascade"]["hop_bits"]
    tensors = len(np.load(WORKERS[0]).files)
    assert rows["marsit"]["hop_bits"] == [111796 + 32 * tensors] * 3
    assert rows["majority"]["hop_bits"] == [111796 * b + 32 * tensors for b in (1, 2, 2)]
    assert rows["majority"]["hop_bits"][2] > rows["majority"]["hop_bits"][0]
    assert rows["mean"]["hop_bits"] == [32 * 111796] * 3


def test_bench_workers_manifest_and_refusals():
    man = path("steps.txt")
    with open(man, "w") as f:
        f.write("# two steps, the same workers in two ring orders\n")
        f.write(" ".join(WORKERS) + "\n")
        f.write(" ".join(reversed(WORKERS)) + "\n")
    rep_path = path("man.json")
    run("bench", "--workers", man, "--json", rep_path, "--quiet")
    rep = json.load(open(rep_path))
    assert len(rep["steps"]) == 2 and rep["parameters"] == 2 * 111796
    fails("bench", "--workers", path("nothing_*.npz"), code=2, contains="no file matches")
    fails("bench", "--workers", WORKERS[0], code=1, contains="at least 2")
    fails("bench", "--workers", os.path.join(ROOT, "test_data", "workers", "worker_*.npz"), "--preset", "fp16",
          code=1, contains="--workers")


clitest.run_all(globals())
