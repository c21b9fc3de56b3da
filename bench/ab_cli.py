#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Two builds of the gradcodec CLI, alternated: encode and decode of one snapshot.

Usage: ab_cli.py OLD_GRADCODEC NEW_GRADCODEC SNAPSHOT [--rounds N] [--threads T] [--preset P]
                 [--dir D] [--timeout S]

Each round runs `encode SNAPSHOT -o D/x.gcz --preset P --threads T`, then `decode D/x.gcz -o
D/x.safetensors --threads T`, with one build, then the other (which goes first alternates from
round to round). Every command is timed alone (wall time of the process, measured here) and its
peak RSS read from /usr/bin/time. Prints whether the two builds wrote the same container and
decoded the same file, then per measure the medians over the rounds and new ÷ old, as a Markdown
table. D defaults to /dev/shm (no disk in the timings). A command that fails or takes longer than
--timeout seconds stops the script.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def timed(cmd, timeout):
    t0 = time.perf_counter()
    out = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    if out.returncode:
        sys.exit(f"{' '.join(cmd)}: exit {out.returncode}: {out.stderr.strip()}")
    return wall, int(out.stderr.strip().splitlines()[-1]) * 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("snapshot")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", default="1")
    ap.add_argument("--preset", default="lossless")
    ap.add_argument("--dir", default="/dev/shm")
    ap.add_argument("--timeout", type=float, default=300)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ab_cli_", dir=a.dir)
    measures = ("encode s", "decode s", "encode peak RSS MB", "decode peak RSS MB")
    res = {side: {m: [] for m in measures} for side in ("old", "new")}
    try:
        for r in range(a.rounds):
            sides = [("old", a.old), ("new", a.new)]
            for side, exe in sides if r % 2 == 0 else sides[::-1]:
                gcz, out = os.path.join(work, side + ".gcz"), os.path.join(work, side + ".safetensors")
                for f in (gcz, out):
                    if os.path.exists(f):
                        os.remove(f)
                t, rss = timed([exe, "encode", a.snapshot, "-o", gcz, "--preset", a.preset, "--threads", a.threads],
                               a.timeout)
                res[side]["encode s"].append(t)
                res[side]["encode peak RSS MB"].append(rss / 1e6)
                t, rss = timed([exe, "decode", gcz, "-o", out, "--threads", a.threads], a.timeout)
                res[side]["decode s"].append(t)
                res[side]["decode peak RSS MB"].append(rss / 1e6)
        same = [open(os.path.join(work, "old" + ext), "rb").read() == open(os.path.join(work, "new" + ext), "rb").read()
                for ext in (".gcz", ".safetensors")]
    finally:
        for f in os.listdir(work):
            os.remove(os.path.join(work, f))
        os.rmdir(work)
    print(f"{a.rounds} rounds, preset {a.preset}, --threads {a.threads}; same container: {same[0]}, "
          f"same decoded file: {same[1]}\n")
    print("| measure | old | new | new ÷ old |\n| --- | ---: | ---: | ---: |")
    for m in measures:
        o, n = statistics.median(res["old"][m]), statistics.median(res["new"][m])
        print(f"| {m} | {o:.4g} | {n:.4g} | {n / o:.3f} |")


if __name__ == "__main__":
    main()
