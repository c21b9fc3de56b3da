#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""CLI end to end, torch.save files (issue 43, items 1, 2 and 4): fixtures written by real
torch.save (tests/fixtures/fixtures_torch.py, made here into the work directory) are encoded with
the lossless preset and decoded back bit-exactly equal to torch.load of the source; decode -o .pt
writes what torch.load(weights_only=True) reads; hostile pickles (calls of os.system,
builtins.eval, subprocess.Popen, INST/OBJ/NEWOBJ, REDUCE of what is not callable, the extension
registry, recursion and memo bombs) are refused with exit 2 and one error line, leaving no output,
and a canary file proves that nothing in them ran; the legacy format and TorchScript are refused
saying how to re-save."""
import json
import os
import subprocess
import sys
import time
import zipfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import clitest
import fixtures_torch
from clitest import fails, path, run

FX = path("fx")
fixtures_torch.make(FX)
EXPECTED = json.load(open(os.path.join(FX, "expected.json")))
HOSTILE = json.load(open(os.path.join(FX, "hostile.json")))
CANARY = os.path.join(FX, "CANARY")


def raw(t):
    """A tensor's elements as bytes, C order (bfloat16 by its bits)."""
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def source_tensors(name):
    """{tensor name: tensor} of a fixture by torch.load, named by the reader's rule."""
    src = "nested.pt" if name in ("big_endian.pt", "little_endian.pt") else name  # (torch 1.13 ignores byteorder)
    obj = torch.load(os.path.join(FX, src))
    return dict(fixtures_torch.names(obj, root=os.path.splitext(name)[0]))


def same(a, b, what):
    assert a.dtype == b.dtype, f"{what}: dtype {b.dtype}, expected {a.dtype}"
    assert tuple(a.shape) == tuple(b.shape), f"{what}: shape {tuple(b.shape)}, expected {tuple(a.shape)}"
    assert raw(a) == raw(b), f"{what}: values differ"


def test_every_fixture_round_trips_bit_exactly_through_lossless_and_back_to_pt():
    assert len(EXPECTED) >= 12, sorted(EXPECTED)
    for name, names in EXPECTED.items():
        src = os.path.join(FX, name)
        gcz = path(name + ".gcz")
        run("encode", src, "-o", gcz, "--preset", "lossless", "--pass-through", "--quiet", "--force")
        out = path(name + ".back.pt")
        run("decode", gcz, "-o", out, "--force")
        back = torch.load(out, weights_only=True)
        assert isinstance(back, dict) and list(back) == names, f"{name}: {list(back)} != {names}"
        want = source_tensors(name)
        for n in names:
            same(want[n], back[n], f"{name}: {n}")


def test_ints_beyond_64_bits_are_values_that_are_not_tensors():
    # An optimizer state's step or a hash can be a Python int of any size (pickle's LONG1 and
    # LONG4): like any value that is not a tensor it is named, skipped, and the tensors read.
    torch.save({"a": torch.arange(4.0), "u": 2**63, "n": -2**64 - 5, "huge": 7**400,
                "opt": {"step": 2**70, "w": torch.ones(2)}}, path("bigint.pt"))
    _, err = run("encode", path("bigint.pt"), "-o", path("bigint.gcz"), "--force")
    assert "4 value(s) that are not tensors (the first: 'u') are not read" in err, err
    run("decode", path("bigint.gcz"), "-o", path("bigint_back.pt"), "--force", "--quiet")
    back = torch.load(path("bigint_back.pt"), weights_only=True)
    assert list(back) == ["a", "opt.w"] and torch.equal(back["a"], torch.arange(4.0)), back
    # As the key of a tensor it cannot make a name: refused, naming the key's type.
    torch.save({2**70: torch.ones(2)}, path("bigkey.pt"))
    fails("encode", path("bigkey.pt"), "-o", path("bigkey.gcz"), code=2, contains="int of more than 64 bits")


def test_a_tensor_saved_alone_and_read_from_standard_input_is_named_tensor():
    # docs/formats.md, "Reading": the file's stem names it; standard input has none.
    torch.save(torch.arange(3.0), path("alone.pt"))
    with open(path("alone.pt"), "rb") as f:
        run("encode", "-", "-o", path("alone.gcz"), "--force", "--quiet", stdin=f.read())
    info = json.loads(run("inspect", path("alone.gcz"), "--json")[0])
    assert [t["name"] for t in info["frames"][0]["tensors"]] == ["tensor"], info["frames"][0]


def test_tensors_are_listed_in_order_with_dtypes_and_non_tensors_are_named():
    out, err = run("encode", os.path.join(FX, "dtypes.pt"), "-o", path("d.gcz"), "--preset", "lossless",
                   "--force")
    assert "3 value(s) that are not tensors (the first: 'step') are not read" in err, err
    assert "i64" in err  # skipped non-floating arrays are named (without --pass-through)
    info = json.loads(run("inspect", path("d.gcz"), "--json")[0])
    assert info["inputs"][0]["format"] == "torch", info["inputs"]
    got = [(t["name"], t["dtype"]) for t in info["frames"][0]["tensors"]]
    assert got == [("f32", "f32"), ("f16", "f16"), ("bf16", "bf16"), ("f64", "f64")], got


def test_decode_to_pt_from_other_formats_is_read_by_weights_only_load():
    rng = np.random.default_rng(5)
    arrays = {"conv.weight": rng.standard_normal((3, 2, 3, 3)).astype(np.float32),
              "fc.bias": rng.standard_normal(4).astype(np.float16),
              "big": rng.standard_normal((300, 300)).astype(np.float64),
              "": np.float32(3.5), "empty": np.zeros((0, 4), np.float32),
              "steps": np.arange(3, dtype=">i8"), "mask": np.array([True, False])}
    np.savez(path("o.npz"), **arrays)
    run("encode", path("o.npz"), "-o", path("o.gcz"), "--preset", "lossless", "--pass-through", "--quiet", "--force")
    run("decode", path("o.gcz"), "-o", path("o.pth"), "--force")
    back = torch.load(path("o.pth"), weights_only=True)
    assert list(back) == list(arrays), list(back)
    for k, a in arrays.items():
        same(torch.from_numpy(np.asarray(a).astype(a.dtype.newbyteorder("<"))), back[k], k)
    # storages are 64-byte aligned, as PyTorch writes them
    with zipfile.ZipFile(path("o.pth")) as z:
        for info in z.infolist():
            if "/data/" in info.filename:
                with open(path("o.pth"), "rb") as f:
                    f.seek(info.header_offset + 26)
                    n, m = np.frombuffer(f.read(4), "<u2")
                assert (info.header_offset + 30 + n + m) % 64 == 0, info.filename
    # a pass-through dtype torch has no storage for is refused, naming it, and nothing is written
    np.savez(path("u.npz"), w=np.ones(3, np.float32), u=np.arange(3, dtype=np.uint32))
    run("encode", path("u.npz"), "-o", path("u.gcz"), "--preset", "lossless", "--pass-through", "--quiet", "--force")
    fails("decode", path("u.gcz"), "-o", path("u.pt"), code=1, contains=["'u'", "no torch storage type"])
    assert not os.path.exists(path("u.pt"))


def test_bfloat16_decodes_to_pt_as_bfloat16():
    t = {"g": torch.randn(5, 7).to(torch.bfloat16)}
    torch.save(t, path("bf.pt"))
    run("encode", path("bf.pt"), "-o", path("bf.gcz"), "--preset", "fp16", "--quiet", "--force")
    run("decode", path("bf.gcz"), "-o", path("bf2.pt"), "--force")
    back = torch.load(path("bf2.pt"), weights_only=True)
    assert back["g"].dtype == torch.bfloat16 and back["g"].shape == (5, 7)


def test_bench_and_standard_input_read_torch_files():
    run("bench", os.path.join(FX, "nested.pt"), "--preset", "lossless")
    with open(os.path.join(FX, "grads.pth"), "rb") as f:
        run("encode", "-", "-o", path("stdin.gcz"), "--preset", "lossless", "--quiet", "--force", stdin=f.read())
    run("decode", path("stdin.gcz"), "-o", path("stdin.pt"), "--force")
    want = source_tensors("grads.pth")
    back = torch.load(path("stdin.pt"), weights_only=True)
    for n in want:
        same(want[n], back[n], n)


def live(name):
    """Whether pickle.loads of the hostile fixture's data.pkl really runs its payload (it creates
    the canary), so that its absence after gradcodec means something."""
    code = ("import pickle, sys, zipfile; pickle.loads(zipfile.ZipFile(sys.argv[1]).read('archive/data.pkl'))")
    subprocess.run([sys.executable, "-c", code, os.path.join(FX, name)], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=60)
    for _ in range(100):  # (Popen's child may still be starting)
        if os.path.exists(CANARY):
            break
        time.sleep(0.05)
    ran = os.path.exists(CANARY)
    if ran:
        os.remove(CANARY)
    return ran


def test_hostile_pickles_are_refused_and_nothing_in_them_runs():
    assert len(HOSTILE) >= 15, sorted(HOSTILE)
    for name, h in sorted(HOSTILE.items()):
        if h["canary"]:
            assert live(name), f"{name}: the payload does not run under pickle.loads: the canary proves nothing"
        out = path(name + ".gcz")
        for args in (["encode", os.path.join(FX, name), "-o", out], ["bench", os.path.join(FX, name)]):
            line = fails(*args, code=2, contains=[name] + h["contains"])
            assert not os.path.exists(CANARY), f"{name}: the canary appeared ({line})"
            assert not os.path.exists(out), f"{name}: an output was left"


def test_legacy_format_and_torchscript_are_refused_saying_how_to_resave():
    fails("encode", os.path.join(FX, "legacy.pt"), "-o", path("l.gcz"), code=2,
          contains=["legacy format", "torch.save(obj, path)"])
    fails("encode", os.path.join(FX, "torchscript.pt"), "-o", path("t.gcz"), code=2,
          contains=["TorchScript", "torch.save(model.state_dict(), path)"])
    assert not os.path.exists(path("l.gcz")) and not os.path.exists(path("t.gcz"))


def test_lying_archives_are_refused_naming_the_member():
    src = os.path.join(FX, "nested.pt")
    with zipfile.ZipFile(src) as z:
        members = {i.filename: z.read(i.filename) for i in z.infolist()}
    prefix = next(iter(members)).split("/")[0]

    def variant(fname, change):
        m = dict(members)
        change(m)
        with zipfile.ZipFile(path(fname), "w", zipfile.ZIP_STORED) as z:
            for k, v in m.items():
                z.writestr(k, v)
        return path(fname)

    short = variant("short.pt", lambda m: m.update({f"{prefix}/data/0": m[f"{prefix}/data/0"][:-4]}))
    fails("encode", short, "-o", path("x.gcz"), code=2, contains=[f"{prefix}/data/0", "bytes"])
    gone = variant("gone.pt", lambda m: m.pop(f"{prefix}/data/1"))
    fails("encode", gone, "-o", path("x.gcz"), code=2, contains=["storage '1'", "no member"])
    order = variant("order.pt", lambda m: m.update({f"{prefix}/byteorder": b"middle"}))
    fails("encode", order, "-o", path("x.gcz"), code=2, contains=["byteorder", "'middle'"])
    # a flipped byte in a storage: the CRC-32 names it
    data = bytearray(open(src, "rb").read())
    with zipfile.ZipFile(src) as z:
        info = z.getinfo(f"{prefix}/data/0")
    with open(src, "rb") as f:
        f.seek(info.header_offset + 26)
        n, m = np.frombuffer(f.read(4), "<u2")
    data[info.header_offset + 30 + n + m] ^= 0x40
    open(path("flip.pt"), "wb").write(bytes(data))
    fails("encode", path("flip.pt"), "-o", path("x.gcz"), code=2, contains=["CRC-32"])
    assert not os.path.exists(path("x.gcz"))


if __name__ == "__main__":
    clitest.run_all(globals())
