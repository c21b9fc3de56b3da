#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""How the snapshot writers scale with the number of tensors: decodes a container of N tiny
tensors (4 float32 values each) to every output format, for N = 10,000 and 100,000, and reports
the time per tensor. A writer is linear when its time per tensor stays the same from 10k to 100k.

    /usr/bin/python3 bench/bench_writers.py [--gradcodec build/apps/gradcodec] [--sizes 10000,100000]
                                            [--repeat 3] [--formats npz,hdf5]
                                            [--out bench/writers_scaling.md]

Each decode is a separate `gradcodec decode --threads 1` process, timed from start to exit (the
median of --repeat runs); the container is made once per N by `gradcodec encode --preset lossless`
from an .npz written with numpy. --out writes the Markdown section that bench/run_performance.py
puts into docs/performance.md."""
import argparse
import datetime
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORMATS = [("npz", "out.npz"), ("safetensors", "out.safetensors"), ("hdf5", "out.h5"), ("npy directory", "out/")]


def run(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gradcodec", default=os.path.join(ROOT, "build", "apps", "gradcodec"))
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--formats", default=",".join(f for f, _ in FORMATS), help="a subset of: %(default)s")
    ap.add_argument("--out", help="write the Markdown section here")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    formats = [(f, name) for f, name in FORMATS if f in a.formats.split(",")]
    exe = os.path.abspath(a.gradcodec)
    rows = {}  # (format, n) -> seconds
    work = tempfile.mkdtemp(prefix="gradcodec-bench-writers-")
    try:
        for n in sizes:
            rng = np.random.default_rng(n)
            src = os.path.join(work, f"in{n}.npz")
            np.savez(src, **{f"t{i:06d}": rng.standard_normal(4).astype(np.float32) for i in range(n)})
            gcz = os.path.join(work, f"in{n}.gcz")
            subprocess.run([exe, "-q", "encode", src, "-o", gcz, "--preset", "lossless", "--threads", "1"], check=True)
            for fmt, name in formats:
                times = []
                for _ in range(a.repeat):
                    out = os.path.join(work, name)
                    times.append(run([exe, "-q", "decode", gcz, "-o", out, "--threads", "1"]))
                    shutil.rmtree(out) if name.endswith("/") else os.remove(out)
                rows[(fmt, n)] = statistics.median(times)
                print(f"{fmt:14s} n={n:7d}  {rows[(fmt, n)]:8.3f} s  {rows[(fmt, n)] / n * 1e6:7.2f} us/tensor",
                      flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    argv = " ".join(sys.argv[1:])
    L = ["## Writers: time per tensor for many tiny tensors (bench/bench_writers.py)\n",
         f"`gradcodec decode --threads 1` of a lossless container of N tensors of 4 float32 values to each "
         f"output format, median of {a.repeat} processes, whole process timed; a linear writer keeps its "
         f"time per tensor as N grows. Run {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, load average "
         f"{os.getloadavg()[0]:.2f} at the end; command `/usr/bin/python3 bench/bench_writers.py"
         f"{' ' + argv if argv else ''}`.\n",
         "| output | " + " | ".join(f"N = {n:,}: s (µs/tensor)" for n in sizes) +
         f" | µs/tensor N = {sizes[-1]:,} / N = {sizes[0]:,} |",
         "|---|" + "---:|" * (len(sizes) + 1)]
    for fmt, _ in formats:
        cells = [f"{rows[(fmt, n)]:.2f} ({rows[(fmt, n)] / n * 1e6:.1f})" for n in sizes]
        growth = (rows[(fmt, sizes[-1])] / sizes[-1]) / (rows[(fmt, sizes[0])] / sizes[0])
        L.append(f"| {fmt} | " + " | ".join(cells) + f" | {growth:.2f} |")
    text = "\n".join(L) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
