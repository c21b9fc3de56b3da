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
    ]


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
        bird_plus = rows[-1]["throughput_mbps"]
        for name, r in zip(names, rows):
            def cr(k):
                return "-" if r.get(k) is None else f"{r[k]:.1f}"
            print(f"| {name} | {100 * r['kept_fraction']:.3f} | {cr('index_cr')} | {cr('value_cr')} | {cr('overall_cr')} "
                  f"| {r['throughput_mbps']:.1f} | {bird_plus / r['throughput_mbps']:.2f} |")


if __name__ == "__main__":
    sys.exit(main())
