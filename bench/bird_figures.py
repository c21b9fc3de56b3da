#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""BIRD+'s comparison (Wu et al. 2023, §IV, Figures 10 and 11) on the user's gradients: SBC, SKC,
DR, SMT, BIRD and BIRD+ at one kept fraction, with their index CR, value CR and overall CR per
selected parameter (Fig. 10) and compression throughput (alpha - beta) / T (Fig. 11), from
`gradcodec bench --json` (docs/bench.md), next to the paper's ranges.

    bench/bird_figures.py GRADCODEC SNAPSHOT... [--keep 0.01] [--repeat 3] [--min-time 0.2]

Each SNAPSHOT is measured on its own (one model's gradients: .npz, .safetensors, ...). The
top-k based methods keep the fraction --keep; BIRD+ is given the same target (keep=); BIRD has
no such knob and keeps what its two sampling stages keep (its kept% is shown)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

# The paper's ranges (§IV-B/C, Figures 10-11), quoted for comparison.
PAPER = """The paper's ranges (BIRD+ §IV, Figures 10 and 11): index CR of SBC/SKC/DR 1.2-4.1x; SKC's value CR
29.6-5,024.5x; BIRD+'s index CR 39.6-5,078.7x; BIRD+'s compression throughput 2.98-149.62x the others'."""


def methods(keep):
    return [
        ("SBC", f"topk(ratio={keep}, by_sign=true) | sbc | golomb"),
        ("SKC", f"topk(ratio={keep}) | skcompress | deltabin"),
        ("DR", f"topk(ratio={keep}) | raw | bloom(fp_aware=true)"),
        ("SMT", f"smartidx(ratio={keep}) | raw"),
        ("BIRD", "bird | sign | plain | lzma(stream=index)"),
        ("BIRD+", f"bird+(keep={keep}) | sign | plain | lzma(stream=index)"),
        ("BIRD+ golomb", f"bird+(keep={keep}) | sign | golomb"),  # the bird+ preset's index code
    ]


def index_bound(exe, snapshot, keep):
    """{block size m: (kept parameters, log2 C(B, K) summed over the split tensors of that m)}:
    the bits an index code needs when the K kept blocks of a tensor's B are a uniform choice
    (what BIRD+'s second stage makes of its candidates), so 32 * kept / bits is the best index CR
    per selected parameter for such choices (no per-tensor header counted). The kept blocks are
    read back from a decoded container (a kept block decodes to +-S, S > 0)."""
    import math
    import numpy as np
    with tempfile.TemporaryDirectory() as d:
        gcz, npz = os.path.join(d, "b.gcz"), os.path.join(d, "b.npz")
        subprocess.run([exe, "encode", snapshot, "-o", gcz, "--pipeline", methods(keep)[-1][1], "--quiet"], check=True)
        subprocess.run([exe, "decode", gcz, "-o", npz, "--quiet"], check=True)
        by_m = {}
        with np.load(npz) as z:
            for name in z.files:
                a = z[name]
                if a.ndim < 2:
                    continue  # vectors are not split (docs/stages.md "bird")
                m = a.shape[2] * a.shape[3] if a.ndim == 4 else a.shape[-1]
                blocks = a.reshape(-1, m)
                b, k = blocks.shape[0], int(np.count_nonzero(np.any(blocks != 0, axis=1)))
                if k == 0 or m == 0:
                    continue
                bits = (math.lgamma(b + 1) - math.lgamma(k + 1) - math.lgamma(b - k + 1)) / math.log(2)
                kept, total = by_m.get(m, (0, 0.0))
                by_m[m] = (kept + k * m, total + bits)
    return by_m


def measure(exe, snapshot, keep, repeat, min_time):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "bench.json")
        cmd = [exe, "bench", snapshot, "--repeat", str(repeat), "--min-time", str(min_time), "--json", out, "--quiet"]
        for _, p in methods(keep):
            cmd += ["--pipeline", p]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=3600)
        with open(out) as f:
            report = json.load(f)
    return cmd, report["rows"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gradcodec")
    ap.add_argument("snapshots", nargs="+")
    ap.add_argument("--keep", type=float, default=0.01)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=0.2)
    a = ap.parse_args()
    print(PAPER)
    for snap in a.snapshots:
        cmd, rows = measure(a.gradcodec, snap, a.keep, a.repeat, a.min_time)
        names = [m for m, _ in methods(a.keep)]
        assert len(rows) == len(names)
        print(f"\n{snap}: {rows[0]['parameters']:,} parameters, keep {a.keep}")
        print("command: " + " ".join(f"'{c}'" if " " in c else c for c in cmd[:1] + ["bench"] + cmd[2:]))
        print("| method | kept % | index CR | value CR | overall CR | throughput MB/s | BIRD+ throughput / this |")
        print("|---|---|---|---|---|---|---|")
        bird_plus = rows[names.index("BIRD+")]["throughput_mbps"]
        for name, r in zip(names, rows):
            def cr(k):
                return "-" if r.get(k) is None else f"{r[k]:.1f}"
            print(f"| {name} | {100 * r['kept_fraction']:.3f} | {cr('index_cr')} | {cr('value_cr')} | {cr('overall_cr')} "
                  f"| {r['throughput_mbps']:.1f} | {bird_plus / r['throughput_mbps']:.2f} |")
        by_m = index_bound(a.gradcodec, snap, a.keep)
        kept, bits = sum(k for k, _ in by_m.values()), sum(b for _, b in by_m.values())
        if bits > 0:
            parts = ", ".join(f"m = {m}: {k:,} kept, {32 * k / b:.1f}x" for m, (k, b) in sorted(by_m.items()) if b > 0)
            print(f"\nBIRD+'s index CR for a uniform choice (log2 C(B, K) bits per split tensor): {32 * kept / bits:.1f}x "
                  f"({parts})")


if __name__ == "__main__":
    sys.exit(main())
