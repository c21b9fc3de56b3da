#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""What a new user trips over: HDF5 attributes kept through encode/decode, containers that do not
record the user's directories (--record-paths), and messages that say what happened (a snapshot
given where a container is expected, an output name promising another format, positional stage
parameters, several frames decoded into one device, negative --frame)."""
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import EXE, fails, path, run

ROOT = sys.argv[2]


def run_in(cwd, *args, expect=0):
    """Runs gradcodec in directory cwd; checks the exit code; returns stderr."""
    p = subprocess.run([EXE, *map(str, args)], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == expect, f"gradcodec {' '.join(map(str, args))}: exit {p.returncode}, expected {expect}\n{err}"
    return err


def header(gcz):
    out, _ = run("inspect", gcz, "--json")
    return json.loads(out)


def snapshot(name, **arrays):
    p = path(name)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    np.savez(p, **(arrays or {"w": np.arange(64, dtype=np.float32)}))
    return p


# ---- item 3: recorded paths -------------------------------------------------------------------

def recorded(gcz):
    h = header(gcz)
    return [i["path"] for i in h["inputs"]], [f["source"] for f in h["frames"]]


def test_paths_relative_to_cwd_by_default():
    snap = snapshot("proj/private/step_001.npz")
    proj = path("proj")
    # An absolute input under the working directory is recorded relative to it.
    run_in(proj, "encode", snap, "-o", "a.gcz", "--quiet")
    assert recorded(os.path.join(proj, "a.gcz")) == (["private/step_001.npz"], ["private/step_001.npz"])
    # A relative one as given, normalized.
    run_in(proj, "encode", "./private/../private/step_001.npz", "-o", "b.gcz", "--quiet")
    assert recorded(os.path.join(proj, "b.gcz")) == (["private/step_001.npz"], ["private/step_001.npz"])


def test_paths_outside_cwd_keep_only_the_name():
    snap = snapshot("proj/private/step_002.npz")
    elsewhere = path("elsewhere")
    os.makedirs(elsewhere, exist_ok=True)
    run_in(elsewhere, "encode", snap, "-o", "c.gcz", "--quiet")
    run_in(elsewhere, "encode", "../proj/private/step_002.npz", "-o", "d.gcz", "--quiet")
    for gcz in ("c.gcz", "d.gcz"):
        paths, sources = recorded(os.path.join(elsewhere, gcz))
        assert paths == ["step_002.npz"] and sources == ["step_002.npz"], (paths, sources)
        raw = open(os.path.join(elsewhere, gcz), "rb").read()
        assert b"private" not in raw and clitest.WORK.encode() not in raw, "the container names the directories"


def test_record_paths_modes():
    snap = snapshot("proj/private/step_003.npz")
    proj = path("proj")
    run_in(proj, "encode", snap, "-o", "abs.gcz", "--record-paths", "absolute", "--quiet")
    assert recorded(os.path.join(proj, "abs.gcz")) == ([os.path.normpath(snap)], [os.path.normpath(snap)])
    run_in(proj, "encode", snap, "-o", "name.gcz", "--record-paths", "name", "--quiet")
    assert recorded(os.path.join(proj, "name.gcz")) == (["step_003.npz"], ["step_003.npz"])
    fails("encode", snap, "-o", path("x.gcz"), "--record-paths", "full", code=1, contains="--record-paths")


def test_merge_records_relative_paths():
    proj = path("mproj")
    os.makedirs(os.path.join(proj, "runs"), exist_ok=True)
    for i in range(2):
        snapshot(f"mproj/runs/w{i}.npz", w=np.linspace(-1, 1, 64, dtype=np.float32) * (i + 1))
        run_in(proj, "encode", f"runs/w{i}.npz", "-o", f"runs/w{i}.gcz", "--preset", "signsgd", "--quiet")
    workers = [os.path.join(proj, "runs", f"w{i}.gcz") for i in range(2)]
    run_in(proj, "merge", *workers, "-o", "m.gcz", "--method", "majority", "--quiet")
    paths, _ = recorded(os.path.join(proj, "m.gcz"))
    assert paths == ["runs/w0.gcz", "runs/w1.gcz"], paths
    run_in(proj, "merge", *workers, "-o", "n.gcz", "--method", "majority", "--record-paths", "name", "--quiet")
    assert recorded(os.path.join(proj, "n.gcz"))[0] == ["w0.gcz", "w1.gcz"]
    # The merged container still decodes.
    run_in(proj, "decode", "m.gcz", "-o", "m.npz", "--quiet")


# ---- item 4: messages that say what happened --------------------------------------------------

def write_safetensors(p):
    data = np.arange(4, dtype=np.float32).tobytes()
    head = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, len(data)]}}).encode()
    with open(p, "wb") as f:
        f.write(len(head).to_bytes(8, "little") + head + data)


def snapshots_of_every_format():
    import h5py
    snaps = {"NPZ": snapshot("fmt/x.npz"), "NPY": path("fmt/x.npy"), "HDF5": path("fmt/x.h5"),
             "safetensors": path("fmt/x.safetensors")}
    np.save(snaps["NPY"], np.ones(3, np.float32))
    with h5py.File(snaps["HDF5"], "w") as f:
        f["w"] = np.ones(3, np.float32)
    write_safetensors(snaps["safetensors"])
    return snaps


def test_snapshot_where_a_container_is_expected():
    snaps = snapshots_of_every_format()
    for title, snap in snaps.items():
        # Even named like a container, the bytes tell what it is.
        disguised = path("fmt", f"{title}.gcz")
        with open(snap, "rb") as src, open(disguised, "wb") as dst:
            dst.write(src.read())
        for name in (snap, disguised):
            want = [f"{name}: this is a{'n' if title in ('NPZ', 'NPY') else ''} {title} file, not a gradcodec container",
                    "`gradcodec encode` compresses it"]
            fails("inspect", name, code=2, contains=want)
            fails("decode", name, "-o", path("fmt", "y.npz"), "--force", code=2, contains=want)
            assert not os.path.exists(path("fmt", "y.npz"))
    good = path("fmt", "good.gcz")
    run("encode", snaps["NPZ"], "-o", good, "--quiet")
    fails("merge", good, snaps["safetensors"], "-o", path("fmt", "m.gcz"), "--method", "mean", code=2,
          contains="this is a safetensors file, not a gradcodec container")
    with open(snaps["NPZ"], "rb") as f:
        fails("inspect", "-", stdin=f.read(), code=2, contains="<stdin>: this is an NPZ file")
    # Bytes of no known format are still a corrupt container.
    with open(path("fmt", "junk.gcz"), "wb") as f:
        f.write(b"hello, this is not anything at all" * 4)
    fails("inspect", path("fmt", "junk.gcz"), code=3, contains="bad magic")


def test_container_named_like_a_snapshot_is_refused():
    snap = snapshot("names/in.npz")
    for ext in ("npz", "NPY", "h5", "hdf5", "safetensors"):
        out = path("names", f"out.{ext}")
        fails("encode", snap, "-o", out, code=1, contains=["promises", "out.gcz", "--force-name"])
        assert not os.path.exists(out)
    out = path("names", "out.npz")
    run("encode", snap, "-o", out, "--force-name", "--quiet")
    assert open(out, "rb").read(4) == b"\x89GCZ"
    run("decode", out, "-o", path("names", "back.npz"), "--quiet")
    run("encode", snap, "-o", path("names", "out.bin"), "--quiet")  # other names are accepted
    w = [path("names", "w0.gcz"), path("names", "w1.gcz")]
    for x in w:
        run("encode", snap, "-o", x, "--preset", "signsgd", "--quiet")
    fails("merge", *w, "-o", path("names", "m.npz"), "--method", "majority", code=1, contains="--force-name")


def test_positional_stage_parameter_shows_the_named_form():
    stages = json.loads(run("list", "stages", "--json")[0])
    topk = next(s for s in stages if s["name"] == "topk")
    first = topk["params"][0].split("=")[0].split(" ")[0]  # "ratio=0.01" -> "ratio"
    err = fails("encode", snapshot("pp/in.npz"), "-o", path("pp", "x.gcz"), "--pipeline", "topk(0.01) | varint",
                code=1, contains=["NAME=VALUE", f"topk({first}=0.01)"])
    fails("encode", path("pp", "in.npz"), "-o", path("pp", "x.gcz"), "--pipeline", "zstd(3)",
          code=1, contains=["NAME=VALUE", "zstd(level=3)"])
    # The example names a parameter that takes the value: zfp's first, mode, takes a word, so
    # zfp(4) was shown as zfp(mode=4), itself refused.
    err = fails("encode", path("pp", "in.npz"), "-o", path("pp", "x.gcz"), "--pipeline", "zfp(4)",
                code=1, contains=["NAME=VALUE", "zfp(rate=4)"])
    assert "mode=4" not in err, err
    # A stage without parameters says so.
    fails("encode", path("pp", "in.npz"), "-o", path("pp", "x.gcz"), "--pipeline", "fp16(2)", code=1,
          contains="fp16 takes no parameters")


def three_frames():
    for f in range(3):
        snapshot(f"fr/f{f}.npz", w=np.full(5, f, np.float32))
    gcz = path("fr", "multi.gcz")
    run("encode", *[path("fr", f"f{f}.npz") for f in range(3)], "-o", gcz, "--force", "--quiet")
    return gcz


def test_several_frames_into_a_device():
    gcz = three_frames()
    _, err = run("decode", gcz, "-o", "/dev/null", "--verbose")
    assert [l for l in err.splitlines() if "-> /dev/null" in l] == [
        f"gradcodec: frame {f} -> /dev/null (read 1 frame(s))" for f in range(3)], err
    assert not os.path.exists("/dev/null.frame000")
    # A FIFO (or stdout) would get archives back to back: one frame must be chosen.
    fifo = path("fr", "pipe")
    os.mkfifo(fifo)
    fails("decode", gcz, "-o", fifo, code=1, contains=["3 frames", "--frame N"])


def test_negative_frame_counts_from_the_end():
    gcz = three_frames()
    for given, frame in (("-1", 2), ("-3", 0), ("1", 1)):
        out = path("fr", f"neg{given}.npz")
        run("decode", gcz, "-o", out, "--frame", given, "--quiet")
        assert np.load(out)["w"].tolist() == [frame] * 5, (given, np.load(out)["w"])
    for bad in ("-4", "3"):
        fails("decode", gcz, "-o", path("fr", "bad.npz"), "--frame", bad, code=1,
              contains=["--frame " + bad, "0..2", "-3..-1"])
    fails("decode", gcz, "-o", path("fr", "bad.npz"), "--frame", "1.5", code=1, contains="'1.5' is not a whole number")


# ---- item 2: HDF5 attributes ------------------------------------------------------------------

def h5_with_attributes(name):
    import h5py
    p = path("h5", name)
    os.makedirs(path("h5"), exist_ok=True)
    with h5py.File(p, "w") as f:
        f.attrs["epoch"] = np.int64(3)
        f.attrs["lr"] = np.float32(0.1)
        f.attrs["half"] = np.float16(1.5)
        f.attrs["big"] = np.array([1.25, -2.0], dtype=">f8")
        f.attrs["u8"] = np.uint8(200)
        f.attrs["u64"] = np.uint64(2**64 - 1)
        f.attrs["i8min"] = np.int64(-2**63)
        f.attrs["tags"] = np.array([1, 2, 3], dtype=">i2")
        f.attrs["matrix"] = np.arange(6, dtype=np.float64).reshape(2, 3)
        f.attrs["nan"] = np.array([np.nan, np.inf, -np.inf], dtype=np.float32)
        f.attrs["flag"] = np.bool_(True)
        f.attrs["flags"] = np.array([True, False])
        f.attrs["name"] = "résnet"
        f.attrs["names"] = ["a", "bb"]
        f.attrs["raw"] = np.bytes_(b"abc")
        f.attrs["nothing"] = h5py.Empty("f4")
        f.attrs["record"] = np.array((1, 2.0), dtype=[("a", "<i4"), ("b", "<f8")])  # not kept: compound
        g = f.create_group("layer1")
        g.attrs["kind"] = "conv"
        d = g.create_dataset("weight", data=np.linspace(-1, 1, 32, dtype=np.float32))
        d.attrs["scale"] = np.float64(2.5)
        d.attrs["shape_hint"] = np.array([4, 8], dtype=np.int32)
        f.create_group("meta").attrs["note"] = "only attributes here"
        f.create_dataset("skipme", data=np.ones(4, np.float32)).attrs["x"] = 1
    return p


def attrs_of(p):
    """{object path: {name: value}} of every group and dataset."""
    import h5py
    out = {}
    with h5py.File(p, "r") as f:
        out["/"] = dict(f.attrs.items())
        f.visititems(lambda n, o: out.__setitem__("/" + n, dict(o.attrs.items())))
    return out


def same_value(a, b):
    import h5py
    if isinstance(a, h5py.Empty) or isinstance(b, h5py.Empty):
        return isinstance(a, h5py.Empty) and isinstance(b, h5py.Empty) and a.dtype == b.dtype
    if type(a) != type(b):
        return False
    if isinstance(a, (str, bytes)):
        return a == b
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


def test_hdf5_attributes_round_trip():
    src = h5_with_attributes("attrs.h5")
    gcz = path("h5", "attrs.gcz")
    _, err = run("encode", src, "-o", gcz, "--exclude", "^skipme$", "--preset", "lossless")
    # The attribute that cannot be kept is named, with why.
    assert "attribute 'record' not kept: compound" in err, err
    out = path("h5", "back.h5")
    _, err = run("decode", gcz, "-o", out)
    assert "attribute" not in err, err
    want, got = attrs_of(src), attrs_of(out)
    del want["/"]["record"]
    del want["/skipme"]  # left out by --exclude, and its attributes with it
    assert sorted(got) == sorted(want), (sorted(got), sorted(want))
    for obj in want:
        assert sorted(got[obj]) == sorted(want[obj]), (obj, sorted(got[obj]), sorted(want[obj]))
        for k in want[obj]:
            assert same_value(got[obj][k], want[obj][k]), (obj, k, got[obj][k], want[obj][k])
    # The container's header holds them (documented layout), with the dataset's tensor name.
    inputs = header(gcz)["inputs"]
    objects = {e["object"]: e for e in inputs[0]["hdf5_attributes"]}
    assert objects["/layer1/weight"]["tensor"] == "layer1.weight"
    assert {"name": "u8", "dtype": "|u1", "shape": [], "value": 200} in objects["/"]["attrs"]


def test_hdf5_large_attributes_are_named():
    import h5py
    src = path("h5", "large.h5")
    os.makedirs(path("h5"), exist_ok=True)
    with h5py.File(src, "w", libver="latest") as f:  # dense attribute storage holds large ones
        f.attrs["huge"] = np.zeros(70000, np.int8)
        f.attrs["fine"] = np.arange(1000, dtype=np.int16)
        f["w"] = np.ones(4, np.float32)
    gcz = path("h5", "large.gcz")
    _, err = run("encode", src, "-o", gcz)
    assert "group /: attribute 'huge' not kept: too large (70000 elements; at most 65536 are kept)" in err, err
    out = path("h5", "large_back.h5")
    run("decode", gcz, "-o", out, "--quiet")
    got = attrs_of(out)["/"]
    assert sorted(got) == ["fine"] and same_value(got["fine"], np.arange(1000, dtype=np.int16))


def test_hdf5_attributes_not_writable_are_named():
    src = h5_with_attributes("attrs2.h5")
    gcz = path("h5", "attrs2.gcz")
    run("encode", src, "-o", gcz, "--quiet")
    # NPZ has no place for attributes: said, not dropped silently.
    _, err = run("decode", gcz, "-o", path("h5", "back.npz"))
    assert "HDF5 attribute(s) of" in err and "not written: NPZ has no place for them" in err, err
    # --tensor: only that tensor's (and the groups') attributes, without complaints about the others.
    out = path("h5", "one.h5")
    _, err = run("decode", gcz, "-o", out, "--tensor", "layer1.weight")
    assert "attribute" not in err, err
    got = attrs_of(out)
    assert got["/layer1/weight"]["scale"] == 2.5 and "/skipme" not in got


if __name__ == "__main__":
    clitest.run_all(globals())
