#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""CLI end to end: encode real files written by numpy / h5py, decode them to every output format,
and check with numpy / h5py / a strict safetensors reader that names, shapes, dtypes and every
bit of the values come back (lossless preset)."""
import json
import os
import sys
import time

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import fails, path, run

rng = np.random.default_rng(7)


def specials(dtype, shape):
    a = rng.standard_normal(shape).astype(dtype)
    flat = a.reshape(-1)
    if flat.size >= 4:
        flat[0], flat[1], flat[2], flat[3] = np.nan, np.inf, -np.inf, -0.0
    return a


ARRAYS = {
    "layer1.conv.weight": specials(np.float32, (8, 3, 3, 3)),
    "layer1.conv.bias": specials(np.float32, (8,)),
    "fc.weight": specials(np.float64, (10, 20)),
    "half.w": specials(np.float16, (33, 7)),
    "scalar": np.array(1.25, dtype=np.float32),
    "empty": np.zeros((0, 4), dtype=np.float32),
}


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def load_any(p):
    """Loads an output of gradcodec decode into {name: array}."""
    if p.endswith(".npz"):
        with np.load(p, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    if p.endswith(".h5"):
        out = {}
        with h5py.File(p, "r") as f:
            f.visititems(lambda n, o: out.__setitem__(n.replace("/", "."), o[()]) if isinstance(o, h5py.Dataset) else None)
        return {k: np.asarray(v) for k, v in out.items()}
    if p.endswith(".safetensors"):
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
        import safetensors_check  # the strict reader of tests/fixtures (validates the whole file)
        with open(p, "rb") as f:
            _, _, _, tensors = safetensors_check.parse(f.read())
        return {t["name"]: safetensors_check.decode(t) for t in tensors}
    if p.endswith("/"):
        return {f[:-4]: np.load(os.path.join(p, f), allow_pickle=False) for f in os.listdir(p) if f.endswith(".npy")}
    raise ValueError(p)


def check_roundtrip(src_name, arrays, out_ext, preset="lossless"):
    gcz = path(src_name + "." + preset + ".gcz")
    run("encode", path(src_name), "-o", gcz, "--preset", preset, "--force", "--quiet")
    out = path(src_name + ".out" + out_ext)
    run("decode", gcz, "-o", out, "--force")
    got = load_any(out)
    assert set(got) == set(arrays), f"{out}: names {sorted(got)} != {sorted(arrays)}"
    for k, v in arrays.items():
        assert same_bits(v, got[k]), f"{out}: {k} differs ({v.dtype}{v.shape} vs {got[k].dtype}{got[k].shape})"


def test_npz_to_every_format():
    np.savez(path("a.npz"), **ARRAYS)
    for ext in (".npz", ".h5", ".safetensors", "/"):
        check_roundtrip("a.npz", ARRAYS, ext)
    # A name holding '/' cannot be a file in a directory: refused, naming the outputs that keep it.
    np.savez(path("slash.npz"), **{"b/c": np.ones(2, np.float32)})
    run("encode", path("slash.npz"), "-o", path("slash.gcz"), "--force", "--quiet")
    fails("decode", path("slash.gcz"), "-o", path("slash_dir") + "/", code=1,
          contains=["tensor name 'b/c'", "an .npz or .safetensors output keeps it"])
    assert not os.path.exists(path("slash_dir"))
    run("decode", path("slash.gcz"), "-o", path("slash_out.npz"), "--quiet")
    with np.load(path("slash_out.npz")) as z:
        assert z.files == ["b/c"], z.files


def test_compressed_npz_and_fortran_and_bigendian():
    arrays = {"f": np.asfortranarray(rng.standard_normal((5, 6)).astype(np.float32)),
              "be": rng.standard_normal((4, 4)).astype(">f4")}
    np.savez_compressed(path("c.npz"), **arrays)
    run("encode", path("c.npz"), "-o", path("c.gcz"), "--force", "--quiet")
    run("decode", path("c.gcz"), "-o", path("c.out.npz"), "--force")
    got = load_any(path("c.out.npz"))
    assert np.array_equal(got["f"], arrays["f"]) and got["f"].shape == (5, 6)
    assert got["be"].dtype == np.dtype(">f4"), got["be"].dtype   # byte order restored
    assert got["be"].tobytes() == arrays["be"].tobytes()


def test_hdf5_variable_length_strings_refused_up_front_with_pass_through():
    # h5py's variable-length strings cannot be stored as bytes: skipped (without promising that
    # --pass-through keeps them), and with --pass-through refused before anything is encoded,
    # with the --exclude that leaves them out.
    with h5py.File(path("vl.h5"), "w") as f:
        f["w"] = np.arange(6, dtype=np.float32)
        f.create_dataset("labels.names", data=["a", "bb", "ccc"], dtype=h5py.string_dtype())
        f["fixed"] = np.array([b"ab", b"cd"], dtype="S2")
    _, err = run("encode", path("vl.h5"), "-o", path("vl.gcz"), "--force")
    line = [l for l in err.splitlines() if "labels.names" in l]
    assert len(line) == 1 and "variable-length" in line[0] and "--pass-through" not in line[0], err
    fails("encode", path("vl.h5"), "-o", path("vl_pt.gcz"), "--pass-through", code=2,
          contains=["tensor 'labels.names' (dtype |O, shape [3]): variable-length data cannot be passed through",
                    "--exclude '^labels\\.names$'"])
    assert not os.path.exists(path("vl_pt.gcz"))
    run("encode", path("vl.h5"), "-o", path("vl_pt.gcz"), "--pass-through", "--exclude", "^labels\\.names$", "--quiet")
    run("decode", path("vl_pt.gcz"), "-o", path("vl_out.h5"), "--force")
    with h5py.File(path("vl_out.h5"), "r") as f:
        assert sorted(f.keys()) == ["fixed", "w"]
        assert f["fixed"][()].tolist() == [b"ab", b"cd"] and f["w"][()].tolist() == list(range(6))


def test_hdf5_links_not_followed_are_named():
    with h5py.File(path("other.h5"), "w") as f:
        f["x"] = np.ones(3, np.float32)
    with h5py.File(path("links.h5"), "w") as f:
        f["g/w"] = np.arange(5, dtype=np.float32)
        f["alias"] = h5py.SoftLink("/g/w")
        f["ext"] = h5py.ExternalLink(path("other.h5"), "/x")
        f["hard"] = f["g/w"]
    _, err = run("encode", path("links.h5"), "-o", path("links.gcz"), "--force")
    assert "warning: " + path("links.h5") + ": soft link /alias -> /g/w is not followed" in err, err
    assert "external link /ext is not followed" in err, err
    assert "hard link /hard names the same dataset as /g/w, which is read once, under that name" in err, err
    info = json.loads(run("inspect", path("links.gcz"), "--json")[0])
    assert [t["name"] for t in info["frames"][0]["tensors"]] == ["g.w"]  # the target, once
    _, err = run("encode", path("links.h5"), "-o", path("links.gcz"), "--force", "--quiet")
    assert err == "", err


def test_hdf5_nested_groups_roundtrip():
    with h5py.File(path("h.h5"), "w") as f:
        f.create_dataset("model/layer1/weight", data=ARRAYS["layer1.conv.weight"], chunks=(2, 3, 3, 3),
                         compression="gzip", shuffle=True, fletcher32=True)
        f.create_dataset("model/layer1/bias", data=ARRAYS["layer1.conv.bias"])
        f.create_dataset("half", data=ARRAYS["half.w"])
        f.attrs["step"] = 3
    run("encode", path("h.h5"), "-o", path("h.gcz"), "--force", "--quiet")
    run("decode", path("h.gcz"), "-o", path("h.out.h5"), "--force")
    got = load_any(path("h.out.h5"))
    assert same_bits(got["model.layer1.weight"], ARRAYS["layer1.conv.weight"])
    assert same_bits(got["model.layer1.bias"], ARRAYS["layer1.conv.bias"])
    assert same_bits(got["half"], ARRAYS["half.w"])


def test_single_npy_and_directory():
    np.save(path("g.npy"), ARRAYS["fc.weight"])
    run("encode", path("g.npy"), "-o", path("g.gcz"), "--force", "--quiet")
    run("decode", path("g.gcz"), "-o", path("g.out.npy"), "--force")
    assert same_bits(np.load(path("g.out.npy")), ARRAYS["fc.weight"])
    os.makedirs(path("dir"), exist_ok=True)
    for k in ("fc.weight", "half.w"):
        np.save(path("dir", k + ".npy"), ARRAYS[k])
    run("encode", path("dir"), "-o", path("dir.gcz"), "--force", "--quiet")
    out = json.loads(run("inspect", path("dir.gcz"), "--json")[0])
    assert [t["name"] for t in out["frames"][0]["tensors"]] == ["fc.weight", "half.w"]


def test_stdin_stdout():
    np.savez(path("s.npz"), w=ARRAYS["fc.weight"])
    with open(path("s.npz"), "rb") as f:
        gcz, _ = run("encode", "-", "-o", "-", "--quiet", stdin=f.read())
    decoded, _ = run("decode", "-", "-o", "-", stdin=gcz)
    with open(path("s.out.npz"), "wb") as f:
        f.write(decoded)
    assert same_bits(load_any(path("s.out.npz"))["w"], ARRAYS["fc.weight"])
    # The container records the source as given ('-'); inspect's text says what it was.
    text, _ = run("inspect", "-", stdin=gcz)
    assert b"frame 0 (keyframe)  <stdin>\n" in text, text
    assert json.loads(run("inspect", "-", "--json", stdin=gcz)[0])["frames"][0]["source"] == "-"


def test_sequence_frames_and_single_tensor():
    for i in range(3):
        np.savez(path(f"step{i}.npz"), w=rng.standard_normal((50, 20)).astype(np.float32),
                 b=rng.standard_normal(20).astype(np.float32))
    run("encode", *[path(f"step{i}.npz") for i in range(3)], "-o", path("seq.gcz"), "--force", "--quiet")
    info = json.loads(run("inspect", path("seq.gcz"), "--json")[0])
    assert info["totals"]["frames"] == 3
    run("decode", path("seq.gcz"), "--frame", "2", "--tensor", "w", "-o", path("w2.npy"), "--force")
    with np.load(path("step2.npz")) as z:
        assert same_bits(np.load(path("w2.npy")), z["w"])
    run("decode", path("seq.gcz"), "-o", path("seq.npz"), "--force")
    for i in range(3):
        with np.load(path(f"step{i}.npz")) as a, np.load(path(f"seq.frame{i:03d}.npz")) as b:
            assert same_bits(a["w"], b["w"]) and same_bits(a["b"], b["b"])


def test_non_float_skip_pass_through_strict():
    np.savez(path("m.npz"), w=ARRAYS["fc.weight"], step=np.int64(12), mask=np.array([True, False]),
             c=np.array([1 + 2j], np.complex64))
    _, err = run("encode", path("m.npz"), "-o", path("m.gcz"), "--force")
    for name, dt in (("step", "<i8"), ("mask", "|b1"), ("c", "<c8")):
        assert f"skipping tensor '{name}' (dtype {dt}" in err, err
    assert "tensor 'step' (dtype <i8, shape []): not floating-point data" in err, err
    assert "tensor 'c' (dtype <c8, shape [1]): complex numbers are not compressed" in err, err
    # An extended-precision float is a float, just not one gradcodec compresses: said so.
    np.savez(path("ld.npz"), w=ARRAYS["fc.weight"], x=np.ones(3, np.longdouble))
    _, err = run("encode", path("ld.npz"), "-o", path("ld.gcz"), "--force")
    assert "-byte floats are not compressed (only 2-, 4- and 8-byte floats and bfloat16 are)" in err, err
    assert "not floating-point" not in err, err
    info = json.loads(run("inspect", path("m.gcz"), "--json")[0])
    assert [t["name"] for t in info["frames"][0]["tensors"]] == ["w"]
    run("encode", path("m.npz"), "-o", path("mp.gcz"), "--force", "--pass-through", "--quiet")
    run("decode", path("mp.gcz"), "-o", path("mp.npz"), "--force")
    with np.load(path("mp.npz")) as z, np.load(path("m.npz")) as src:
        for k in src.files:
            assert same_bits(z[k], src[k]), k
    fails("encode", path("m.npz"), "-o", path("ms.gcz"), "--strict", code=2, contains=["step", "--strict"])
    assert not os.path.exists(path("ms.gcz"))
    # A long double passed through comes back to HDF5 as h5py writes it (decode -o .h5 refused the
    # whole container: "dtype '<f16' cannot be stored in HDF5"), and to .npz as it went in.
    with h5py.File(path("ld.h5"), "w") as h:
        h["w"] = ARRAYS["fc.weight"]
        h["ld"] = np.arange(5, dtype=np.longdouble) / 3
    run("encode", path("ld.h5"), "-o", path("ldp.gcz"), "--pass-through", "--force", "--quiet")
    for out in ("ldp.h5", "ldp.npz"):
        run("decode", path("ldp.gcz"), "-o", path(out), "--force", "--quiet")
    with h5py.File(path("ld.h5"), "r") as a, h5py.File(path("ldp.h5"), "r") as b:
        assert b["ld"].dtype == np.longdouble and b["ld"][...].tobytes() == a["ld"][...].tobytes()
    with np.load(path("ldp.npz")) as z, h5py.File(path("ld.h5"), "r") as a:
        assert z["ld"].dtype == np.longdouble and z["ld"].tobytes() == a["ld"][...].tobytes()


def test_f64_beyond_float32_range_refused_by_lossy_pipelines():
    # A lossy pipeline computes in float32: 1e39 would become Inf, and qsgd's norm NaN for every
    # element (a CLI probe found all 256 values NaN, exit 0). Refused, or stored raw on request;
    # lossless keeps it bit-exact.
    big = np.array([1e39, 1.0, -2.0, 0.5] * 64, np.float64)
    np.save(path("big64.npy"), big)
    for preset in ("qsgd8", "ssdm", "fp16", "bird+"):
        fails("encode", path("big64.npy"), "-o", path("big64.gcz"), "--preset", preset, "--force", code=2,
              contains="64 value(s) beyond float32's range")
    run("encode", path("big64.npy"), "-o", path("big64.gcz"), "--preset", "qsgd8", "--nonfinite", "raw",
        "--force", "--quiet")
    run("decode", path("big64.gcz"), "-o", path("big64_out.npy"), "--force")
    assert same_bits(np.load(path("big64_out.npy")), big)
    run("encode", path("big64.npy"), "-o", path("big64.gcz"), "--preset", "lossless", "--force", "--quiet")


def test_nonfinite_lossy_refuses_or_stores_raw():
    g = rng.standard_normal((64, 32)).astype(np.float32)
    g.reshape(-1)[[3, 70, 500]] = [np.nan, np.inf, -np.inf]
    clean = rng.standard_normal(300).astype(np.float32)
    np.savez(path("nf.npz"), clean=clean, bad=g)
    out = path("nf.gcz")
    # Lossy by default: refused, naming the tensor and the count; no output left behind.
    fails("encode", path("nf.npz"), "-o", out, "--preset", "topk-1pct", code=2,
          contains=["tensor 'bad'", "3 non-finite", "--nonfinite=raw"])
    assert not os.path.exists(out)
    fails("bench", path("nf.npz"), "--preset", "qsgd8", "--quiet", "--min-time", "0", code=2, contains="tensor 'bad'")
    fails("encode", path("nf.npz"), "-o", out, "--preset", "topk-1pct", "--nonfinite", "maybe", code=1,
          contains="--nonfinite")
    # --nonfinite=raw: the tensor is stored raw (bit-exact), the others go through the pipeline.
    run("encode", path("nf.npz"), "-o", out, "--preset", "topk-1pct", "--nonfinite", "raw")
    info = json.loads(run("inspect", out, "--json")[0])
    storage = {t["name"]: t["storage"] for t in info["frames"][0]["tensors"]}
    assert storage == {"clean": "pipeline", "bad": "raw"}, storage
    run("decode", out, "-o", path("nf_out.npz"))
    with np.load(path("nf_out.npz")) as z:
        assert same_bits(z["bad"], g)
        assert np.count_nonzero(z["clean"]) == 3  # 1% of 300, rounded
    # Dense quantizers that count NaN/Inf as they code (sign, qsgd): the same refusal and count,
    # the same raw storage.
    for preset in ("signsgd", "qsgd4"):
        fails("encode", path("nf.npz"), "-o", out, "--preset", preset, "--force", code=2,
              contains=["tensor 'bad'", "3 non-finite"])
        run("encode", path("nf.npz"), "-o", out, "--preset", preset, "--nonfinite", "raw", "--force")
        info = json.loads(run("inspect", out, "--json")[0])
        storage = {t["name"]: t["storage"] for t in info["frames"][0]["tensors"]}
        assert storage == {"clean": "pipeline", "bad": "raw"}, (preset, storage)
        run("decode", out, "-o", path("nf_out.npz"), "--force")
        with np.load(path("nf_out.npz")) as z:
            assert same_bits(z["bad"], g), preset
    # Lossless pipelines keep NaN/Inf bit-exact without being asked.
    run("encode", path("nf.npz"), "-o", path("nf2.gcz"), "--preset", "lossless")
    run("decode", path("nf2.gcz"), "-o", path("nf2_out.npz"))
    with np.load(path("nf2_out.npz")) as z:
        assert same_bits(z["bad"], g) and same_bits(z["clean"], clean)


def test_nonfinite_screened_by_bird_counts_exactly():
    # bird/bird+ count an f32 tensor's NaN/Inf while computing their block norms (the codec then
    # skips its own pass): through the frame plan (a weight with a bias), the stage's own
    # selection (no bias), the 1-D path, and the codec's count for a non-f32 tensor. Each is
    # refused with its exact count, or stored raw bit for bit with --nonfinite=raw.
    def with_bad(shape, dtype, where):
        a = rng.standard_normal(shape).astype(dtype)
        a.reshape(-1)[where] = [(np.nan, np.inf, -np.inf)[i % 3] for i in range(len(where))]
        return a
    cases = {
        "planned": {"l.weight": with_bad((16, 8, 3, 3), np.float32, [0, 500, 1151]),
                    "l.bias": rng.standard_normal(16).astype(np.float32)},
        "own": {"m.weight": with_bad((64, 32), np.float32, [7, 8, 9, 2047])},
        "vector": {"v": with_bad((100,), np.float32, [99])},
        "f64": {"d.weight": with_bad((8, 9), np.float64, [1, 2])},
        "bias": {"b.weight": rng.standard_normal((16, 8, 3, 3)).astype(np.float32),
                 "b.bias": with_bad((16,), np.float32, [3, 4])},
    }
    clean = {"ok.weight": rng.standard_normal((32, 4, 3, 3)).astype(np.float32)}
    for label, arrays in cases.items():
        bad = [(k, int(np.count_nonzero(~np.isfinite(v)))) for k, v in arrays.items() if not np.isfinite(v).all()]
        assert len(bad) == 1
        name, count = bad[0]
        src = path("nfb_%s.npz" % label)
        np.savez(src, **clean, **arrays)
        for preset in ("bird+", "bird"):
            out = path("nfb_%s_%s.gcz" % (label, preset))
            fails("encode", src, "-o", out, "--preset", preset, code=2,
                  contains=["tensor '%s'" % name, "has %d non-finite" % count])
            assert not os.path.exists(out)
            run("encode", src, "-o", out, "--preset", preset, "--nonfinite", "raw")
            info = json.loads(run("inspect", out, "--json")[0])
            storage = {t["name"]: t["storage"] for t in info["frames"][0]["tensors"]}
            assert storage[name] == "raw" and storage["ok.weight"] == "pipeline", (label, preset, storage)
            run("decode", out, "-o", path("nfb_out.npz"), "--force")
            with np.load(path("nfb_out.npz")) as z:
                assert same_bits(z[name], arrays[name]), (label, preset)
    # Finite values whose block L1 overflows f32 are not non-finite: encoded, not refused.
    big = np.full((4, 9), 3e38, dtype=np.float32)
    np.savez(path("nfb_big.npz"), big=big)
    run("encode", path("nfb_big.npz"), "-o", path("nfb_big.gcz"), "--preset", "bird+")
    info = json.loads(run("inspect", path("nfb_big.gcz"), "--json")[0])
    assert info["frames"][0]["tensors"][0]["storage"] == "pipeline", info["frames"][0]["tensors"][0]


def test_values_a_stage_cannot_hold_are_refused_or_stored_raw():
    # Finite values so large that a stage cannot represent them (a qsgd/ssdm norm beyond
    # float32, a value beyond float16) would decode as Inf/NaN. Every preset either decodes them
    # to finite values or refuses the tensor (exit 2, naming it and the stage, no output), and with
    # --nonfinite=raw stores it raw, bit for bit, with the other tensors encoded as usual.
    huge = (np.sign(rng.standard_normal((64, 300))) * 3e37).astype(np.float32)
    ok = rng.standard_normal((64, 300)).astype(np.float32)
    src = path("ovf.npz")
    np.savez(src, ok=ok, huge=huge)
    presets = [line.split()[0] for line in run("list", "presets")[0].decode().splitlines()
               if line and not line[0].isspace()]
    refused = set()
    for preset in presets:
        out, dec = path("ovf_%s.gcz" % preset), path("ovf_%s.npz" % preset)
        try:
            run("encode", src, "-o", out, "--preset", preset, "--quiet")
            encoded = True
        except AssertionError:  # checked below: exit 2 and the one error line
            encoded = False
        if encoded:
            run("decode", out, "-o", dec, "--quiet")
            with np.load(dec) as z:
                assert np.isfinite(z["huge"]).all() and np.isfinite(z["ok"]).all(), preset
            continue
        refused.add(preset)
        stage = {"fp16": "fp16", "ssdm": "ssdm"}.get(preset, "qsgd")
        fails("encode", src, "-o", out, "--preset", preset, code=2,
              contains=["tensor 'huge': %s: " % stage, "would decode as Inf/NaN", "--nonfinite=raw"])
        assert not os.path.exists(out), preset
        run("encode", src, "-o", out, "--preset", preset, "--nonfinite", "raw", "--quiet")
        info = json.loads(run("inspect", out, "--json")[0])
        t = {x["name"]: x for x in info["frames"][0]["tensors"]}
        assert t["huge"]["storage"] == "raw" and t["ok"]["storage"] == "pipeline", (preset, t)
        assert t["huge"]["stages"] == "raw (encoding would grow it, or --nonfinite=raw)", t["huge"]
        run("decode", out, "-o", dec, "--quiet")
        with np.load(dec) as z:
            assert same_bits(z["huge"], huge) and np.isfinite(z["ok"]).all(), preset
    assert refused == {"fp16", "qsgd8", "qsgd4", "qsgd2", "ssdm"}, refused
    fails("bench", src, "--preset", "ssdm", "--quiet", "--min-time", "0", code=2, contains="tensor 'huge': ssdm:")
    # A lossless pipeline stores such a tensor raw only when its encoding would grow it.
    run("encode", src, "-o", path("ovf_ll.gcz"), "--pipeline", "raw", "--quiet")
    info = json.loads(run("inspect", path("ovf_ll.gcz"), "--json")[0])
    assert info["frames"][0]["tensors"][0]["stages"] == "raw (encoding would grow it)", info["frames"][0]["tensors"][0]


def test_f16_and_bf16_tensors_never_decode_to_inf():
    # Finite f16/bf16 values near their dtype's largest: a lossy estimate that overshoots it (a qsgd
    # level at the bucket's norm, ssdm's norm-scaled signs, bird+'s block scale, a zfp block) was
    # rounded to Inf on decode with exit 0. Every preset now decodes finite values or refuses the
    # tensor (exit 2, the count, no output), and --nonfinite=raw stores it raw, bit for bit.
    top = (np.sign(rng.standard_normal((64, 32, 3, 3))) * 60000 * rng.uniform(0.5, 1, (64, 32, 3, 3)))
    src = path("f16top.npz")
    np.savez(src, top=top.astype(np.float16), ok=rng.standard_normal(300).astype(np.float16))
    presets = [line.split()[0] for line in run("list", "presets")[0].decode().splitlines()
               if line and not line[0].isspace()]
    refused = []
    for preset in presets:
        out, dec = path("f16top_%s.gcz" % preset), path("f16top_%s.npz" % preset)
        try:
            run("encode", src, "-o", out, "--preset", preset, "--seed", 1, "--quiet", "--force")
        except AssertionError:
            refused.append(preset)
            fails("encode", src, "-o", out, "--preset", preset, "--seed", 1, "--force", code=2,
                  contains=["tensor 'top'", "decoded value(s) beyond f16's range", "--nonfinite=raw"])
            assert not os.path.exists(out), preset
            run("encode", src, "-o", out, "--preset", preset, "--seed", 1, "--nonfinite", "raw", "--quiet")
        run("decode", out, "-o", dec, "--quiet", "--force")
        with np.load(dec) as z:
            assert np.isfinite(z["top"]).all() and np.isfinite(z["ok"]).all(), preset
            if preset in refused:
                assert same_bits(z["top"], top.astype(np.float16)), preset
    assert {"qsgd4", "ssdm"} <= set(refused), refused
    # bf16: two values of 2.4e38 make a qsgd bucket norm of 3.40e38, within float32 but not bf16.
    bits = np.zeros(512, np.uint16)
    bits[:2] = 0x7f35  # 2.4e38 in bf16
    header = json.dumps({"w": {"dtype": "BF16", "shape": [512], "data_offsets": [0, 1024]}}).encode()
    header += b" " * (-len(header) % 8)
    with open(path("bftop.safetensors"), "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header + bits.tobytes())
    fails("encode", path("bftop.safetensors"), "-o", path("bftop.gcz"), "--pipeline", "qsgd(levels=1)", "--seed", 2,
          "--force", code=2, contains=["tensor 'w'", "beyond bf16's range"])
    # A stateful pipeline decodes as it encodes: refused under either policy, never raw mid-sequence.
    for extra in ([], ["--nonfinite", "raw"]):
        fails("encode", src, "-o", path("f16ef.gcz"), "--pipeline", "ef | qsgd(levels=1)", "--seed", 1, "--force",
              *extra, code=2, contains=["tensor 'top'", "beyond f16's range"])


def test_nonfinite_screened_by_topk_counts_exactly():
    # topk (layer scope) counts an f32 tensor's NaN/Inf in its first histogram pass, so the codec
    # skips its own: below and above the 4096 elements where that pass splits four ways, with a
    # ratio that keeps everything (its own path), and against the codec's count (f64; scope=global).
    cases = {
        "small": ((40, 50), np.float32, [0, 1999]),
        "large": ((300, 41), np.float32, [3, 4, 5, 6, 12299]),
        "f64": ((30, 30), np.float64, [10]),
    }
    pipelines = ["topk(ratio=0.01)", "topk(ratio=1)", "topk(ratio=0.01, scope=global)"]
    clean = {"ok": rng.standard_normal(5000).astype(np.float32)}
    for label, (shape, dtype, where) in cases.items():
        a = rng.standard_normal(shape).astype(dtype)
        a.reshape(-1)[where] = [(np.nan, np.inf, -np.inf)[i % 3] for i in range(len(where))]
        src = path("nft_%s.npz" % label)
        np.savez(src, **clean, bad=a)
        for k, pipeline in enumerate(pipelines):
            out = path("nft_%s_%d.gcz" % (label, k))
            fails("encode", src, "-o", out, "--pipeline", pipeline, code=2,
                  contains=["tensor 'bad'", "has %d non-finite" % len(where)])
            assert not os.path.exists(out)
            run("encode", src, "-o", out, "--pipeline", pipeline, "--nonfinite", "raw")
            info = json.loads(run("inspect", out, "--json")[0])
            storage = {t["name"]: t["storage"] for t in info["frames"][0]["tensors"]}
            # (ratio=1 keeps every value plus its position: larger than raw, so "ok" is raw too)
            assert storage["bad"] == "raw", (label, pipeline, storage)
            assert storage["ok"] == ("raw" if "ratio=1)" in pipeline else "pipeline"), (label, pipeline, storage)
            run("decode", out, "-o", path("nft_out.npz"), "--force")
            with np.load(path("nft_out.npz")) as z:
                assert same_bits(z["bad"], a), (label, pipeline)


def test_inspect_json_fields():
    finite = {k: np.nan_to_num(v, nan=0.0, posinf=1.0, neginf=-1.0) for k, v in ARRAYS.items()}  # fp16 is lossy
    np.savez(path("i.npz"), **finite)
    run("encode", path("i.npz"), "-o", path("i.gcz"), "--preset", "fp16", "--force", "--quiet")
    info = json.loads(run("inspect", path("i.gcz"), "--json")[0])
    assert info["pipeline"] == "fp16"
    t = {x["name"]: x for x in info["frames"][0]["tensors"]}
    w = t["layer1.conv.weight"]
    for key in ("name", "shape", "dtype", "storage", "stages", "input_bytes", "bytes", "streams", "ratio",
                "bits_per_param"):
        assert key in w, key
    assert w["shape"] == [8, 3, 3, 3] and w["dtype"] == "f32" and w["input_bytes"] == 216 * 4
    assert abs(w["ratio"] - w["input_bytes"] / w["bytes"]) < 1e-9
    tot = info["totals"]
    assert tot["container_bytes"] == os.path.getsize(path("i.gcz"))
    assert abs(tot["bits_per_param"] - 8 * tot["container_bytes"] / tot["parameters"]) < 1e-9
    human, _ = run("inspect", path("i.gcz"))
    assert b"ratio = input bytes" in human and b"layer1.conv.weight" in human


def test_no_parameters_means_no_per_parameter_figures():
    # Only empty and pass-through arrays: bits/param and the kept fraction are undefined, and
    # encode, inspect and bench all say so (null, "-") instead of three different numbers.
    np.savez(path("zp.npz"), w=np.zeros((0, 5), np.float32), step=np.arange(3))
    _, err = run("encode", path("zp.npz"), "-o", path("zp.gcz"), "--preset", "lossless", "--pass-through", "--force")
    assert "no floating-point parameters" in err and "bits/param" not in err, err
    info = json.loads(run("inspect", path("zp.gcz"), "--json")[0])
    tot = info["totals"]
    assert tot["parameters"] == 0 and tot["bits_per_param"] is None and tot["kept_fraction"] is None, tot
    assert set(tot["bits_per_param_breakdown"].values()) == {None}, tot
    assert [t["bits_per_param"] for t in info["frames"][0]["tensors"]] == [None, None]
    human = run("inspect", path("zp.gcz"))[0].decode()
    assert "- bits/param" in human and "index -  value -" in human, human
    rep = path("zp.json")
    run("bench", path("zp.npz"), "--preset", "lossless", "--pass-through", "--repeat", "1", "--min-time", "0",
        "--json", rep, "--force", "--quiet")
    with open(rep) as f:
        row = json.load(f)["rows"][0]
    for key in ("bits_per_param", "bits_index", "bits_value", "bits_scale_side", "bits_overhead", "kept_fraction"):
        assert row[key] is None, (key, row[key])
    assert row["per_frame"][0]["bits_per_param"] is None
    table = run("bench", path("zp.npz"), "--preset", "lossless", "--pass-through", "--repeat", "1",
                "--min-time", "0")[0].decode()
    row = table.splitlines()[3].split()
    assert row[0] == "lossless" and row[2:7] == ["-"] * 5, table  # bits/p and its split by stream


def test_inspect_tensors_lists_names_only_and_aligns_wide_characters():
    np.savez(path("u.npz"), **{"étage.poids": np.ones(3, np.float32), "plain.weight": np.ones(4, np.float32)})
    run("encode", path("u.npz"), "-o", path("u.gcz"), "--preset", "lossless", "--force", "--quiet")
    listing = run("inspect", path("u.gcz"), "--tensors")[0].decode()
    assert "total" not in listing and "bits/param" not in listing, listing
    rows = [l for l in listing.splitlines() if l.startswith("  ")]
    assert len(rows) == 2
    assert rows[0].index("[") == rows[1].index("["), rows  # shape column at the same character column
    full = run("inspect", path("u.gcz"))[0].decode().splitlines()
    rows = [l for l in full if l.startswith("  ") and ("weight" in l or "poids" in l)]
    assert len(rows) == 2 and rows[0].index("[") == rows[1].index("["), rows


def test_inspect_and_bench_agree_on_the_fig10_breakdown():
    # BIRD+ Fig. 10's index / value / overall CR and the kept count: inspect (decoding the
    # container) must report what bench measured while encoding, on the bundled snapshot.
    snap = os.path.join(sys.argv[2], "test_data", "snapshots", "step_000.npz")
    for preset in ("bird+", "topk-1pct", "tcs", "powersgd-r2", "lossless"):
        out = path(f"fig10-{preset}.gcz")
        run("encode", snap, "-o", out, "--preset", preset, "--force", "--quiet")
        tot = json.loads(run("inspect", out, "--json")[0])["totals"]
        run("bench", snap, "--preset", preset, "--repeat", "1", "--min-time", "0", "--json", path("fig10.json"), "--force")
        with open(path("fig10.json")) as f:
            row = json.load(f)["rows"][0]
        assert tot["kept"] == row["kept"] > 0, (preset, tot["kept"], row["kept"])
        for key in ("kept_fraction", "index_cr", "value_cr", "overall_cr"):
            if row[key] is None:
                assert tot[key] is None, (preset, key)
            else:
                assert abs(tot[key] / row[key] - 1) < 1e-9, (preset, key, tot[key], row[key])
        frames = json.loads(run("inspect", out, "--json")[0])["frames"]
        assert sum(t["kept"] for t in frames[0]["tensors"]) == tot["kept"]
        if preset == "bird+":
            assert tot["index_cr"] > 20 and tot["index_cr"] > 5 * tot["value_cr"], tot  # index sharing
            human, _ = run("inspect", out)
            assert b"index CR" in human and b"overall CR" in human
    no = json.loads(run("inspect", path("fig10-bird+.gcz"), "--json", "--no-decode")[0])["totals"]
    assert "index_cr" not in no and "kept" not in no


def test_bundled_snapshots_lossless():
    src = os.path.join(sys.argv[2], "test_data", "snapshots")
    files = sorted(os.path.join(src, f) for f in os.listdir(src) if f.endswith(".npz"))
    run("encode", *files, "-o", path("td.gcz"), "--force", "--quiet")
    run("decode", path("td.gcz"), "-o", path("td.npz"), "--force")
    for i, f in enumerate(files):
        with np.load(f) as a, np.load(path(f"td.frame{i:03d}.npz")) as b:
            assert a.files == b.files
            for k in a.files:
                assert same_bits(a[k], b[k]), (f, k)


def test_a_name_holding_a_nul_byte():
    # safetensors keys may hold U+0000. HDF5 names end at a NUL: refused, not silently cut to
    # 'nul'; the NPZ refusal shows the whole name (the message was cut at the NUL); safetensors
    # keeps it.
    header = json.dumps({"nul\x00x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    header += b" " * (-len(header) % 8)
    with open(path("nul.safetensors"), "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header + np.float32(1).tobytes())
    run("encode", path("nul.safetensors"), "-o", path("nul.gcz"), "--force", "--quiet")
    fails("decode", path("nul.gcz"), "-o", path("nul.h5"), "--force", code=1,
          contains=["tensor 'nul", "name holds a NUL byte"])
    assert not os.path.exists(path("nul.h5"))
    fails("decode", path("nul.gcz"), "-o", path("nul.npz"), "--force", code=1, contains=["'nul\\x00x'", "holds a NUL byte"])
    run("decode", path("nul.gcz"), "-o", path("nul_out.safetensors"), "--force")
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
    import safetensors_check
    with open(path("nul_out.safetensors"), "rb") as f:
        _, _, _, tensors = safetensors_check.parse(f.read())
    assert [t["name"] for t in tensors] == ["nul\x00x"]


def test_an_h5_output_is_the_same_bytes_whenever_it_is_written():
    # HDF5 stamps each object's creation and modification time (seconds) unless told not to:
    # two decodes of one container a second apart gave files 47 bytes apart.
    np.savez(path("h5rep.npz"), a=np.arange(6, dtype=np.float32).reshape(2, 3), b=np.ones(4, np.float32))
    run("encode", path("h5rep.npz"), "-o", path("h5rep.gcz"), "--force", "--quiet")
    run("decode", path("h5rep.gcz"), "-o", path("h5rep_1.h5"), "--force", "--quiet")
    time.sleep(1.1)
    run("decode", path("h5rep.gcz"), "-o", path("h5rep_2.h5"), "--force", "--quiet")
    assert open(path("h5rep_1.h5"), "rb").read() == open(path("h5rep_2.h5"), "rb").read()


def test_an_empty_tensor_name_round_trips():
    # np.savez(**{'': x}) writes member ".npy", which np.load reads back as ''. decode writes it
    # the same way (it refused the name); HDF5 has no dataset named '' and refuses it.
    x = np.arange(5, dtype=np.float32)
    np.savez(path("empty_name.npz"), **{"": x})
    run("encode", path("empty_name.npz"), "-o", path("empty_name.gcz"), "--force", "--quiet")
    run("decode", path("empty_name.gcz"), "-o", path("empty_name_out.npz"), "--force", "--quiet")
    with np.load(path("empty_name_out.npz")) as z:
        assert z.files == [""] and np.array_equal(z[""], x), z.files
    run("decode", path("empty_name.gcz"), "-o", path("empty_name_out.safetensors"), "--force", "--quiet")
    # --tensor '' names that tensor (not "every tensor"), and is refused where there is none.
    np.savez(path("empty_and_w.npz"), **{"": x, "w": 2 * x})
    run("encode", path("empty_and_w.npz"), "-o", path("empty_and_w.gcz"), "--force", "--quiet")
    run("decode", path("empty_and_w.gcz"), "-o", path("only_empty.npz"), "--tensor", "", "--force", "--quiet")
    with np.load(path("only_empty.npz")) as z:
        assert z.files == [""] and np.array_equal(z[""], x), z.files
    run("encode", path("empty_and_w.npz"), "-o", path("no_empty_name.gcz"), "--force", "--quiet", "--include", "w")
    fails("decode", path("no_empty_name.gcz"), "-o", path("none.npz"), "--tensor", "", "--force", code=1,
          contains="no tensor ''")
    fails("decode", path("empty_name.gcz"), "-o", path("empty_name_out.h5"), "--force", code=1,
          contains="tensor ''")


def test_safetensors_metadata_kept_through_a_round_trip():
    # The input's __metadata__ (keys in file order, non-ASCII values) is kept in the container
    # (inspect shows it with the input) and written back by decode to safetensors; a frame whose
    # input had none gets PyTorch's {"format": "pt"}.
    meta = {"zeta": "1", "format": "pt", "note": "h\u00e9llo \"quoted\""}
    x = np.arange(6, dtype=np.float32)
    header = json.dumps({"__metadata__": meta, "w": {"dtype": "F32", "shape": [6], "data_offsets": [0, 24]}}).encode()
    header += b" " * (-len(header) % 8)
    with open(path("meta.safetensors"), "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header + x.tobytes())
    np.savez(path("nometa.npz"), w=x)
    run("encode", path("meta.safetensors"), path("nometa.npz"), "-o", path("meta.gcz"), "--force", "--quiet")
    info = json.loads(run("inspect", path("meta.gcz"), "--json")[0])
    assert info["inputs"][0]["metadata"] == meta and "metadata" not in info["inputs"][1], info["inputs"]
    run("decode", path("meta.gcz"), "-o", path("meta_out.safetensors"), "--force")
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
    import safetensors_check
    for frame, want in ((0, meta), (1, {"format": "pt"})):
        with open(path(f"meta_out.frame{frame:03d}.safetensors"), "rb") as f:
            _, got, _, tensors = safetensors_check.parse(f.read())
        assert got == want and list(got) == list(want), (frame, got)
        assert tensors[0]["bytes"] == x.tobytes()


def test_bf16_safetensors_lossless():
    # numpy has no bfloat16: write the file by hand (spec: u64 header size, JSON, data).
    bits = (rng.standard_normal(300).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    bits[:3] = [0x7fc1, 0x7f80, 0xff80]  # NaN with payload, +Inf, -Inf
    f32 = rng.standard_normal((3, 5)).astype(np.float32)
    header = json.dumps({"w": {"dtype": "BF16", "shape": [300], "data_offsets": [0, 600]},
                         "x": {"dtype": "F32", "shape": [3, 5], "data_offsets": [600, 660]}}).encode()
    header += b" " * (-len(header) % 8)
    with open(path("b.safetensors"), "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header + bits.tobytes() + f32.tobytes())
    run("encode", path("b.safetensors"), "-o", path("b.gcz"), "--force", "--quiet")
    info = json.loads(run("inspect", path("b.gcz"), "--json")[0])
    assert info["frames"][0]["tensors"][0]["dtype"] == "bf16"
    run("decode", path("b.gcz"), "-o", path("b.out.safetensors"), "--force")
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
    import safetensors_check
    with open(path("b.out.safetensors"), "rb") as f:
        _, _, _, tensors = safetensors_check.parse(f.read())
    got = {t["name"]: t for t in tensors}
    assert got["w"]["dtype"] == "BF16" and got["w"]["bytes"] == bits.tobytes()
    assert got["x"]["dtype"] == "F32" and got["x"]["bytes"] == f32.tobytes()
    # To HDF5: one warning line naming the file once (it was named twice).
    _, err = run("decode", path("b.gcz"), "-o", path("b.out.h5"), "--force")
    warnings = [l for l in err.splitlines() if "warning" in l]
    assert len(warnings) == 1 and warnings[0].count("b.out.h5") == 1 and "1 bf16 tensor(s)" in warnings[0], err


def test_format_md_raw_values_table_is_true():
    # docs/format.md, "Storage: pipeline": after topk (no transform) `raw` keeps an f64 tensor's
    # kept elements bit for bit; after ef, or after bird, they have gone through float32.
    os.makedirs(path("rawdt"), exist_ok=True)
    x = (np.arange(1, 257, dtype=np.float64) / 3.0).reshape(16, 16)  # not representable in f32
    np.save(path("rawdt", "x.npy"), x)
    for pipeline, exact in [("topk(ratio=0.5) | raw", True), ("randk(k=100, shared_seed=false) | raw", True),
                            ("ef | topk(ratio=0.5) | raw", False), ("bird | raw", False)]:
        run("encode", path("rawdt", "x.npy"), "-o", path("rawdt", "x.gcz"), "--pipeline", pipeline, "-f")
        run("decode", path("rawdt", "x.gcz"), "-o", path("rawdt", "y.npy"), "-f")
        y = np.load(path("rawdt", "y.npy"))
        assert y.dtype == np.float64, (pipeline, y.dtype)
        kept = y != 0
        assert kept.any(), pipeline
        if exact:
            assert np.array_equal(y[kept], x[kept]), pipeline
        else:
            assert np.array_equal(y[kept], y[kept].astype(np.float32).astype(np.float64)), pipeline
            assert not np.array_equal(y[kept], x[kept]), pipeline


def test_format_md_worked_examples_are_true():
    # docs/format.md's hex dumps are what this version writes, byte for byte: format 1.1 by
    # default, 1.0 when asked for.
    doc = open(os.path.join(sys.argv[2], "docs", "format.md")).read()
    os.makedirs(path("ex"), exist_ok=True)
    np.save(path("ex", "g.npy"), np.array([0.5, -1, 2, 0], np.float32))
    for version, options in (("1.1", []), ("1.0", ["--format-version", "1.0"])):
        block = doc.split(f"## Worked example ({version})")[1].split("```")[1]
        expected = bytes.fromhex("".join(l.split(":")[1][:49] for l in block.strip().splitlines()))
        p = clitest.subprocess.run([clitest.EXE, "encode", "g.npy", "-o", "g.gcz", "--pipeline", "fp16", "--quiet",
                                    "--force", *options], cwd=path("ex"), timeout=60)
        assert p.returncode == 0
        got = open(path("ex", "g.gcz"), "rb").read()
        assert got == expected, f"format {version}: {len(got)} vs {len(expected)} bytes"
        # And the docs' bytes decode, as they are, to the tensor they were made from.
        open(path("ex", "doc.gcz"), "wb").write(expected)
        run("decode", path("ex", "doc.gcz"), "-o", path("ex", "doc.npy"), "--force")
        back = np.load(path("ex", "doc.npy"))
        assert back.dtype == np.float32 and back.tolist() == [0.5, -1, 2, 0], (version, back)


clitest.run_all(globals())
