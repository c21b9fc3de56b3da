#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""gradcodec bench end to end: JSON/CSV fields, reported sizes equal the real container, sweeps,
refusals, report paths (--force, checked before the run, a report on stdout alone there), and the
no-INPUT demo on the bundled snapshots."""
import csv
import json
import os
import re
import subprocess
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
          "input_bytes", "output_bytes", "ratio", "ratio_16bit", "bits_per_param", "bits_index", "bits_value", "bits_scale_side",
          "bits_overhead", "index_cr", "value_cr", "overall_cr", "rel_l2", "cosine", "max_abs_error",
          "sign_agreement", "nonfinite_values", "encode_mbps", "decode_mbps", "throughput_mbps",
          "encode_seconds_median", "decode_seconds_median", "runs", "decode_runs", "encode_spread",
          "decode_spread", "time_transform", "time_sparsify",
          "time_quantize", "time_index", "time_lossless", "time_container", "seeds", "bias", "bias_z", "bias_sq",
          "bias_sq_se", "bias_raw", "bias_noise", "rel_l2_mean", "rel_l2_std"]


def bench_json(*args):
    if os.path.exists(path("out.json")):  # an existing report is refused without --force
        os.remove(path("out.json"))
    run("bench", *args, "--json", path("out.json"), "--min-time", "0", "--repeat", "1", "--quiet")
    return json.load(open(path("out.json")))


def test_json_fields_and_sizes_match_the_container():
    rep = bench_json(path("g.npz"), path("g2.npz"), "--preset", "lossless", "--preset", "fp16")
    assert rep["schema"] == "gradcodec-bench/2"
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
        assert abs(r["ratio_16bit"] - 2 * r["parameters"] / size) < 1e-12
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
    # A sweep over k of a preset given by ratio: k replaces ratio (a stage takes one of the two).
    rep = bench_json(path("g.npz"), "--preset", "topk-1pct", "--sweep", "topk.k=10,100")
    assert [r["pipeline"] for r in rep["rows"]] == ["topk(k=10) | raw | varint", "topk(k=100) | raw | varint"], rep
    assert [r["kept"] for r in rep["rows"]] == [10 + 10, 100 + 50]  # k per tensor, at most b's 50 elements


def test_markdown_tables_have_as_many_cells_as_their_header():
    # A pipeline's text and "max|err|" hold '|': escaped, or the rows would not match the header.
    out, _ = run("bench", path("g.npz"), "--pipeline", "raw | zstd", "--preset", "fp16", "--min-time", "0",
                 "--repeat", "1", "--markdown")
    tables, current = [], []
    for line in out.decode().splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    if current:
        tables.append(current)
    assert len(tables) >= 2, out
    for t in tables:
        cells = [len(re.split(r"(?<!\\)\|", row)) for row in t]
        assert len(set(cells)) == 1, t
    assert "raw \\| zstd" in out.decode() and "max\\|err\\|" in out.decode()


def test_refusals():
    fails("bench", path("g.npz"), "--preset", "fp16", "--sweep", "topk.ratio=0.1", code=1,
          contains="no pipeline given has a stage 'topk'")
    fails("bench", path("g.npz"), "--pipeline", "zstd", "--sweep", "zstd.lvl=1", code=1,
          contains="unknown parameter 'lvl'")
    fails("bench", path("g.npz"), "--pipeline", "zstd", "--sweep", "zstd.level", code=1, contains="STAGE.PARAM=")
    fails("bench", path("g.npz"), "--pipeline", "zstd", "--sweep", "zstd.level=1,99", code=1, contains="out of range")
    fails("bench", path("nope.npz"), code=2, contains="nope.npz")
    fails("bench", path("g.npz"), "--preset", "bird+", "--sweep", "bird+.gamma=1,2", "--sweep", "bird+.keep=0.5",
          code=1, contains="bird+ takes keep or gamma, not both")
    fails("bench", path("g.npz"), "--preset", "accordion-topk", "--sweep", "topk.k=5", code=1,
          contains="a stage inside another's parameters")


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


FAST = ("--preset", "lossless", "--repeat", "1", "--min-time", "0")


def temporaries(directory):
    """AtomicOutput's temporaries ('.NAME.tmp-XXXXXX') left in directory."""
    return [f for f in os.listdir(directory) if ".tmp-" in f]


def test_an_existing_report_is_replaced_only_with_force():
    # before, `--csv victim.npz` replaced the input with CSV and bench had no --force
    victim = path("victim.npz")
    with open(path("g.npz"), "rb") as f:
        original = f.read()
    with open(victim, "wb") as f:
        f.write(original)
    for flag in ("--csv", "--json"):
        err = fails("bench", path("g.npz"), *FAST, flag, victim, code=1)
        assert err == f"gradcodec: error: {victim}: already exists (use --force to replace it)", err
        with open(victim, "rb") as f:
            assert f.read() == original, flag
    run("bench", path("g.npz"), *FAST, "--csv", victim, "--force", "--quiet")
    rows = list(csv.DictReader(open(victim)))
    assert list(rows[0]) == FIELDS and rows[0]["label"] == "lossless"
    run("bench", path("g.npz"), *FAST, "--json", victim, "-f", "--quiet")
    assert json.load(open(victim))["rows"][0]["label"] == "lossless"
    assert not temporaries(clitest.WORK), temporaries(clitest.WORK)
    # --workers writes its JSON report at the end too: the same refusal, up front
    os.makedirs(path("wk"), exist_ok=True)
    for k in range(2):
        np.savez(path("wk", f"worker_{k}.npz"), w=rng.standard_normal(300).astype(np.float32))
    fails("bench", "--workers", path("wk", "worker_*.npz"), "--json", victim, code=1, contains="already exists")
    assert json.load(open(victim))["rows"][0]["label"] == "lossless"
    run("bench", "--workers", path("wk", "worker_*.npz"), "--json", victim, "--force", "--quiet")
    assert json.load(open(victim))["schema"] == "gradcodec-bench-workers/1"
    # --workers --json -: the JSON alone on stdout, the table on stderr.
    out, err = run("bench", "--workers", path("wk", "worker_*.npz"), "--json", "-")
    assert json.loads(out)["schema"] == "gradcodec-bench-workers/1"
    assert "match_rate" in err


def test_report_paths_are_checked_before_the_run():
    # GRADCODEC_TEST_FLIP_DECODED makes the run itself fail (exit 5): a report path refused with
    # another exit code was refused before anything was measured. Before, bench ran every row
    # and only then found the path unusable.
    env = {"GRADCODEC_TEST_FLIP_DECODED": "1"}
    with open(path("exists.json"), "w") as f:
        f.write("{}\n")
    os.makedirs(path("a_dir"), exist_ok=True)
    fails("bench", path("g.npz"), *FAST, "--json", path("exists.json"), code=1, contains="already exists", env=env)
    fails("bench", path("g.npz"), *FAST, "--csv", path("exists.json"), code=1, contains="already exists", env=env)
    fails("bench", path("g.npz"), *FAST, "--json", path("no_dir", "r.json"), code=2, contains="cannot create output",
          env=env)
    fails("bench", path("g.npz"), *FAST, "--csv", path("a_dir"), "--force", code=1, contains="is a directory",
          env=env)
    # the second report is checked before the run too, and the first one's temporary is removed
    fails("bench", path("g.npz"), *FAST, "--json", path("fresh.json"), "--csv", path("no_dir", "r.csv"), code=2,
          contains="r.csv", env=env)
    fails("bench", path("g.npz"), *FAST, "--json", path("r"), "--csv", path(".", "r"), code=1,
          contains="the same file", env=env)
    os.makedirs(path("wk2"), exist_ok=True)
    for k in range(2):
        np.savez(path("wk2", f"worker_{k}.npz"), w=rng.standard_normal(300).astype(np.float32))
    fails("bench", "--workers", path("wk2", "worker_*.npz"), "--json", path("no_dir", "w.json"), code=2,
          contains="cannot create output")
    assert not os.path.exists(path("fresh.json")) and not os.path.exists(path("r"))
    assert open(path("exists.json")).read() == "{}\n"
    assert not temporaries(clitest.WORK), temporaries(clitest.WORK)


def test_outputs_named_twice_or_unwritable_are_refused_before_the_run():
    # Relative spellings of one file ("r.json", "./r.json") and --plot against a report were only
    # found at the end (or, with --force, one output silently replaced the other); a --plot in a
    # missing folder was found after the run, in a message naming a temporary.
    env = {"GRADCODEC_TEST_FLIP_DECODED": "1"}  # a run that got going would exit 5
    def refused(*args, code, contains):
        p = subprocess.run([clitest.EXE, "bench", "g.npz", *FAST, *args], cwd=clitest.WORK, capture_output=True,
                           text=True, timeout=120, env={**os.environ, **env})
        assert p.returncode == code and contains in p.stderr and p.stderr.count("\n") == 1, (args, p.returncode, p.stderr)
    refused("--json", "twice.json", "--csv", "./twice.json", "--force", code=1, contains="name the same file")
    refused("--plot", "twice.svg", "--csv", "twice.svg", code=1, contains="--csv and --plot name the same file")
    refused("--plot", "./twice.svg", "--json", "twice.svg", "--force", code=1, contains="name the same file")
    refused("--plot", os.path.join("no_dir", "p.svg"), code=2, contains="no_dir")
    assert not any(os.path.exists(path(n)) for n in ("twice.json", "twice.svg"))
    os.makedirs(path("wk3"), exist_ok=True)
    for k in range(2):
        np.savez(path("wk3", f"worker_{k}.npz"), w=rng.standard_normal(300).astype(np.float32))
    fails("bench", "--workers", path("wk3", "worker_*.npz"), "--plot", path("wk.svg"), code=1, contains="--plot")
    fails("bench", path("g.npz"), *FAST, "--seeds", "0", code=1, contains="--seeds")


def test_a_csv_report_of_a_target_run_has_the_headers_fields_on_every_line():
    out, _ = run("bench", path("g.npz"), "--repeat", "1", "--min-time", "0", "--preset", "topk-1pct", "--preset",
                 "qsgd8", "--target", "bits=2", "--csv", "-", "--quiet")
    rows = list(csv.reader(out.decode().splitlines()))
    assert len(rows) == 3 and all(len(r) == len(rows[0]) for r in rows), [len(r) for r in rows]
    target = json.loads(dict(zip(rows[0], rows[1]))["target"])
    assert target["status"] == "met" and target["stage"] == "topk", target


def test_a_report_on_stdout_is_alone_there():
    # before, `--json -` wrote the table and then the JSON to stdout: no JSON reader took it
    out, err = run("bench", path("g.npz"), *FAST, "--json", "-")
    rep = json.loads(out)
    assert rep["schema"] == "gradcodec-bench/2" and rep["rows"][0]["label"] == "lossless"
    assert "ratio = input bytes" in err and "lossless" in err, err  # the table went to stderr
    out, err = run("bench", path("g.npz"), *FAST, "--csv", "-", "--json", path("side.json"))
    rows = list(csv.DictReader(out.decode().splitlines()))
    assert list(rows[0]) == FIELDS and len(rows) == 1
    assert json.load(open(path("side.json")))["rows"][0]["label"] == "lossless"
    assert "ratio = input bytes" in err, err
    out, err = run("bench", path("g.npz"), *FAST, "--json", "-", "--quiet")
    assert json.loads(out)["rows"][0]["label"] == "lossless" and err == "", err
    # the table still goes to stdout when no report does, --quiet or not
    out, _ = run("bench", path("g.npz"), *FAST, "--quiet")
    assert b"ratio = input bytes" in out
    # two reports cannot share stdout: refused before the run
    fails("bench", path("g.npz"), *FAST, "--json", "-", "--csv", "-", code=1, contains="standard output",
          env={"GRADCODEC_TEST_FLIP_DECODED": "1"})


def test_threads_at_most_one_per_core_as_encode_takes_them():
    # bench ran --threads 64 as 64 threads on a 2-core machine (encode and decode take at most one
    # per core), so its figures were not those of `encode --threads 64`.
    cores = os.cpu_count() or 1
    out, _ = run("bench", path("g.npz"), *FAST, "--threads", "64", "--json", "-", "--quiet")
    assert json.loads(out)["threads"] == min(64, cores)
    out, _ = run("bench", path("g.npz"), *FAST, "--threads", "64")
    assert f"; {min(64, cores)} thread(s);" in out.decode(), out


def test_demo_on_bundled_data():
    rep = bench_json("--preset", "lossless")
    assert rep["frames"] == 4 and all("test_data" in i for i in rep["inputs"])
    assert rep["rows"][0]["parameters"] == 4 * 111796


clitest.run_all(globals())
