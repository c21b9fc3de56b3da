#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""bench/real_gradients.py, the real-gradient benchmark corpus (issue 44), in its --tiny form:
each model's consecutive steps are written as safetensors that gradcodec reads, in the models'
named_parameters() order, with gradients that change from step to step and are not all zero;
a stateful preset encodes the steps as a sequence and decodes them back."""
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import path, run

ROOT = sys.argv[2]
OUT = path("corpus")
subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "bench", "real_gradients.py"), OUT, "--tiny", "--warmup", "2",
                "--steps", "2", "--batch", "4"], check=True, timeout=600, stdout=subprocess.DEVNULL)


def tensors(file):
    """name -> array of a safetensors file, read with numpy from its header."""
    with open(file, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    return {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], "<f4").reshape(v["shape"])
            for k, v in header.items()}


def test_every_model_has_consecutive_steps_gradcodec_reads():
    for model, first in [("resnet18", "conv1.weight"), ("vgg16bn", "features.0.weight"),
                         ("transformer", "pos")]:
        files = [os.path.join(OUT, model, f"step_00{k}.safetensors") for k in range(2)]
        a, b = tensors(files[0]), tensors(files[1])
        assert list(a)[0] == first and list(a) == list(b)
        assert any(np.abs(v).sum() > 0 for v in a.values())
        assert any(not np.array_equal(a[k], b[k]) for k in a)  # a new batch: a new gradient
        gcz = path(model + ".gcz")
        run("encode", *files, "-o", gcz, "--preset", "tcs", "-f")
        run("decode", gcz, "-o", path(model + "_dec") + "/", "-f")
        listing, _ = run("inspect", "--json", gcz)
        rep = json.loads(listing)
        assert len(rep["frames"]) == 2 and rep["frames"][0]["tensors"][0]["name"] == first
        assert open(os.path.join(OUT, model, "README.txt")).read().startswith(model + ": ")


def test_run_performance_measures_issue_44s_targets_on_the_corpus():
    # bench/run_performance.py --only-real on this (tiny) corpus: every target preset of every
    # model in the table, each target of issue 44 item 2 with its figure and verdict, and the
    # peer comparison's targets on the VGG16-BN (issue 44 item 3).
    out = path("real.md")
    build = os.path.dirname(os.path.dirname(os.path.abspath(clitest.EXE)))
    subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "bench", "run_performance.py"), "--build-dir", build,
                    "--no-build", "--only-real", "--quick", "--corpus", OUT, "--out", out], check=True, timeout=600,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    text = open(out).read()
    assert text.startswith("## Real-gradient corpus: issue 44's targets"), text[:200]
    ours = text[:text.index("### Peers on the real VGG16-BN")]  # the peer table below has its own rows
    rows = {l.split("|")[1].strip(): [c.strip() for c in l.split("|")[2:-1]] for l in ours.splitlines()
            if l.startswith("| ") and not l.startswith("| ---")}
    for preset in ("topk-1pct", "bird+", "bird+-lzma", "qsgd4", "lossless"):
        assert len(rows[preset]) == 3 and all(len(c.split(", ")) == 3 for c in rows[preset]), (preset, rows[preset])
    for target in ("topk-1pct encode MB/s", "bird+ encode MB/s", "qsgd4 encode MB/s", "lossless encode MB/s",
                   "lossless ratio", "lossless decode MB/s", "qsgd4 encode >= 20x NumPy QSGD",
                   "topk-1pct encode >= 10x torch.topk", "bird+ encode >= 20x NumPy BIRD+ (lzma preset 6)"):
        assert rows[target][-1] in ("yes", "no"), (target, rows.get(target))
    assert "### Peers on the real VGG16-BN" in text and "given with --snapshot" in text


if __name__ == "__main__":
    clitest.run_all(globals())
