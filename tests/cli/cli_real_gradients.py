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


if __name__ == "__main__":
    clitest.run_all(globals())
