#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Container format 1.1 against 1.0 (docs/format.md): size, container overhead, and the CLI's
encode and decode wall time, one thread, the two formats alternating run by run.

    /usr/bin/python3 bench/format_versions.py build/apps/gradcodec [--runs 15] [--work DIR]

Cases: a ResNet-18-sized snapshot (bench/real_gradients.py's model: names and shapes, Gaussian
values) with lossless, topk-1pct and powersgd-r1; the four bundled snapshots as one sequence
with lossless and topk-1pct. Prints one line per case: bytes, overhead bits/param and the median
seconds of each format, and their ratio 1.1/1.0."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def resnet18(out):
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import real_gradients
    rng = np.random.default_rng(0)
    np.savez(out, **{n: (rng.standard_normal(tuple(p.shape)) * 1e-3).astype(np.float32)
                     for n, p in real_gradients.ResNet18().named_parameters()})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("exe")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--work")
    a = ap.parse_args()
    exe = os.path.abspath(a.exe)
    work = a.work or tempfile.mkdtemp(prefix="gcz_formats_")
    r18 = os.path.join(work, "resnet18.npz")
    resnet18(r18)
    bundled = [os.path.join(ROOT, "test_data", "snapshots", f"step_{t:03d}.npz") for t in range(4)]
    cases = [("resnet18", [r18], p) for p in ("lossless", "topk-1pct", "powersgd-r1")] + \
            [("bundled x4", bundled, p) for p in ("lossless", "topk-1pct")]
    for name, inputs, preset in cases:
        times = {(w, v): [] for w in ("enc", "dec") for v in ("1.0", "1.1")}
        for run in range(a.runs):
            for v in (("1.0", "1.1") if run % 2 else ("1.1", "1.0")):
                gcz, out = os.path.join(work, f"o{v}.gcz"), os.path.join(work, f"d{v}.npz")
                t = time.perf_counter()
                subprocess.run([exe, "encode", *inputs, "-o", gcz, "--preset", preset, "-f", "--quiet", "--threads",
                                "1", "--format-version", v], check=True)
                times[("enc", v)].append(time.perf_counter() - t)
                t = time.perf_counter()
                subprocess.run([exe, "decode", gcz, "-o", out, "-f", "--quiet", "--threads", "1"], check=True)
                times[("dec", v)].append(time.perf_counter() - t)
        line = f"{name} {preset}:"
        for v in ("1.0", "1.1"):
            gcz = os.path.join(work, f"o{v}.gcz")
            j = json.loads(subprocess.run([exe, "inspect", gcz, "--json"], check=True, capture_output=True).stdout)
            line += f" {v}: {os.path.getsize(gcz)} B, ovh {j['totals']['bits_per_param_breakdown']['overhead']:.4f};"
        med = {k: statistics.median(x) for k, x in times.items()}
        for w in ("enc", "dec"):
            line += f" {w} {med[(w, '1.0')]:.3f}/{med[(w, '1.1')]:.3f} s ({med[(w, '1.1')] / med[(w, '1.0')]:.3f})"
        print(line, flush=True)


if __name__ == "__main__":
    main()
