#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""docs/format.md, "The random generator (normative)": an implementation of that section written
from the text (below, in Python) draws the positions the docs' golden list states, and the ones
gradcodec's randk decoder restores, for several seeds, frames, tensors, sizes and k."""
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import path, run

import numpy as np

ROOT = sys.argv[2]
M = (1 << 64) - 1
SELECT = 1


def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return z ^ (z >> 31)


def key(seed, p, f, t, u):
    s = seed ^ ((p << 56) & M)
    k = mix(s ^ 0x6A09E667F3BCC909)
    k = mix(k ^ ((f << 32) | t))
    return mix(k ^ ((u + 0x3C6EF372FE94F82B) & M))


class Stream:
    def __init__(self, k):
        self.key, self.n = k, 0

    def draw(self):
        x = mix((self.key + self.n * 0x9E3779B97F4A7C15) & M)
        self.n += 1
        return x

    def below(self, n):
        m = self.draw() * n
        if (m & M) < n:
            tau = ((1 << 64) - n) % n
            while (m & M) < tau:
                m = self.draw() * n
        return m >> 64


def randk_positions(universe, k, stream):
    if k == universe:
        return list(range(universe))
    kept = set()
    for j in range(universe - k, universe):
        t = stream.below(j + 1)
        kept.add(j if t in kept else t)
    return sorted(kept)


def keep_count(ratio, d):
    """max(1, round(ratio · d)), half away from zero, at most d."""
    x = ratio * d
    return min(d, max(1, int(math.floor(x + 0.5))))


def test_golden_list_of_the_docs_is_the_spec():
    doc = open(os.path.join(ROOT, "docs", "format.md")).read()
    sec = doc[doc.index("**Golden list**"):]
    cases = re.findall(r"frame (\d+), tensor (\d+): positions `([0-9 ]+)`", sec[:800])
    assert len(cases) == 2, cases
    for f, t, positions in cases:
        want = [int(x) for x in positions.split()]
        got = randk_positions(1000, 10, Stream(key(42, 0, int(f), int(t), SELECT)))
        assert got == want, (f, t, got, want)


def decoded_positions(arrays, frames, pipeline, seed, frame, name):
    """Encodes `frames` copies of the arrays (an .npz per frame) with gradcodec, decodes `frame`,
    and returns the positions of `name` that came back non-zero (every input value is non-zero)."""
    files = []
    for i in range(frames):
        files.append(path(f"g{i}.npz"))
        np.savez(files[-1], **arrays)
    run("encode", *files, "-o", path("g.gcz"), "--pipeline", pipeline, "--seed", seed, "-f")
    run("decode", path("g.gcz"), "--frame", frame, "-o", path("g_out.npz"), "-f")
    with np.load(path("g_out.npz")) as z:
        return [int(i) for i in np.nonzero(z[name].reshape(-1))[0]]


def test_the_decoder_draws_what_the_spec_says():
    ones = lambda n: np.arange(1, n + 1, dtype=np.float32)
    arrays = {"a": ones(5), "b": ones(7), "c": ones(1000), "d": ones(4097)}
    for seed, pipeline, frame, name, tensor, d, k in [
        (42, "randk(k=10) | raw", 0, "c", 2, 1000, 10),
        (42, "randk(k=10) | raw", 1, "c", 2, 1000, 10),
        (7, "randk(k=40) | raw", 2, "d", 3, 4097, 40),
        (2**64 - 1, "randk(k=300) | raw", 1, "d", 3, 4097, 300),  # k ≥ u/16: the other branch
        (5, "randk(ratio=0.0125) | raw", 0, "c", 2, 1000, keep_count(0.0125, 1000)),
        (5, "randk(k=7) | raw", 0, "b", 1, 7, 7),  # k = u: every position, no draw
        (3, "ef | randk(k=10) | raw", 1, "c", 2, 1000, 10),  # randk at p = 1
    ]:
        p = pipeline.split("|").index(next(s for s in pipeline.split("|") if "randk" in s))
        want = randk_positions(d, k, Stream(key(seed, p, frame, tensor, SELECT)))
        got = decoded_positions(arrays, 3, pipeline, seed, frame, name)
        # (with ef, frame 1's values are the gradient plus the carried error: non-zero where kept)
        assert len(want) == k and got == want, (seed, pipeline, frame, name, got[:12], want[:12])


if __name__ == "__main__":
    clitest.run_all(globals())
