#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Reading a torch.save file against reading the same tensors from an uncompressed .npz
(issue 43: no more than 1.2x). Writes the VGG16 gradients of bench/peers/make_vgg16.py (15.2M
float32 parameters, seed 16) as `np.savez` (stored, not deflated) and as `torch.save` of a dict
name -> tensor (PyTorch's zip format), then runs bench_read_snapshot, which reads the two files
alternately in one process (open, read every array, sum |x| over each) and prints each file's
median time. Prints both medians and their ratio.

    /usr/bin/python3 bench/torch_read.py [--build build] [--rounds 15] [--dir DIR] [--snapshot F.safetensors]

--snapshot takes the tensors of a float32 safetensors file instead (the real VGG16-BN gradients
of bench/real_gradients.py).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench", "peers"))
import make_vgg16  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--snapshot", help="a float32 safetensors file to take the tensors from")
    ap.add_argument("--dir", help="where to write the two files (default: a temporary folder in /dev/shm or /tmp)")
    a = ap.parse_args()
    binary = os.path.join(a.build, "bench", "bench_read_snapshot")
    if a.snapshot:
        with open(a.snapshot, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n))
            data = f.read()
        grads = {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], "<f4").reshape(v["shape"]).copy()
                 for k, v in header.items() if k != "__metadata__"}
    else:
        rng = np.random.default_rng(16)
        grads = {name: make_vgg16.tensor(rng, shape) for name, shape in make_vgg16.shapes(1)}
    base = a.dir or ("/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    with tempfile.TemporaryDirectory(prefix="gradcodec-torch-read-", dir=base) as tmp:
        npz, pt = os.path.join(tmp, "vgg16.npz"), os.path.join(tmp, "vgg16.pt")
        np.savez(npz, **grads)
        torch.save({k: torch.from_numpy(v) for k, v in grads.items()}, pt)
        out = subprocess.run([binary, str(a.rounds), npz, pt], check=True, capture_output=True, text=True,
                             timeout=1800).stdout
    medians = {}
    for line in out.splitlines():
        path, median, *_ = line.split()
        medians[os.path.splitext(path)[1]] = float(median)
    params = sum(v.size for v in grads.values())
    mb = 4 * params / 1e6
    print(f"{os.path.basename(a.snapshot) if a.snapshot else 'synthetic VGG16'} gradients: {len(grads)} tensors, {params} float32 parameters ({mb:.1f} MB); "
          f"median of {a.rounds} alternating reads each")
    for ext in (".npz", ".pt"):
        print(f"  {ext:5s} {1e3 * medians[ext]:8.2f} ms  {mb / medians[ext]:8.0f} MB/s")
    print(f"  torch.save / npz: {medians['.pt'] / medians['.npz']:.3f}x (target <= 1.2x)")


if __name__ == "__main__":
    main()
