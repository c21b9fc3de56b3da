#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""`gradcodec decode -o DIR/` of one frame on 1 process and under `mpirun -np N`, where the ranks
share the frame's tensors (docs/scale-out.md): wall time of each, medians of --rounds interleaved
runs, and a check that every run wrote the same files. Usage: mpi_decode_dir.py GRADCODEC
[--stack FILE] [--ranks 1,2] [--presets qsgd4,powersgd-r2] [--threads 0,1] [--rounds 5]
(--threads 0: the default, every core). Without --stack, writes the synthetic 110-tensor VGG16
stack (bench/peers/make_vgg16.py --scale 4) to a scratch directory."""
import argparse
import filecmp
import os
import shutil
import statistics
import subprocess
import tempfile

from mpi_runs import mpirun, stack, timed


def same_files(a, b):
    names = sorted(os.listdir(a))
    return names == sorted(os.listdir(b)) and all(
        filecmp.cmp(os.path.join(a, n), os.path.join(b, n), shallow=False) for n in names)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gradcodec")
    ap.add_argument("--stack")
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--presets", default="qsgd4,powersgd-r2")
    ap.add_argument("--threads", default="0,1")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="gradcodec_mpi_")
    try:
        snapshot = stack(a.stack, work)
        print(f"input: {snapshot} ({os.path.getsize(snapshot) / 1e6:.1f} MB), medians of {a.rounds} rounds")
        print(f"{'preset':<14}{'runner':<16}{'threads':>8}{'median s':>10}")
        for preset in a.presets.split(","):
            c = os.path.join(work, f"{preset}.gcz")
            subprocess.run([a.gradcodec, "encode", snapshot, "-o", c, "--preset", preset, "--force", "--quiet"],
                           check=True)
            runs = {}
            for runner in ["1 process"] + [f"mpirun -np {n}" for n in a.ranks.split(",")]:
                prefix = [] if runner == "1 process" else mpirun(runner.split()[-1])
                for t in a.threads.split(","):
                    out = os.path.join(work, f"out{len(runs)}") + "/"
                    runs[(runner, t)] = (prefix + [a.gradcodec, "decode", c, "-o", out, "--threads", t, "--quiet"], out)
            times = {k: [] for k in runs}
            for _ in range(a.rounds):  # interleaved, so that load on the machine falls on all alike
                for k, (cmd, out) in runs.items():
                    shutil.rmtree(out, ignore_errors=True)
                    times[k].append(timed(cmd))
            first = next(iter(runs.values()))[1]
            for k, (_, out) in runs.items():
                assert same_files(first, out), f"{preset}: {k} wrote other files"
            for (runner, t), ts in times.items():
                print(f"{preset:<14}{runner:<16}{'all' if t == '0' else t:>8}{statistics.median(ts):>10.3f}")
            for _, out in runs.values():
                shutil.rmtree(out)
        print("every run wrote the same files")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
