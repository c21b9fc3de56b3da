#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""BM_snapshot (bench/bench_snapshot.cpp) of two builds of gradcodec_bench, alternated.

Usage: ab_snapshot.py OLD_BENCH NEW_BENCH SNAPSHOT [--rounds N] [--presets REGEX] [--timeout S]

Each round runs every BM_snapshot/<preset> (those matching --presets) of one binary, then of the other (which goes first
alternates from round to round), on the same snapshot (GRADCODEC_BENCH_SNAPSHOT). Prints, per
preset, the medians over the rounds of the one-thread and the two-thread encode speeds
(enc_GBps, enc2_GBps: each a median over the run's 15 iterations) and new ÷ old, as a Markdown
table. A run that takes longer than --timeout seconds stops the script.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(exe, snapshot, presets, timeout):
    fd, out = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        subprocess.run([exe, f"--benchmark_filter=BM_snapshot/({presets})/", "--benchmark_min_time=0.01",
                        f"--benchmark_out={out}", "--benchmark_out_format=json"],
                       stdout=subprocess.DEVNULL, check=True, timeout=timeout,
                       env={**os.environ, "GRADCODEC_BENCH_SNAPSHOT": snapshot})
        with open(out) as f:
            data = json.load(f)
    finally:
        os.remove(out)
    rows = {}
    for b in data["benchmarks"]:
        if b.get("error_occurred"):
            sys.exit(f"{exe}: {b['name']}: {b.get('error_message')}")
        rows[b["run_name"].split("/iterations:")[0]] = (b["enc_GBps"], b["enc2_GBps"])
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("snapshot")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--presets", default=".*", help="regular expression on the preset names")
    ap.add_argument("--timeout", type=float, default=300)
    a = ap.parse_args()
    got = {"old": {}, "new": {}}
    for r in range(a.rounds):
        order = ("old", "new") if r % 2 == 0 else ("new", "old")
        for which in order:
            for name, figs in run(getattr(a, which), a.snapshot, a.presets, a.timeout).items():
                got[which].setdefault(name, []).append(figs)
        print(f"round {r + 1} of {a.rounds} done", file=sys.stderr)
    print(f"{a.rounds} rounds; medians over the rounds; GB/s = 10⁹ bytes of input per second\n")
    print("| benchmark | 1 thread old GB/s | new | new ÷ old | 2 threads old GB/s | new | new ÷ old | "
          "2-thread ratio per round |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for name in got["old"]:
        o, n = got["old"][name], got["new"].get(name, [])
        if not n:
            continue
        o1, n1 = statistics.median(x[0] for x in o), statistics.median(x[0] for x in n)
        o2, n2 = statistics.median(x[1] for x in o), statistics.median(x[1] for x in n)
        per = ", ".join(f"{y[1] / x[1]:.3f}" for x, y in zip(o, n))
        print(f"| `{name}` | {o1:.2f} | {n1:.2f} | {n1 / o1:.3f} | {o2:.2f} | {n2:.2f} | {n2 / o2:.3f} | {per} |")


if __name__ == "__main__":
    main()
