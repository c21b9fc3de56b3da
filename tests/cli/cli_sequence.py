#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Stateful sequence codecs through the CLI: `decode --frame N --verbose` of a tcs / powersgd
container reads the frames from the last keyframe and decodes what the full decode gives;
keyframes (--keyframe-interval) show in inspect; `inspect` shows accordion's choice per tensor
per frame (the record's stages)."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import fails, path, run

rng = np.random.default_rng(7)


def write_steps(prefix, frames, scales=None):
    base = rng.standard_normal((48, 36)).astype(np.float32)
    files = []
    for f in range(frames):
        s = 1.0 if scales is None else scales[f]
        w = (s * (base + 0.05 * rng.standard_normal((48, 36)))).astype(np.float32)
        b = rng.standard_normal(36).astype(np.float32)
        files.append(path(f"{prefix}{f}.npz"))
        np.savez(files[-1], w=w, b=b)
    return files


def test_decode_frame_reads_from_the_last_keyframe():
    files = write_steps("kf", 7)
    for pipeline in ("tcs(global=0.05, local=0.01)", "powersgd(rank=2)"):
        out = path("kf.gcz")
        run("encode", *files, "-o", out, "--pipeline", pipeline, "--keyframe-interval", "3", "--force", "--quiet")
        info = json.loads(run("inspect", out, "--json")[0])
        assert [fr["keyframe"] for fr in info["frames"]] == [True, False, False, True, False, False, True]
        run("decode", out, "-o", path("kf_all.npz"), "--force")
        for n in range(7):
            _, err = run("decode", out, "--frame", n, "-o", path("kf_one.npz"), "--force", "--verbose")
            want = n - (n - n % 3) + 1
            assert f"read {want} frame(s)" in err and "from the last keyframe" in err, (pipeline, n, err)
            with np.load(path("kf_one.npz")) as one, np.load(path(f"kf_all.frame{n:03d}.npz")) as full:
                for k in ("w", "b"):
                    assert np.array_equal(one[k], full[k]), (pipeline, n, k)


def test_stateful_pipeline_refuses_a_tensor_set_that_changes_between_keyframes():
    # Before, encode wrote such a sequence and decode called it corrupt (exit 3): the decoder
    # rebuilds a tensor's state from the last keyframe, where the new tensor was not.
    a, b = write_steps("ts", 2)
    np.savez(path("ts_more.npz"), w=np.ones((48, 36), np.float32), b=np.ones(36, np.float32),
             extra=np.ones(5, np.float32))
    np.savez(path("ts_less.npz"), w=np.ones((48, 36), np.float32))
    out = path("ts.gcz")
    for files, what in (([a, path("ts_more.npz")], "tensor 'extra' is new"),
                        ([a, path("ts_less.npz"), b], "tensor 'b' of the frame before is missing")):
        if os.path.exists(out):
            os.remove(out)
        for preset in ("ef-signsgd", "tcs", "powersgd-r2"):
            fails("encode", *files, "-o", out, "--preset", preset, "--force", code=2,
                  contains=[os.path.basename(files[1]), what, "--keyframe-interval"])
            assert not os.path.exists(out)
        # Every frame a keyframe: accepted, and every frame decodes.
        run("encode", *files, "-o", out, "--preset", "tcs", "--keyframe-interval", "1", "--force", "--quiet")
        run("decode", out, "-o", path("ts_dec") + "/", "--force", "--quiet")
        assert len(os.listdir(path("ts_dec"))) == len(files)
        # A stateless pipeline takes it as it is.
        run("encode", *files, "-o", out, "--preset", "lossless", "--force", "--quiet")
        run("decode", out, "-o", path("ts_dec2") + "/", "--force", "--quiet")


def test_inspect_shows_the_accordion_choice():
    # Norm 1 for five frames, then 0.2: the frame after the drop is coded with the mild rank.
    files = write_steps("acc", 8, scales=[1, 1, 1, 1, 1, 0.2, 0.2, 0.2])
    out = path("acc.gcz")
    run("encode", *files, "-o", out, "--preset", "accordion-powersgd", "--force", "--quiet")
    info = json.loads(run("inspect", out, "--json")[0])
    assert "accordion" in info["pipeline"]
    stages = [fr["tensors"][[t["name"] for t in fr["tensors"]].index("w")]["stages"] for fr in info["frames"]]
    mild, aggressive = "powersgd(rank=2) | raw", "powersgd | raw"  # rank 1 is the default
    assert stages == [mild, mild, aggressive, aggressive, aggressive, aggressive, mild, aggressive], stages
    text, _ = run("inspect", out)
    assert mild in text.decode() and aggressive in text.decode()
    # The decoder needs nothing else: frame 6 alone equals frame 6 of the full decode.
    run("decode", out, "-o", path("acc_all.npz"), "--force")
    run("decode", out, "--frame", 6, "-o", path("acc6.npz"), "--force")
    with np.load(path("acc6.npz")) as one, np.load(path("acc_all.frame006.npz")) as full:
        assert np.array_equal(one["w"], full["w"])


def test_frame_files_are_named_with_at_least_three_digits():
    # docs/formats.md: several frames become OUT.frameNNN.ext (DIR/frameNNN/), NNN the frame's
    # 0-based index zero-padded to at least three digits: 1001 frames give frame000 … frame999,
    # frame1000, each holding its own frame.
    os.makedirs(path("names"), exist_ok=True)
    files = []
    for f in range(1001):
        files.append(path("names", f"s{f:04d}.npy"))
        np.save(files[-1], np.array([f], np.float32))
    run("encode", *files, "-o", path("names.gcz"), "--pipeline", "raw", "-f", "--quiet")
    run("decode", path("names.gcz"), "-o", path("names", "out.npy"), "-f")
    want = [f"out.frame{f:03d}.npy" for f in range(1001)]
    assert want[7] == "out.frame007.npy" and want[1000] == "out.frame1000.npy"
    assert sorted(n for n in os.listdir(path("names")) if n.startswith("out.")) == sorted(want)
    for f in (0, 7, 999, 1000):
        assert np.load(path("names", want[f])).tolist() == [f]
    run("decode", path("names.gcz"), "-o", path("names_dir") + os.sep, "-f")
    assert sorted(os.listdir(path("names_dir"))) == sorted(f"frame{f:03d}" for f in range(1001))


clitest.run_all(globals())
