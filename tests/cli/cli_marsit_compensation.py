#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Marsit's global compensation over a sequence (Marsit, Wu, He, Guo et al. 2022, Algorithm 1
lines 1, 9-13; docs/merge.md): on real per-worker gradients over 8 frames, the accumulated error
||sum_t mean_t - sum_t merged_t|| / ||sum_t mean_t|| is lower with compensation than without, in
`bench --workers` (every seed) and in `merge --method marsit` of lossless worker containers;
`--full-sync K` merges frames 0, K, ... in full precision; the options are refused where they do
not apply.

The 8 frames are synthesised from the bundled data: frame t of worker m is
S_(t mod 4) + D_((m + t div 4) mod 4), S_s = test_data/snapshots/step_00s (the full-batch gradient
of steps 0, 10, 20, 30) and D_w = worker_w - mean of the 4 workers (worker w's shard deviation at
step 30, test_data/workers). The D_w sum to 0, so the workers' mean of frame t is S_(t mod 4)."""
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
SNAPS = sorted(glob.glob(os.path.join(ROOT, "test_data", "snapshots", "step_*.npz")))
assert len(WORKERS) == 4 and len(SNAPS) == 4, (WORKERS, SNAPS)
M, T = 4, 8


def synthesise():
    w = [dict(np.load(f)) for f in WORKERS]
    s = [dict(np.load(f)) for f in SNAPS]
    names = list(w[0])
    dev = [{n: w[m][n].astype(np.float64) - sum(x[n].astype(np.float64) for x in w) / M for n in names}
           for m in range(M)]
    files = [[None] * M for _ in range(T)]
    for t in range(T):
        for m in range(M):
            g = {n: (s[t % 4][n].astype(np.float64) + dev[(m + t // 4) % M][n]).astype(np.float32) for n in names}
            files[t][m] = path(f"syn_t{t}_w{m}.npz")
            np.savez(files[t][m], **g)
    return names, files


NAMES, FILES = synthesise()
MANIFEST = path("syn_steps.txt")
with open(MANIFEST, "w") as f:
    for t in range(T):
        f.write(" ".join(FILES[t]) + "\n")


def true_means():
    return [{n: sum(np.load(FILES[t][m])[n].astype(np.float64) for m in range(M)) / M for n in NAMES}
            for t in range(T)]


MEANS = true_means()


def acc_err(merged):
    """||sum_t mean_t - sum_t merged_t|| / ||sum_t mean_t|| over every tensor."""
    diff = ref = 0.0
    for n in NAMES:
        sm = sum(MEANS[t][n] for t in range(T))
        sg = sum(merged[t][n].astype(np.float64) for t in range(T))
        diff += float(np.sum((sm - sg) ** 2))
        ref += float(np.sum(sm ** 2))
    return (diff / ref) ** 0.5


def bench(*extra):
    rep = path("bench_" + "_".join(e.strip("-") for e in extra) + ".json")
    run("bench", "--workers", MANIFEST, "--seeds", "3", "--json", rep, "--quiet", *extra)
    r = json.load(open(rep))
    return r, {row["method"]: row for row in r["rows"]}


def test_bench_workers_compensation_lowers_the_accumulated_error():
    on_rep, on = bench()
    off_rep, off = bench("--no-compensation")
    sync_rep, sync = bench("--full-sync", "4")
    assert on_rep["marsit"] == {"compensation": True, "full_sync": 0}
    assert off_rep["marsit"] == {"compensation": False, "full_sync": 0}
    assert sync_rep["marsit"] == {"compensation": True, "full_sync": 4}
    assert len(on_rep["steps"]) == T and on["mean"]["acc_err"] < 1e-6
    print(f"   marsit acc_err over {T} frames, 3 seeds: compensation {on['marsit']['acc_err_per_seed']}, "
          f"none {off['marsit']['acc_err_per_seed']}, full sync every 4 {sync['marsit']['acc_err_per_seed']}")
    print(f"   marsit rel_l2 (per frame): compensation {on['marsit']['rel_l2']:.4f}, none {off['marsit']['rel_l2']:.4f}, "
          f"full sync every 4 {sync['marsit']['rel_l2']:.4f}; ring bits/param: {on['marsit']['ring_bits_per_param']:.3f}, "
          f"{off['marsit']['ring_bits_per_param']:.3f}, {sync['marsit']['ring_bits_per_param']:.3f}")
    print(f"   other methods' acc_err: " + ", ".join(f"{m} {r['acc_err']:.4f}" for m, r in on.items()))
    assert max(on["marsit"]["acc_err_per_seed"]) < min(off["marsit"]["acc_err_per_seed"])
    # Without compensation the methods that do not follow the frames are unchanged.
    for m in ("cascade", "majority", "mean"):
        assert on[m]["acc_err_per_seed"] == off[m]["acc_err_per_seed"]
    # Full syncs: frames 0 and 4 send 32 bits per element per hop.
    d = on_rep["parameters"] // T
    tensors = len(NAMES)
    assert sync["marsit"]["hop_bits"] == [2 * 32 * d + 6 * (d + 32 * tensors)] * (M - 1)
    assert on["marsit"]["hop_bits"] == [T * (d + 32 * tensors)] * (M - 1)


def worker_containers():
    outs = []
    for m in range(M):
        out = path(f"syn_w{m}.gcz")
        run("encode", *[FILES[t][m] for t in range(T)], "-o", out, "--preset", "lossless", "--force", "--quiet")
        outs.append(out)
    return outs


def decode_frames(gcz, tag):
    frames = []
    for t in range(T):
        out = path(f"{tag}_{t}.npz")
        run("decode", gcz, "--frame", t, "-o", out, "--force", "--quiet")
        frames.append(dict(np.load(out)))
    return frames


def test_merge_marsit_of_lossless_workers_compensates():
    ins = worker_containers()
    on, off, sync = path("m_on.gcz"), path("m_off.gcz"), path("m_sync.gcz")
    _, err = run("merge", *ins, "-o", on, "--method", "marsit", "--seed", "3", "--force")
    assert "pipeline 'sign'" in err, err
    run("merge", *ins, "-o", off, "--method", "marsit", "--seed", "3", "--no-compensation", "--force", "--quiet")
    _, err = run("merge", *ins, "-o", sync, "--method", "marsit", "--seed", "3", "--full-sync", "4", "--force")
    assert "pipeline 'raw | zsplit" in err, err  # lossless: the full-precision frames need it
    # The compensation is per tensor: the bytes do not depend on the thread count.
    for opts, ref in (((), on), (("--full-sync", "4"), sync)):
        for threads in (1, 3):
            again = path(f"m_again_{threads}.gcz")
            run("merge", *ins, "-o", again, "--method", "marsit", "--seed", "3", "--threads", threads, *opts,
                "--force", "--quiet")
            assert open(again, "rb").read() == open(ref, "rb").read(), (opts, threads)
    f_on, f_off, f_sync = decode_frames(on, "on"), decode_frames(off, "off"), decode_frames(sync, "sync")
    e_on, e_off, e_sync = acc_err(f_on), acc_err(f_off), acc_err(f_sync)
    print(f"   merge --method marsit over {T} frames: acc_err {e_on:.4f} with compensation, {e_off:.4f} without, "
          f"{e_sync:.4f} with --full-sync 4")
    assert e_on < e_off
    # Frame 0 has no compensation yet: the same bits with and without.
    for n in NAMES:
        assert np.array_equal(f_on[0][n], f_off[0][n])
    # --full-sync 4: frames 0 and 4 are the workers' mean (f32), the others +-eta.
    for t in range(T):
        for n in NAMES:
            if t % 4 == 0:
                assert np.allclose(f_sync[t][n], MEANS[t][n].astype(np.float32), rtol=1e-6, atol=1e-30), (t, n)
            else:
                assert len(np.unique(np.abs(f_sync[t][n]))) == 1, (t, n)


def test_refusals():
    ins = worker_containers()[:2]
    sign = []
    for m in range(2):
        out = path(f"syn_sign{m}.gcz")
        run("encode", FILES[0][m], "-o", out, "--preset", "signsgd", "--force", "--quiet")
        sign.append(out)
    out = path("refused.gcz")
    fails("merge", *sign, "-o", out, "--method", "marsit", "--full-sync", "4", code=1,
          contains="full-precision")
    fails("merge", *ins, "-o", out, "--method", "mean", "--full-sync", "4", code=1, contains="marsit only")
    fails("merge", *ins, "-o", out, "--method", "majority", code=1, contains="not a 1-bit sign pipeline")
    assert not os.path.exists(out)
    fails("bench", "--no-compensation", code=1, contains="--workers")
    # bench --workers follows each tensor over the steps: a step with other tensors is refused.
    short = []
    for m in range(2):
        short.append(path(f"syn_short{m}.npz"))
        z = np.load(FILES[1][m])
        np.savez(short[-1], **{n: z[n] for n in NAMES[1:]})
    man = path("mismatch.txt")
    with open(man, "w") as f:
        f.write(" ".join(FILES[0][:2]) + "\n" + " ".join(short) + "\n")
    fails("bench", "--workers", man, code=2, contains="every step must hold the same tensors")
    # merge likewise: lossless workers whose frame 1 holds other tensors than frame 0.
    odd = []
    for m in range(2):
        odd.append(path(f"syn_odd{m}.gcz"))
        run("encode", FILES[0][m], short[m], "-o", odd[-1], "--preset", "lossless", "--force", "--quiet")
    fails("merge", *odd, "-o", out, "--method", "marsit", "--force", code=2, contains="does not hold frame 0's tensors")
    assert not os.path.exists(out)
    # Sign workers still merge with marsit, frame by frame (the option changes nothing there).
    run("merge", *sign, "-o", out, "--method", "marsit", "--no-compensation", "--force", "--quiet")
    assert os.path.exists(out)


clitest.run_all(globals())
