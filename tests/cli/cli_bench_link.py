#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""gradcodec bench --link RATE --workers N (docs/bench.md, "Link model"): every link figure equals
its formula computed here by hand from the row's own measured figures (record bytes per frame,
parameters, median encode and decode seconds); each preset gets the collective the docs give it;
the table shows the link table and its formulas; bad options are refused before anything runs."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import fails, path, run

rng = np.random.default_rng(5)
for f in range(2):
    np.savez(path(f"s{f}.npz"), w=rng.standard_normal((256, 64)).astype(np.float32),
             b=rng.standard_normal(64).astype(np.float32))
INPUTS = [path("s0.npz"), path("s1.npz")]
PRESETS = ["fp16", "topk-1pct", "powersgd-r2", "signsgd", "lossless", "randk-1pct"]
WANT = {"fp16": "allreduce", "topk-1pct": "allgather", "powersgd-r2": "allreduce", "signsgd": "ring",
        "lossless": "allgather", "randk-1pct": "allreduce"}


def bench(*extra):
    out, err = run("bench", *INPUTS, *[a for p in PRESETS for a in ("--preset", p)], "--repeat", "1",
                   "--min-time", "0", "--json", "-", *extra)
    return json.loads(out), err


def check_formulas(report, rate, n, latency, forced=None):
    assert report["link"]["rate_bytes_per_second"] == rate
    assert report["link"]["workers"] == n and abs(report["link"]["latency_seconds"] - latency) <= 1e-18
    for r in report["rows"]:
        frames = len(r["per_frame"])
        B = sum(f["record_bytes"] for f in r["per_frame"]) / frames
        p = r["parameters"] / frames
        c = forced or WANT[r["label"]]
        assert r["link_collective"] == c, (r["label"], r["link_collective"])
        gather = c == "allgather"
        S = (n - 1) * B if gather else 2 * (n - 1) / n * B
        M = n - 1 if gather else 2 * (n - 1)
        comm = M * latency + S / rate
        enc = r["encode_seconds_median"] / frames
        dec = r["decode_seconds_median"] / frames * (n - 1 if gather else 1)
        step = enc + dec + comm
        fp32 = 2 * (n - 1) * latency + 2 * (n - 1) / n * 4 * p / rate
        fp16 = 2 * (n - 1) * latency + 2 * (n - 1) / n * 2 * p / rate
        want = {"link_payload_bytes": B, "link_sent_bytes": S, "link_messages": M, "link_comm_seconds": comm,
                "link_encode_seconds": enc, "link_decode_seconds": dec, "link_step_seconds": step,
                "link_fp32_seconds": fp32, "link_fp16_seconds": fp16, "link_speedup_fp32": fp32 / step,
                "link_speedup_fp16": fp16 / step}
        for k, v in want.items():
            assert abs(r[k] - v) <= 1e-12 * max(1.0, abs(v)), (r["label"], k, r[k], v)


def test_link_figures_are_their_formulas():
    report, table = bench("--link", "10Gbit/s", "--workers", "8")
    check_formulas(report, 1.25e9, 8, 1e-5)
    assert "link model: 1250.00 MB/s, 8 workers, latency 10 us" in table, table
    assert "link_speedup_fp32: t_fp32 / t" in table
    assert sorted(report["link"]["formulas"]) == sorted(k for k in report["rows"][0] if k.startswith("link_")
                                                        and k != "link_collective")


def test_hand_computed_example():
    # fp16 of 16,448 parameters per frame: B = its record bytes; on 4 workers at 1 GB/s with no
    # latency, fp32 all-reduce sends 2*3/4 * 65,792 bytes = 98,688 bytes: 98.688 us.
    report, _ = bench("--link", "1GB/s", "--workers", "4", "--latency", "0s")
    row = next(r for r in report["rows"] if r["label"] == "fp16")
    assert row["parameters"] == 2 * (256 * 64 + 64)
    assert abs(row["link_fp32_seconds"] - 98.688e-6) < 1e-15
    assert abs(row["link_fp16_seconds"] - 49.344e-6) < 1e-15
    check_formulas(report, 1e9, 4, 0.0)


def test_units_latency_and_a_forced_collective():
    report, _ = bench("--link", "100Mbit/s", "--workers", "3", "--latency", "2ms", "--collective", "allgather")
    check_formulas(report, 12.5e6, 3, 2e-3, forced="allgather")
    assert report["link"]["collective"] == "allgather"


def test_csv_carries_the_link_fields():
    run("bench", INPUTS[0], "--preset", "fp16", "--repeat", "1", "--min-time", "0", "--link", "25Gbit/s",
        "--workers", "2", "--csv", path("link.csv"), "-f")
    header = open(path("link.csv")).readline().strip().split(",")
    assert "link_speedup_fp16" in header and "link_collective" in header


def test_a_16_bit_baseline():
    # --baseline fp16: the table's ratio is 2 * parameters / output bytes, the JSON has both.
    out, _ = run("bench", INPUTS[0], "--preset", "topk-1pct", "--repeat", "1", "--min-time", "0", "--baseline",
                 "fp16", "--json", path("b16.json"), "-f")
    row = json.load(open(path("b16.json")))["rows"][0]
    assert abs(row["ratio_16bit"] - 2 * row["parameters"] / row["output_bytes"]) < 1e-12
    assert abs(row["ratio_16bit"] - row["ratio"] / 2) < 1e-12  # the input is float32
    text = out.decode()
    assert "ratio/16b" in text and "against a 16-bit (fp16/bf16) copy" in text
    line = next(l for l in text.splitlines() if l.startswith("topk-1pct "))
    assert line.split()[1] == f"{row['ratio_16bit']:.2f}", line
    fails("bench", INPUTS[0], "--preset", "fp16", "--baseline", "fp8", code=1, contains="baseline")


def test_refusals():
    base = ("bench", INPUTS[0], "--preset", "fp16")
    fails(*base, "--link", "10Gbit/s", code=1, contains="--workers N")
    fails(*base, "--link", "10Gbit/s", "--workers", "1", code=1, contains="--workers N")
    fails(*base, "--link", "10Gbit/s", "--workers", "dir/*.npz", code=1, contains="--workers N")
    fails(*base, "--link", "10Gbps", "--workers", "4", code=1, contains="Gbit/s")
    fails(*base, "--link", "0GB/s", "--workers", "4", code=1, contains="above 0")
    fails(*base, "--link", "1GB/s", "--workers", "4", "--latency", "5", code=1, contains="--latency")
    fails(*base, "--link", "1GB/s", "--workers", "4", "--collective", "tree", code=1, contains="collective")
    fails(*base, "--latency", "1ms", code=1, contains="--link")
    fails(*base, "--collective", "ring", code=1, contains="--link")


if __name__ == "__main__":
    clitest.run_all(globals())
