#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""`gradcodec encode` on 1 process and under `mpirun -np N` (docs/scale-out.md): wall time of
each, medians of --rounds runs in this one script, and a check that every run wrote the same
bytes. Usage: mpi_encode.py GRADCODEC [--stack FILE] [--ranks 1,2,3] [--presets lossless,topk-1pct]
[--threads 1] [--rounds 3]. Without --stack, writes the synthetic 110-tensor VGG16 stack
(bench/peers/make_vgg16.py --scale 4) to a scratch directory."""
import argparse
import filecmp
import os
import shutil
import statistics
import tempfile

from mpi_runs import mpirun, stack, timed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gradcodec")
    ap.add_argument("--stack")
    ap.add_argument("--ranks", default="1,2,3")
    ap.add_argument("--presets", default="lossless,topk-1pct")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="gradcodec_mpi_")
    try:
        snapshot = stack(a.stack, work)
        print(f"input: {snapshot} ({os.path.getsize(snapshot) / 1e6:.1f} MB), --threads {a.threads}, "
              f"medians of {a.rounds} rounds")
        print(f"{'preset':<14}{'runner':<12}{'median s':>10}{'speed-up':>10}")
        for preset in a.presets.split(","):
            base = [a.gradcodec, "encode", snapshot, "--preset", preset, "--threads", a.threads, "--force", "--quiet"]
            one = os.path.join(work, "one.gcz")
            runs = {"1 process": [base + ["-o", one]]}
            for n in a.ranks.split(","):
                runs[f"mpirun -np {n}"] = [mpirun(n) + base + ["-o", os.path.join(work, f"np{n}.gcz")]]
            times = {k: [] for k in runs}
            for _ in range(a.rounds):  # interleaved, so that load on the machine falls on all alike
                for k, (cmd,) in runs.items():
                    times[k].append(timed(cmd))
            for n in a.ranks.split(","):
                assert filecmp.cmp(one, os.path.join(work, f"np{n}.gcz"), shallow=False), f"{preset}: np {n} differs"
            t1 = statistics.median(times["1 process"])
            for k, ts in times.items():
                print(f"{preset:<14}{k:<12}{statistics.median(ts):>10.3f}{t1 / statistics.median(ts):>9.2f}x")
        print("every run wrote the same bytes")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
