#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes the seed corpus of every fuzz target to tests/fuzz/corpus/<target>/ (committed; the
fuzzers grow their own copies from it). Small valid inputs of every shape the readers know, plus
the must-fail containers.

    python3 tests/fuzz/make_corpus.py build/apps/gradcodec
    python3 tests/fuzz/make_corpus.py build/apps/gradcodec torch   # only corpus/torch (needs torch)
    python3 tests/fuzz/make_corpus.py build/apps/gradcodec smartidx   # only corpus/smartidx (also: skcompress, lossless)
"""
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
CORPUS = os.path.join(HERE, "corpus")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def npy_bytes(a, version=None):
    b = io.BytesIO()
    if version is None:
        np.save(b, a)
    else:
        np.lib.format.write_array(b, a, version=version)
    return b.getvalue()


def safetensors_bytes(tensors):
    header, blobs, off = {"__metadata__": {"step": "1"}}, [], 0
    for name, (dtype, a) in tensors.items():
        raw = a.tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def torch_corpus():
    """torch: small torch.save files (whole archives, "PK...") and their data.pkl alone (the pickle
    reader's input), from tests/fixtures/fixtures_torch.py, the hostile pickles included (the
    memo bomb cut short)."""
    import zipfile
    sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
    import fixtures_torch
    shutil.rmtree(os.path.join(CORPUS, "torch"), ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        fixtures_torch.make(tmp)
        for name in sorted(os.listdir(tmp)):
            if name.endswith(".json") or name in ("legacy.pt", "hostile_memo.pt", "hostile_deep.pt",
                                                  "hostile_marks.pt") or name == "CANARY":
                continue
            blob = open(os.path.join(tmp, name), "rb").read()
            stem = name.replace(".", "_")
            if not name.startswith("hostile_"):
                put("torch", stem + ".zip", blob)
            with zipfile.ZipFile(os.path.join(tmp, name)) as z:
                pkl = [n for n in z.namelist() if n.endswith("/data.pkl")]
                if pkl:
                    put("torch", stem + ".pkl", z.read(pkl[0]))
    put("torch", "deep.pkl", b"\x80\x02]q\x000" + b"]h\x00aq\x000" * 600 + b"h\x00.")
    put("torch", "marks.pkl", b"\x80\x02" + b"(" * 1001 + b"t" * 1001 + b".")
    put("torch", "memo_bomb.pkl", b"\x80\x02N" + b"".join(b"r" + struct.pack("<I", i) for i in range(4096)) + b".")


def smartidx_corpus():
    """smartidx: [shape byte] + package streams (docs/stages.md "smartidx"): the documented example
    of a [4, 1, 3, 3] weight, it cut short, an empty stream of the 64-element vector, and streams
    the stage writes for the fuzz target's shapes (`gradcodec encode` of one tensor, read back from
    the container is more than a seed needs: these are written by hand from the layout)."""
    example = [0x01, 0x05, 0x01, 0x02, 0x00, 0xB5, 0x63, 0x40]
    put("smartidx", "example_4x1x3x3.bin", bytes([0] + example))
    put("smartidx", "example_cut.bin", bytes([0] + example[:6]))
    put("smartidx", "empty_64.bin", bytes([5, 0x00, 0x00, 0x00]))
    # [2, 3, 3, 3]: individual positions 0 and 40 (b = 0: gaps 0 and 39 in unary), no pattern
    bits = "1" + "0" * 39 + "1"
    bits += "0" * (-len(bits) % 8)
    put("smartidx", "individual_2x3x3x3.bin",
        bytes([1, 0x02, 0x00, 0x00]) + int(bits, 2).to_bytes(len(bits) // 8, "big"))


def skcompress_corpus():
    """skcompress: [shape byte][index length L][means M] + deltabin's `index` stream + skcompress's
    `value` stream (docs/stages.md "skcompress", "deltabin"), written by hand from the layouts:
    no value of the 64-element vector, and one value of the 1-element tensor (index: k = 1, one
    group of width 0; value: sign bit 1, code length 00001, two cells coded 0: bits 10000100)."""
    put("skcompress", "empty_64.bin", bytes([0, 1, 0, 0x00]))
    put("skcompress", "one_1.bin", bytes([3, 2, 1, 0x01, 0x00, 0x84]))
    put("skcompress", "one_1_cut.bin", bytes([3, 2, 1, 0x01, 0x00]))


def lossless_corpus():
    """lossless: [stage text, chunk and room, width and mode, mask length] + bytes (fuzz_lossless.cpp):
    in encode mode the target encodes the plain bytes itself, so every seed starts from a valid
    stream of its stage — f32 gradients with zero runs, cut in chunks of every size the target
    knows, some tiled past one zsplit block, some with a few bits of the stream flipped — and a
    few raw streams the decoders must refuse."""
    lrng = np.random.default_rng(52)  # its own generator: the other sections keep their bytes
    g = (lrng.standard_normal(96) * 1e-3).astype(np.float32)
    g[20:40] = 0
    plain = g.tobytes()
    for k in range(10):  # the target's ten stage texts
        for c in (0, 5, 9, 13):  # chunks of 1, 13, 4093 and 7 bytes
            room = (k + c) % 4
            put("lossless", f"text{k}_chunk{c}.bin", bytes([k, c | room << 4, 0x82, 0]) + plain)
        put("lossless", f"text{k}_ragged.bin", bytes([k, 0x80 | 6, 0x82, 0]) + plain)
        put("lossless", f"text{k}_width8.bin", bytes([k, 3, 0x83, 0]) + plain)
        put("lossless", f"text{k}_flip.bin", bytes([k, 4, 0x82, 6]) + plain + bytes([0, 0, 0, 0, 0, 0x10]))
        put("lossless", f"text{k}_raw.bin", bytes([k, 2, 0x02]) + lrng.integers(0, 256, 40, dtype=np.uint8).tobytes())
    for k in (0, 1, 2):  # zsplit and zstd past one block: the chunks cut a block anywhere
        put("lossless", f"text{k}_tiled.bin", bytes([k, 0x80 | 11, 0xE2, 0]) + plain)


def main():
    exe = os.path.abspath(sys.argv[1])
    if len(sys.argv) > 2 and sys.argv[2] == "smartidx":
        smartidx_corpus()
        print(f"wrote {len(os.listdir(os.path.join(CORPUS, 'smartidx')))} seed inputs to {CORPUS}/smartidx")
        return
    if len(sys.argv) > 2 and sys.argv[2] == "lossless":
        lossless_corpus()
        print(f"wrote {len(os.listdir(os.path.join(CORPUS, 'lossless')))} seed inputs to {CORPUS}/lossless")
        return
    if len(sys.argv) > 2 and sys.argv[2] == "skcompress":
        skcompress_corpus()
        print(f"wrote {len(os.listdir(os.path.join(CORPUS, 'skcompress')))} seed inputs to {CORPUS}/skcompress")
        return
    if len(sys.argv) > 2 and sys.argv[2] == "torch":
        torch_corpus()
        print(f"wrote {len(os.listdir(os.path.join(CORPUS, 'torch')))} seed inputs to {CORPUS}/torch")
        return
    if os.path.isdir(CORPUS):
        shutil.rmtree(CORPUS)
    rng = np.random.default_rng(11)
    w = rng.standard_normal((4, 3)).astype(np.float32)

    # npy: versions, byte orders, dtypes, Fortran order, 0-d, empty
    put("npy", "f32.npy", npy_bytes(w))
    put("npy", "f64_v2.npy", npy_bytes(w.astype(np.float64), (2, 0)))
    put("npy", "f16_v3.npy", npy_bytes(w.astype(np.float16), (3, 0)))
    put("npy", "big_endian.npy", npy_bytes(w.astype(">f4")))
    put("npy", "fortran.npy", npy_bytes(np.asfortranarray(w)))
    put("npy", "scalar.npy", npy_bytes(np.array(1.5, np.float32)))
    put("npy", "empty.npy", npy_bytes(np.zeros((0, 3), np.float32)))
    put("npy", "int64.npy", npy_bytes(np.arange(6, dtype=np.int64).reshape(2, 3)))

    # npz: stored and deflated
    for name, save in (("stored.npz", np.savez), ("deflated.npz", np.savez_compressed)):
        b = io.BytesIO()
        save(b, w=w, b=rng.standard_normal(3).astype(np.float32), step=np.array(3))
        put("npz", name, b.getvalue())

    # safetensors
    put("safetensors", "f32.safetensors", safetensors_bytes({"w": ("F32", w), "b": ("F32", w[0])}))
    put("safetensors", "f16_bf16.safetensors",
        safetensors_bytes({"h": ("F16", w.astype(np.float16)),
                           "bf": ("BF16", (w.view(np.uint32) >> 16).astype(np.uint16))}))
    put("safetensors", "empty.safetensors", safetensors_bytes({}))

    # pipeline texts: every preset and a few hand-written chains
    presets = json.loads(subprocess.run([exe, "list", "presets", "--json"], check=True,
                                        stdout=subprocess.PIPE).stdout)
    for p in presets:
        put("pipeline", p["name"] + ".txt", p["pipeline"].encode())
    for i, text in enumerate(["topk(ratio=0.01, scope=global) | raw | golomb | zstd(level=3)",
                              "ef(beta=1, gamma=1) | randk(k=10, unbiased=true) | qsgd(levels=3, bucket=64)",
                              "delta | fp16 | shuffle | lzma", "topk(k=5) | sign(scale=l1) | rle",
                              "topk(ratio=0.1) | bloom(fpr=0.05, policy=random, fp_aware=true, second=true)"]):
        put("pipeline", f"chain{i}.txt", text.encode())

    # roundtrip: [preset index, seed, rows] + f32 values
    for k in range(len(presets)):
        vals = rng.standard_normal(48).astype(np.float32).tobytes()
        put("roundtrip", f"preset{k:02d}.bin", bytes([k, k * 7 % 256, k % 8]) + vals)
    # fp16 (preset 1) of a finite value beyond 65504: the encoder's documented refusal (the
    # target aborted on it after ~86 runs before it took the refusal as an outcome)
    fp16 = [p["name"] for p in presets].index("fp16")
    put("roundtrip", "fp16_overflow.bin", bytes([fp16, 0, 1]) + np.array([1, 7e4, -2, 0.5], np.float32).tobytes())

    # stages: [preset index, shape/seed, variant] — each decodes the preset's valid record of a
    # small tensor; a few change a stream (u16 length, then bytes XORed in)
    for k in range(len(presets)):
        put("stages", f"preset{k:02d}.bin", bytes([k, k % 8, 0]))
        put("stages", f"preset{k:02d}_cut.bin", bytes([k, (k + 3) % 8, 0x81, 5, 0, 1, 2, 3, 4, 5]))
        put("stages", f"preset{k:02d}_flip.bin", bytes([k, (k + 5) % 8, 0, 0xFF, 0xFF, 0, 0, 0, 0x40]))

    # float: [stage text index, u16 value count] + the value stream (fuzz_float.cpp's texts 0-7:
    # five zfp modes, three fpzip precisions); fixed-rate zfp accepts any bytes of its exact size
    for k in range(8):
        put("float", f"text{k}_empty.bin", bytes([k, 0, 0]))
        put("float", f"text{k}_ones.bin", bytes([k, 100, 0]) + b"\xff" * 64)
        put("float", f"text{k}_zeros.bin", bytes([k, 17, 0]) + b"\x00" * 40)
    frng = np.random.default_rng(46)  # its own generator: the later sections keep their bytes
    put("float", "rate4_exact.bin", bytes([0, 100, 0]) + frng.integers(0, 256, 50, dtype=np.uint8).tobytes())
    put("float", "fpzip_chunk.bin", bytes([5, 8, 0]) + struct.pack("<I", 40) + frng.integers(0, 256, 40, dtype=np.uint8).tobytes())
    # corpus/float/libfpzip_crash_*.bin are not written here: they are fuzz_float's first findings,
    # inputs on which libfpzip 1.3's decoder crashed, kept so that the replay test runs the
    # stage's own decoder (docs/robustness.md) on them in every build.

    # container: the worked example, the must-fail fixtures, and small containers of every preset
    with tempfile.TemporaryDirectory() as tmp:
        g = os.path.join(tmp, "g.npz")
        np.savez(g, **{"conv.weight": rng.standard_normal((4, 2, 3, 3)).astype(np.float32),
                       "conv.bias": rng.standard_normal(4).astype(np.float32),
                       "fc.weight": rng.standard_normal((5, 8)).astype(np.float32)})
        for p in presets:
            out = os.path.join(tmp, p["name"] + ".gcz")
            subprocess.run([exe, "encode", g, g, "-o", out, "--preset", p["name"], "--quiet"], check=True)
            put("container", p["name"] + ".gcz", open(out, "rb").read())
        # stage options no preset uses: bloom's second filter (Kostopoulou 2020 §3.6)
        for name, text in (("bloom-second", "topk(ratio=0.1) | bloom(fpr=0.05, second=true)"),):
            out = os.path.join(tmp, name + ".gcz")
            subprocess.run([exe, "encode", g, g, "-o", out, "--pipeline", text, "--quiet"], check=True)
            put("container", name + ".gcz", open(out, "rb").read())
        # merge: [count - 2, method + 4 * seed], then u32-length-prefixed containers (the last
        # without a length) made from one small snapshot with different seeds
        m = os.path.join(tmp, "m.npz")
        np.savez(m, **{"fc.weight": rng.standard_normal((3, 4)).astype(np.float32),
                       "fc.bias": rng.standard_normal(3).astype(np.float32)})
        for i, (preset, count, method) in enumerate([("signsgd", 2, 0), ("ssdm", 3, 1), ("ef-signsgd", 4, 2),
                                                     ("onebit", 2, 2), ("lossless", 2, 3), ("topk-1pct", 3, 3),
                                                     ("powersgd-r1", 2, 3), ("qsgd4", 4, 0)]):
            parts = []
            for w in range(count):
                out = os.path.join(tmp, f"w{w}.gcz")
                subprocess.run([exe, "encode", m, m, "-o", out, "--preset", preset, "--seed", str(w), "--quiet", "-f"],
                               check=True)
                parts.append(open(out, "rb").read())
            blob = bytes([count - 2, method + 4 * i])
            for part in parts[:-1]:
                blob += struct.pack("<I", len(part)) + part
            put("merge", f"{i}_{preset}_{count}.bin", blob + parts[-1])
    torch_corpus()
    smartidx_corpus()
    skcompress_corpus()
    lossless_corpus()
    corrupt = os.path.join(ROOT, "test_data", "corrupt")
    for f in sorted(os.listdir(corrupt)):
        if f.endswith(".gcz"):
            put("container", "corrupt_" + f, open(os.path.join(corrupt, f), "rb").read())
    n = sum(len(fs) for _, _, fs in os.walk(CORPUS))
    print(f"wrote {n} seed inputs to {CORPUS}")


if __name__ == "__main__":
    main()
