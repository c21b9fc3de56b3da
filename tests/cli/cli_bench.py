#!/usr/bin/python3
"""gradcodec bench end to end: JSON/CSV fields, reported sizes equal the real container, sweeps,
refusals, and the no-INPUT demo on the bundled snapshots."""
import csv
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import fails, path, run

rng = np.random.default_rng(3)
np.savez(path("g.npz"), w=rng.standard_normal((200, 50)).astype(np.float32),
         b=rng.standard_normal(50).astype(np.float32))
np.savez(path("g2.npz"), w=rng.standard_normal((200, 50)).astype(np.float32),
         b=rng.standard_normal(50).astype(np.float32))
FIELDS = ["label", "pipeline", "sweep", "deterministic", "lossless", "parameters", "kept", "kept_fraction",
          "input_bytes", "output_bytes", "ratio", "bits_per_param", "bits_index", "bits_value", "bits_scale_side",
          "bits_overhead", "index_cr", "value_cr", "overall_cr", "rel_l2", "cosine", "max_abs_error",
          "sign_agreement", "nonfinite_values", "encode_mbps", "decode_mbps", "throughput_mbps",
          "encode_seconds_median", "decode_seconds_median", "runs", "time_transform", "time_sparsify",
          "time_quantize", "time_index", "time_lossless", "time_container", "seeds", "bias", "rel_l2_mean",
          "rel_l2_std"]


def bench_json(*args):
    run("bench", *args, "--json", path("out.json"), "--min-time", "0", "--repeat", "1", "--quiet")
    return json.load(open(path("out.json")))


def test_json_fields_and_sizes_match_the_container():
    rep = bench_json(path("g.npz"), path("g2.npz"), "--preset", "lossless", "--preset", "fp16")
    assert rep["schema"] == "gradcodec-bench/1"
    assert rep["frames"] == 2
    assert [r["label"] for r in rep["rows"]] == ["lossless", "fp16"]
    for r in rep["rows"]:
        assert list(r)[:len(FIELDS)] == FIELDS, list(r)
        assert len(r["per_frame"]) == 2
        # the same pipeline through `encode` gives exactly the container bench measured
        out = path(r["label"] + ".gcz")
        run("encode", path("g.npz"), path("g2.npz"), "-o", out, "--preset", r["label"], "--force", "--quiet")
        size = os.path.getsize(out)
        assert r["output_bytes"] == size, (r["output_bytes"], size)
        assert r["input_bytes"] == 2 * (200 * 50 + 50) * 4
        assert abs(r["ratio"] - r["input_bytes"] / size) < 1e-12
        assert abs(r["bits_per_param"] - 8 * size / r["parameters"]) < 1e-12
        parts = r["bits_index"] + r["bits_value"] + r["bits_scale_side"] + r["bits_overhead"]
        assert abs(parts - r["bits_per_param"]) < 1e-9
    lossless, fp16 = rep["rows"]
    assert lossless["lossless"] and lossless["rel_l2"] == 0 and lossless["max_abs_error"] == 0
    assert lossless["deterministic"] and lossless["bias"] is None
    assert 0 < fp16["rel_l2"] < 1e-3 and fp16["cosine"] > 0.999999


def test_csv_has_the_same_fields():
    run("bench", path("g.npz"), "--preset", "fp16", "--csv", path("out.csv"), "--min-time", "0", "--quiet")
    rows = list(csv.DictReader(open(path("out.csv"))))
    assert list(rows[0]) == FIELDS and rows[0]["label"] == "fp16"


def test_options_before_the_inputs_take_one_value_each():
    # `--preset P FILE`: FILE is an input, not a second preset (before, this failed with
    # "unknown preset"); the same for --pipeline and --sweep
    rep = bench_json("--preset", "fp16", path("g.npz"), "--pipeline", "zstd", "--sweep", "zstd.level=1,3", path("g2.npz"))
    assert rep["frames"] == 2
    assert [r["label"] for r in rep["rows"]][0] == "fp16"
    assert len(rep["rows"]) == 3, [r["label"] for r in rep["rows"]]


def test_sweep_expands_rows():
    rep = bench_json(path("g.npz"), "--pipeline", "zstd", "--sweep", "zstd.level=1,5,9")
    assert [r["sweep"] for r in rep["rows"]] == ["zstd.level=1", "zstd.level=5", "zstd.level=9"]
    assert [r["pipeline"] for r in rep["rows"]] == ["raw | zstd(level=1)", "raw | zstd(level=5)", "raw | zstd(level=9)"]


def test_refusals():
    fails("bench", path("g.npz"), "--preset", "fp16", "--sweep", "topk.ratio=0.1", code=1,
          contains="no pipeline given has a stage 'topk'")
    fails("bench", path("g.npz"), "--pipeline", "zstd", "--sweep", "zstd.lvl=1", code=1,
          contains="unknown parameter 'lvl'")
    fails("bench", path("g.npz"), "--pipeline", "zstd", "--sweep", "zstd.level", code=1, contains="STAGE.PARAM=")
    fails("bench", path("g.npz"), "--pipeline", "zstd", "--sweep", "zstd.level=1,99", code=1, contains="out of range")
    fails("bench", path("nope.npz"), code=2, contains="nope.npz")


def test_a_wrong_decode_is_a_mismatch_with_exit_5():
    # GRADCODEC_TEST_FLIP_DECODED flips one bit of the first decoded tensor: the lossless check
    # against the input and the lossy check of later runs against the first must both catch it.
    env = {"GRADCODEC_TEST_FLIP_DECODED": "1"}
    fails("bench", path("g.npz"), "--preset", "lossless", "--min-time", "0", "--repeat", "1", "--quiet",
          code=5, contains="decoded differently from the input", env=env)
    fails("bench", path("g.npz"), "--preset", "topk-1pct", "--min-time", "0", "--repeat", "1", "--quiet",
          code=5, contains="decoded differently from the first decoded run", env=env)


def test_table_prints_formulas_and_no_progress_bar_without_tty():
    out, err = run("bench", path("g.npz"), "--preset", "fp16", "--min-time", "0")
    text = out.decode()
    assert "ratio = input bytes" in text and "rel L2 = ||g - g^||2 / ||g||2" in text and "MB = 10^6" in text
    assert "\r" not in err


def test_seeds_report_bias_for_stochastic_pipelines_only():
    rep = bench_json(path("g.npz"), "--preset", "randk-1pct", "--pipeline", "randk(ratio=0.5, unbiased=true)",
                     "--preset", "fp16", "--seeds", "6")
    biased, det, unbiased = rep["rows"]  # presets first, then --pipeline rows
    assert not biased["deterministic"] and biased["seeds"] == 6 and biased["rel_l2_std"] > 0
    # unbiased randk's mean over seeds approaches g; the biased one stays ~ sqrt(1 - k/d) away
    assert unbiased["bias"] < biased["bias"], (unbiased["bias"], biased["bias"])
    assert biased["bias"] > 0.9
    assert det["deterministic"] and det["seeds"] == 1 and det["bias"] is None


def test_progress_bar_on_a_terminal_only():
    import pty
    import subprocess
    master, slave = pty.openpty()
    p = subprocess.run([clitest.EXE, "bench", path("g.npz"), "--preset", "fp16", "--preset", "lossless",
                        "--min-time", "0"], stdout=subprocess.PIPE, stderr=slave, timeout=120)
    os.close(slave)
    err = b""
    try:
        while True:
            chunk = os.read(master, 4096)
            if not chunk:
                break
            err += chunk
    except OSError:
        pass
    os.close(master)
    assert p.returncode == 0
    assert b"[" in err and b"/2" in err, err
    master, slave = pty.openpty()
    p = subprocess.run([clitest.EXE, "bench", path("g.npz"), "--preset", "fp16", "--min-time", "0", "--quiet"],
                       stdout=subprocess.PIPE, stderr=slave, timeout=120)
    os.close(slave)
    try:
        quiet_err = os.read(master, 4096)
    except OSError:
        quiet_err = b""
    os.close(master)
    assert quiet_err == b"", quiet_err


def test_demo_on_bundled_data():
    rep = bench_json("--preset", "lossless")
    assert rep["frames"] == 4 and all("test_data" in i for i in rep["inputs"])
    assert rep["rows"][0]["parameters"] == 4 * 111796


clitest.run_all(globals())
