#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""docs/stages.md, the decode arithmetic of qsgd and powersgd (normative): decoders written from
the text (below, in numpy) give, bit for bit, what `gradcodec decode` gives for records of real
gradients; and the other readings the text rules out (f32 instead of f64 for QSGD, an f64 sum
for PowerSGD) give other bits, so the text is needed to decode bit for bit."""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import path, run

import numpy as np

ROOT = sys.argv[2]
SNAPSHOT = os.path.join(ROOT, "test_data", "snapshots", "step_000.npz")


def records(blob):
    """{name: (shape, {stream: bytes})} of frame 0, from the footer and each TREC's metadata
    (docs/format.md, "Tensor record")."""
    footer = struct.unpack_from("<Q", blob, len(blob) - 24)[0]
    pos = footer + 12
    (frames,) = struct.unpack_from("<I", blob, pos)
    _, count = struct.unpack_from("<QI", blob, pos + 4)
    pos += 16
    out = {}
    for _ in range(count):
        off, _size = struct.unpack_from("<QQ", blob, pos)
        pos += 16
        (m,) = struct.unpack_from("<I", blob, off + 4)
        meta, p = blob[off + 8:off + 8 + m], 0
        (n,) = struct.unpack_from("<H", meta, p)
        name = meta[p + 2:p + 2 + n].decode()
        p += 2 + n
        dtype = meta[p]
        p += 2
        if dtype == 0:
            (n,) = struct.unpack_from("<H", meta, p)
            p += 2 + n
        ndim = meta[p]
        shape = struct.unpack_from("<" + "Q" * ndim, meta, p + 1)
        p += 1 + 8 * ndim
        storage = meta[p]
        p += 1
        while meta[p] & 0x80:  # the variant, a varint
            p += 1
        p += 1
        streams, data = {}, off + 8 + m + 8
        for _ in range(meta[p:p + 1][0]):
            p += 1
            n = meta[p]
            sname = meta[p + 1:p + 1 + n].decode()
            p += 1 + n + 1  # name, element width
            (size,) = struct.unpack_from("<Q", meta, p)
            p += 15  # size and checksum, minus the byte the loop steps over
            streams[sname] = blob[data:data + size]
            data += size
        if storage == 0:
            out[name] = (shape, streams)
    return out


def encode_decode(preset):
    gcz, npz = path(preset + ".gcz"), path(preset + ".npz")
    run("encode", SNAPSHOT, "-o", gcz, "--preset", preset, "--seed", "3", "-f")
    run("decode", gcz, "-o", npz, "-f")
    with open(gcz, "rb") as f:
        blob = f.read()
    with np.load(npz) as z:
        return records(blob), {k: z[k] for k in z.files}


def test_qsgd_decodes_as_the_text_says():
    recs, decoded = encode_decode("qsgd8")  # s = 127: one byte per value, sign bit then 7 bits of level
    assert len(recs) >= 20
    f32_differs = 0
    for name, (shape, streams) in recs.items():
        norms = np.frombuffer(streams["scale"], "<f4")
        codes = np.frombuffer(streams["value"], np.uint8)
        sign = np.where(codes >> 7, 1.0, -1.0)
        level = (codes & 127).astype(np.float64)
        step = np.repeat(norms.astype(np.float64) / 127.0, 512)[:codes.size]  # N / s in double
        want = (step * level * sign).astype(np.float32)                       # rounded to f32 once
        got = decoded[name].reshape(-1)
        assert got.tobytes() == want.tobytes(), name
        in_f32 = (np.repeat(norms / np.float32(127), 512)[:codes.size] * level.astype(np.float32)
                  * sign.astype(np.float32)).astype(np.float32)
        f32_differs += int(np.count_nonzero(in_f32 != got))
    assert f32_differs > 0, "computing in f32 would give the same bits: the rule is not needed"


def powersgd_case(preset, r):
    recs, decoded = encode_decode(preset)
    checked = f64_differs = 0
    for name, (shape, streams) in recs.items():
        if len(shape) < 2:
            continue
        n, m = shape[0], int(np.prod(shape[1:]))
        rr = min(n, m, r)
        vals = np.frombuffer(streams["value"], "<f4")
        assert vals.size == rr * (n + m), name
        P = vals[:n * rr].reshape(rr, n).T  # column-major n x r'
        Q = vals[n * rr:].reshape(rr, m).T  # column-major m x r'
        acc = np.zeros((n, m), np.float32)
        for k in range(rr):  # f32 products, added in f32 in k order, no fused multiply-add
            acc = acc + np.outer(P[:, k], Q[:, k]).astype(np.float32)
        got = decoded[name].reshape(n, m)
        assert got.tobytes() == acc.tobytes(), (preset, name)
        exact = sum(np.outer(P[:, k].astype(np.float64), Q[:, k].astype(np.float64)) for k in range(rr))
        f64_differs += int(np.count_nonzero(exact.astype(np.float32) != got))
        checked += 1
    assert checked >= 10
    return f64_differs


def test_powersgd_decodes_as_the_text_says():
    assert powersgd_case("powersgd-r1", 1) == 0  # one product: nothing to add
    assert powersgd_case("powersgd-r2", 2) > 0, "an f64 sum would give the same bits: the rule is not needed"
    powersgd_case("powersgd-r4", 4)


if __name__ == "__main__":
    clitest.run_all(globals())
