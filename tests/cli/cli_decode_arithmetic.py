#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""docs/stages.md, the decode arithmetic of the stages whose decoded bits depend on it
(normative): decoders written from the text (below, in numpy) give, bit for bit, what
`gradcodec decode` gives for records of real gradients — qsgd, powersgd, curvefit and intN, whose
products and sums the text fixes, and terngrad, bird/bird+, sbc, onebit and fractional, whose
decoded values are stored f32 numbers copied or negated (no arithmetic), with +0 where the text
says 0. Where another reading gives other bits on these records (f32 instead of f64 for QSGD, an
f64 sum for PowerSGD, f32 for curvefit and intN, s·σ·b for terngrad's zeros) the test counts
them, so the text is needed to decode bit for bit. Also TCS's global mask
when k_g exceeds the previous output's nonzero entries, its keyframe records' k_g = 0, and the
tcspos code with no position (count and L byte only)."""
import lzma
import math
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
import gcz
from clitest import path, run

import numpy as np

ROOT = sys.argv[2]
SNAPSHOT = os.path.join(ROOT, "test_data", "snapshots", "step_000.npz")


def records(blob, frame=0):
    """{name: (shape, {stream: bytes})} of the pipeline records of one frame, read (and every
    checksum checked) by the test-side reader of docs/format.md, gcz.py."""
    c = gcz.Container(blob)
    assert frame < len(c.frames)
    return {r.name: (tuple(r.shape), {n: b for n, _, b in r.streams})
            for r in c.records(frame) if r.storage == 0}


def encode_decode(preset, pipeline=None, source=SNAPSHOT):
    """Encodes the snapshot (or `source`) with a preset (or, given `pipeline`, that pipeline under
    the file name `preset`), decodes it with gradcodec, and returns (records of frame 0, decoded
    arrays)."""
    gcz, npz = path(preset + ".gcz"), path(preset + ".npz")
    how = ["--preset", preset] if pipeline is None else ["--pipeline", pipeline]
    run("encode", source, "-o", gcz, *how, "--seed", "3", "-f")
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


# ---- the streams the stages below read, decoded from docs/stages.md ----

def bits(data):
    """The stream's bits, MSB-first (docs/stages.md, "Bit streams"), as a uint8 array of 0/1."""
    return np.unpackbits(np.frombuffer(data, np.uint8))


def leb128(data, pos):
    value = shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def codes(data, count, width):
    """count fixed-width unsigned codes, MSB-first."""
    b = bits(data)[:count * width].reshape(count, width).astype(np.uint64)
    return (b << np.arange(width - 1, -1, -1, dtype=np.uint64)).sum(axis=1) if width else np.zeros(count, np.uint64)


def plain_positions(data):
    """`plain` (universe < 2^32): u32 words, then the flags byte."""
    assert len(data) % 4 == 1 and data[-1] in (0, 1)
    return np.frombuffer(data[:-1], "<u4").astype(np.int64)


def varint_positions(data):
    """`varint`: LEB128 k, flags (bit 0: value order), k LEB128 gaps (positions in value order)."""
    k, pos = leb128(data, 0)
    order = data[pos] & 1
    pos += 1
    out, prev = [], -1
    for _ in range(k):
        v, pos = leb128(data, pos)
        prev = v if order else prev + 1 + v
        out.append(prev)
    assert pos == len(data)
    return np.array(out, np.int64)


def golomb_positions(data):
    """`golomb`: LEB128 k, byte b, per gap q zeros, a 1, then the low b bits."""
    k, pos = leb128(data, 0)
    b = data[pos]
    bs, at, out, prev = bits(data[pos + 1:]), 0, [], -1
    for _ in range(k):
        q = 0
        while bs[at] == 0:
            q, at = q + 1, at + 1
        at += 1
        low = int("".join(map(str, bs[at:at + b])) or "0", 2)
        at += b
        prev += 1 + (q << b) + low
        out.append(prev)
    return np.array(out, np.int64)


def tcspos_positions(data, pos, d):
    """`tcspos` from data[pos:]: LEB128 k, byte L, per block of 2^L positions '1' + L-bit offset
    per kept position and '0' at the block's end; k = 0 is the count and L alone."""
    k, pos = leb128(data, pos)
    L = data[pos]
    if k == 0:
        assert pos + 1 == len(data)
        return np.zeros(0, np.int64)
    bs, at, out = bits(data[pos + 1:]), 0, []
    for block in range(-(-d // (1 << L))):
        while bs[at]:
            out.append((block << L) + int("".join(map(str, bs[at + 1:at + 1 + L])) or "0", 2))
            at += 1 + L
        at += 1
    assert len(out) == k
    return np.array(out, np.int64)


def lzma_stream(data):
    """`lzma`: u8 preset, LEB128 uncompressed size, raw LZMA2 data."""
    size, pos = leb128(data, 1)
    out = lzma.decompress(data[pos:], format=lzma.FORMAT_RAW,
                          filters=[{"id": lzma.FILTER_LZMA2, "preset": data[0]}])
    assert len(out) == size
    return out


def f32(data):
    return np.frombuffer(data, "<f4")


def scatter(n, positions, values):
    """A sparse payload's dense output: +0 where nothing was kept."""
    out = np.zeros(n, np.float32)
    out[positions] = values
    return out


def same_bits(a, b):
    return np.asarray(a, np.float32).tobytes() == np.asarray(b, np.float32).tobytes()


def plus_zeros(values):
    """How many of the values are +0 (bit pattern 0)."""
    return int(np.count_nonzero(np.asarray(values, np.float32).view(np.uint32) == 0))


def test_terngrad_decodes_as_the_text_says():
    # value: per value b then the sign bit; b = 0 decodes to +0 whatever the sign bit.
    recs, decoded = encode_decode("terngrad")
    assert len(recs) >= 20
    minus_zero = 0
    for name, (shape, streams) in recs.items():
        n = int(np.prod(shape))
        (s,) = f32(streams["scale"])
        c = codes(streams["value"], n, 2)
        b, sign = c >> 1, c & 1
        want = np.where(b == 1, np.where(sign == 1, s, -s), np.float32(0)).astype(np.float32)
        got = decoded[name].reshape(-1)
        assert same_bits(got, want), name
        # s·σ·b in floating point would give −0 for a negative value rounded to 0.
        other = (s * np.where(sign == 1, np.float32(1), np.float32(-1)) * b.astype(np.float32)).astype(np.float32)
        minus_zero += int(np.count_nonzero(other.view(np.uint32) != got.view(np.uint32)))
    assert minus_zero > 0, "s·sign·b would give the same bits: the +0 rule is not needed"


def test_onebit_decodes_as_the_text_says():
    # `ef | onebit`: per column j of [shape[0], rest] (one group for a vector) the f32 μ0, μ1.
    recs, decoded = encode_decode("onebit")
    assert len(recs) >= 20
    for name, (shape, streams) in recs.items():
        n = int(np.prod(shape))
        cols = n // shape[0] if len(shape) >= 2 else 1
        means = f32(streams["scale"]).reshape(cols, 2)
        bit = bits(streams["value"])[:n]
        want = means[np.arange(n) % cols, bit]
        assert same_bits(decoded[name].reshape(-1), want), name


def test_sbc_decodes_as_the_text_says():
    # Drop mode (`topk(by_sign=true) | sbc | golomb`): every coded position decodes to the one
    # f32 mean, every other one to +0.
    recs, decoded = encode_decode("sbc")
    assert len(recs) >= 20
    negative = 0
    for name, (shape, streams) in recs.items():
        n = int(np.prod(shape))
        (mean,) = f32(streams["value"])
        negative += mean < 0
        assert "side" not in streams, name
        want = scatter(n, golomb_positions(streams["index"]), mean)
        assert same_bits(decoded[name].reshape(-1), want), name
    assert negative > 0  # both sides are decoded
    # Bitmap mode (a dense tensor): `side` bit 1 = the mean, 0 = +0.
    recs, decoded = encode_decode("sbc-dense", "sbc")
    for name, (shape, streams) in recs.items():
        n = int(np.prod(shape))
        (mean,) = f32(streams["value"])
        want = np.where(bits(streams["side"])[:n] == 1, mean, np.float32(0)).astype(np.float32)
        assert same_bits(decoded[name].reshape(-1), want), name


def bird_case(preset):
    # Split tensors: block j of the kept blocks V (ascending; `golomb` gaps, or `plain` under
    # `lzma` for the -lzma presets) decodes to ±S per element (the sign bits in `value`, S the f32
    # in `scale`), the other elements to +0. Attached vectors: `side` = the bitmap, then the sent
    # entries as f32.
    recs, decoded = encode_decode(preset)
    lzma = preset.endswith("-lzma")
    split = vectors = 0
    for name, (shape, streams) in recs.items():
        n = int(np.prod(shape))
        got = decoded[name].reshape(-1)
        if len(shape) <= 1:
            side = streams["side"]
            nb = -(-n // 8)
            sent = bits(side[:nb])[:n] == 1
            want = np.zeros(n, np.float32)
            want[sent] = f32(side[nb:])
            assert not streams.get("value") and not streams.get("scale"), name
            assert same_bits(got, want), name
            vectors += 1
            continue
        m = shape[2] * shape[3] if len(shape) == 4 else shape[-1]
        index = streams["index"]
        blocks = plain_positions(lzma_stream(index)) if lzma else golomb_positions(index)
        kept = blocks.size * m
        want = np.zeros(n, np.float32)
        if kept:
            (S,) = f32(streams["scale"])
            sign = bits(streams["value"])[:kept]
            where = (blocks[:, None] * m + np.arange(m)[None, :]).reshape(-1)
            want[where] = np.where(sign == 1, S, -S)
        assert same_bits(got, want), name
        split += 1
    assert split >= 10 and vectors >= 5, (split, vectors)


def test_bird_decodes_as_the_text_says():
    for preset in ("bird", "bird+", "bird-lzma", "bird+-lzma"):
        bird_case(preset)


def test_fractional_decodes_as_the_text_says():
    # value: the sign bit, then p − 1 in ⌈log2 P⌉ bits; decoded ±μ_p (the stored f32), and +0
    # where `side` flags a zero. Dense (every value coded; two tensors of the snapshot hold exact
    # zeros, so `side` is read), then after `tcs` (`tcs-q5`, frame 0: k_g = 0 and the positions
    # in `tcspos`).
    recs, decoded = encode_decode("fractional-dense", "fractional(P=16)")
    sides = 0
    for name, (shape, streams) in recs.items():
        n = int(np.prod(shape))
        mu = f32(streams["scale"])
        assert mu.size == 16
        c = codes(streams["value"], n, 5)
        want = np.where(c >> 4 == 1, mu[c & 15], -mu[c & 15]).astype(np.float32)
        if "side" in streams:
            want[bits(streams["side"])[:n] == 1] = 0
            assert plus_zeros(decoded[name]) >= 60, name
            sides += 1
        assert same_bits(decoded[name].reshape(-1), want), name
    assert sides == 2
    recs, decoded = encode_decode("tcs-q5")
    for name, (shape, streams) in recs.items():
        n = int(np.prod(shape))
        index = streams["index"]
        k_g, pos = leb128(index, 0)
        assert k_g == 0, name  # frame 0 is a keyframe
        positions = tcspos_positions(index, pos, n)
        mu = f32(streams["scale"])
        c = codes(streams["value"], positions.size, 5)
        vals = np.where(c >> 4 == 1, mu[c & 15] if mu.size else 0, -mu[c & 15] if mu.size else 0)
        assert same_bits(decoded[name].reshape(-1), scatter(n, positions, vals)), name


def curvefit_segments(value, at, c):
    """A group's segments from the curvefit value stream at `at`: [(basis, coefficients)]."""
    if c == 0:
        return [], at
    segs, S = [], value[at]
    at += 1
    for _ in range(S):
        basis, nc = value[at], value[at + 1]
        segs.append((basis, struct.unpack_from("<%dd" % nc, value, at + 2)))
        at += 2 + 8 * nc
    return segs, at


def curvefit_coordinate(basis, i, L, real):
    if L <= 1:
        return real(0)
    if basis == 0:
        return real(2) * real(i) / (real(L) - real(1)) - real(1)
    if basis == 1:
        return real(i) / (real(L) - real(1))
    return math.log((i + 0.5) / (L - i - 0.5)) / math.log(2.0 * L - 1.0)


def curvefit_group(segs, c, real=float):
    """Each rank's magnitude as the text says: the segment's curve at t in double (Horner's scheme
    from the highest coefficient, every operation rounded to double), clamped to [0, FLT_MAX],
    rounded to f32 once. real=np.float32: the same steps in f32, a plausible other reading."""
    out = np.zeros(c, np.float32)
    S = len(segs)
    for s, (basis, w) in enumerate(segs):
        a, b = s * c // S, (s + 1) * c // S
        for i in range(b - a):
            t = curvefit_coordinate(basis, i, b - a, real)
            if basis == 1:
                v = w[0] * math.exp(w[1] * t) + w[2] * math.exp(w[3] * t)
            else:
                v = real(0)
                for coef in reversed(w):
                    v = real(v * t + real(coef))
            out[a + i] = np.float32(min(v, 3.4028234663852886e38)) if v > 0 else np.float32(0)
    return out


def curvefit_case(preset, pipeline=None, source=SNAPSHOT, records_at_least=20):
    recs, decoded = encode_decode(preset, pipeline, source)
    checked = other = 0
    for name, (shape, streams) in recs.items():
        n = int(np.prod(shape))
        value = streams["value"]
        count, at = leb128(value, 0)
        npos, at = leb128(value, at)
        at += 8  # rmse
        pos_segs, at = curvefit_segments(value, at, npos)
        neg_segs, at = curvefit_segments(value, at, count - npos)
        assert at == len(value), name
        positions = varint_positions(streams["index"])
        assert positions.size == count
        vals = np.concatenate([curvefit_group(pos_segs, npos), -curvefit_group(neg_segs, count - npos)])
        assert same_bits(decoded[name].reshape(-1), scatter(n, positions, vals)), (preset, name)
        alt = np.concatenate([curvefit_group(pos_segs, npos, np.float32),
                              -curvefit_group(neg_segs, count - npos, np.float32)])
        other += int(np.count_nonzero(alt.view(np.uint32) != vals.view(np.uint32)))
        checked += 1
    assert checked >= records_at_least
    return other


def test_curvefit_decodes_as_the_text_says():
    # `deepreduce-fit` = topk(ratio=0.01) | curvefit(segments=4) | varint: the positions in value
    # order, positives first; each group's segments evaluated per rank. Evaluating in f32 gives
    # other bits for some values, so the text's double precision is needed.
    assert curvefit_case("deepreduce-fit") > 0, "f32 would give the same bits: the precision is not needed"
    curvefit_case("curvefit-dexp", "topk(ratio=0.01) | curvefit(basis=dexp) | varint")
    curvefit_case("curvefit-logit", "topk(ratio=0.01) | curvefit(basis=logit, degree=3) | varint")


def test_curvefit_negative_fit_clamped_to_zero_decodes_to_minus_zero():
    # A step the degree-5 polynomial overshoots: the negatives' fit goes below 0 on its tail,
    # is clamped to +0 and negated: −0 (the text), not +0.
    v = np.full(400, -0.001, np.float32)
    v[:3], v[200:] = -10, 0.0005
    np.savez(path("step.npz"), v=v)
    curvefit_case("curvefit-step", "topk(ratio=1) | curvefit(degree=5) | varint", path("step.npz"), 1)
    with np.load(path("curvefit-step.npz")) as z:
        got = z["v"]
    assert np.count_nonzero(got.view(np.uint32) == 0x80000000) > 50


def test_intn_decodes_as_the_text_says():
    # lo + q·step in double, step = (hi − lo)/L rounded to double once, then rounded to f32 once.
    # (q·(hi − lo))/L in double gives other doubles but the same f32 bits on these records.
    other = 0
    for bits_per_value in (8, 4):
        recs, decoded = encode_decode(f"int{bits_per_value}", f"intN(bits={bits_per_value})")
        L = 2 ** bits_per_value - 1
        for name, (shape, streams) in recs.items():
            n = int(np.prod(shape))
            lo, hi = f32(streams["scale"]).astype(np.float64)
            q = codes(streams["value"], n, bits_per_value).astype(np.float64)
            step = (hi - lo) / L
            want = (lo + q * step).astype(np.float32)
            got = decoded[name].reshape(-1)
            assert same_bits(got, want), name
            lo32, hi32 = np.float32(lo), np.float32(hi)  # the same steps in f32
            alt = (lo32 + q.astype(np.float32) * ((hi32 - lo32) / np.float32(L))).astype(np.float32)
            other += int(np.count_nonzero(alt != got))
    assert other > 0, "f32 would give the same bits: the precision is not needed"


def tcs_sequence(pipeline, name):
    """Two frames of two tensors a, b (1000 elements each): frame 0 has five nonzero entries per
    tensor, frame 1 is dense. Returns (records of frames 0 and 1, decoded frame 1, inputs of 1)."""
    rng = np.random.default_rng(11)
    f0 = {k: np.zeros(1000, np.float32) for k in "ab"}
    f0["a"][[3, 70, 400, 401, 999]] = [1, -2, 3, -4, 5]
    f0["b"][[0, 10, 500, 600, 998]] = [6, -7, 8, -9, 10]
    f1 = {k: (rng.standard_normal(1000) + np.sign(rng.standard_normal(1000)) * 3).astype(np.float32) for k in "ab"}
    np.savez(path(name + "0.npz"), **f0)
    np.savez(path(name + "1.npz"), **f1)
    gcz = path(name + ".gcz")
    run("encode", path(name + "0.npz"), path(name + "1.npz"), "-o", gcz, "--pipeline", pipeline, "-f", "--quiet")
    run("decode", gcz, "-o", path(name + ".npz"), "-f")
    with open(gcz, "rb") as f:
        blob = f.read()
    with np.load(path(name + ".frame001.npz")) as z:
        out = {k: z[k] for k in z.files}
    return records(blob, 0), records(blob, 1), out, f0, f1


def test_tcs_global_mask_beyond_the_previous_nonzeros():
    # docs/stages.md, tcs: d = 2000, K_global = 500, K_local = 2. Frame 0 (a keyframe, k_g = 0)
    # codes the top 502 of |g|: the 10 nonzero entries and 492 zeros, so the previous output has
    # 5 stored entries per tensor. Frame 1: K_global exceeds the snapshot's 10 stored entries, so
    # the other 490 positions go to zeros by the tie order — the lower tensor first, the lower
    # position first: k_g = 495 for a (its 5 entries and its 490 lowest other positions), 5 for b.
    rec0, rec1, out, f0, f1 = tcs_sequence("tcs(global=0.25, local=0.001)", "tg")
    assert sorted(rec0) == sorted(rec1) == ["a", "b"]
    for name in "ab":
        k_g, pos = leb128(rec0[name][1]["index"], 0)
        assert k_g == 0, name  # a keyframe record
        assert tcspos_positions(rec0[name][1]["index"], pos, 1000).size == (497 if name == "a" else 5)
    local = 0
    for name, want_kg in (("a", 495), ("b", 5)):
        index = rec1[name][1]["index"]
        k_g, pos = leb128(index, 0)
        assert k_g == want_kg, (name, k_g)
        stored = np.flatnonzero(f0[name])
        others = np.setdiff1d(np.arange(1000), stored)[:k_g - stored.size]
        mask = np.union1d(stored, others)
        coded = tcspos_positions(index, pos, 1000)
        assert np.intersect1d(coded, mask).size == 0
        local += coded.size
        kept = np.union1d(mask, coded)
        values = f32(rec1[name][1]["value"])
        assert values.size == kept.size
        assert same_bits(out[name], scatter(1000, kept, values)), name
        assert same_bits(values, f1[name][kept]), name  # raw values, e = 0 after frame 0
    assert local == 2


def test_tcspos_with_no_local_position_keeps_its_l_byte():
    # local = 0: frame 1 codes no position; its tcspos part is LEB128 0 and the L byte, 0.
    _, rec1, out, f0, f1 = tcs_sequence("tcs(global=0.25, local=0)", "tz")
    for name, want_kg in (("a", 495), ("b", 5)):
        index = rec1[name][1]["index"]
        k_g, pos = leb128(index, 0)
        assert k_g == want_kg and index[pos:] == b"\x00\x00", (name, index[pos:])


if __name__ == "__main__":
    clitest.run_all(globals())
