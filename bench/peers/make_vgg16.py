#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes a VGG16-for-CIFAR-sized gradient snapshot (15.2M float32 parameters) as safetensors.

Layer shapes are VGG16's (13 3x3 convs, three linear layers, biases) in PyTorch's storage order;
values are heavy-tailed and gradient-like: per-kernel log-normal scales times Gaussian noise
(numpy default_rng(seed)). Usage: make_vgg16.py OUT.safetensors [--seed N] [--scale K]
(--scale K repeats the conv stack K times, for multi-GB memory tests).
"""
import argparse
import json
import struct

import numpy as np

CONVS = [(64, 3), (64, 64), (128, 64), (128, 128), (256, 128), (256, 256), (256, 256),
         (512, 256), (512, 512), (512, 512), (512, 512), (512, 512), (512, 512)]
LINEARS = [(512, 512), (512, 512), (10, 512)]


def shapes(scale):
    out = []
    for rep in range(scale):
        pre = "" if scale == 1 else f"rep{rep}."
        for i, (o, c) in enumerate(CONVS):
            out.append((f"{pre}features.{i}.weight", (o, c, 3, 3)))
            out.append((f"{pre}features.{i}.bias", (o,)))
    for i, (o, c) in enumerate(LINEARS):
        out.append((f"classifier.{i}.weight", (o, c)))
        out.append((f"classifier.{i}.bias", (o,)))
    return out


def tensor(rng, shape):
    if len(shape) == 1:
        return (rng.standard_normal(shape) * 1e-3).astype(np.float32)
    blocks = shape[0] * (shape[1] if len(shape) == 4 else 1)
    per = int(np.prod(shape)) // blocks
    scale = np.exp(rng.standard_normal(blocks) * 1.0 - 7.0).astype(np.float32)
    v = rng.standard_normal((blocks, per), dtype=np.float32) * scale[:, None]
    return v.reshape(shape)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--scale", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    items = shapes(a.scale)
    header, offset = {}, 0
    for name, shape in items:
        n = int(np.prod(shape)) * 4
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(a.out, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for name, shape in items:
            f.write(np.ascontiguousarray(tensor(rng, shape), dtype="<f4").tobytes())
    print(f"{a.out}: {len(items)} tensors, {offset // 4} parameters, {offset} bytes of data")


if __name__ == "__main__":
    main()
