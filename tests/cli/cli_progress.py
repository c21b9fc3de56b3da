#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The progress bar of long runs (README.md "Commands"): drawn on stderr when it is a terminal
(a pseudo-terminal here), never when stderr is a pipe or with --quiet; one line of at most 79
columns, cleared before the summary, so the summary and warnings start at column 0; the output
is the same bytes with and without the bar."""
import errno
import json
import os
import pty
import struct
import subprocess
import sys
import threading
import tty

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import path, run

rng = np.random.default_rng(11)
LONG = "layer_" + "é" * 120  # a name wider than the line: cut at a character boundary
np.savez(path("g.npz"), **{"w": rng.standard_normal((300, 200)).astype(np.float32),
                            LONG: rng.standard_normal(500).astype(np.float32),
                            "step": np.arange(3, dtype=np.int64)})
np.savez(path("g2.npz"), w=rng.standard_normal((300, 200)).astype(np.float32),
         b=rng.standard_normal(500).astype(np.float32))


def run_tty(*args, expect=0):
    """Runs gradcodec with stderr on a pseudo-terminal (raw: no newline translation) and stdout on
    a pipe; returns (stdout bytes, stderr bytes as the terminal got them)."""
    master, slave = pty.openpty()
    tty.setraw(slave)
    p = subprocess.Popen([clitest.EXE, *map(str, args)], stdout=subprocess.PIPE, stderr=slave,
                         stdin=subprocess.DEVNULL)
    os.close(slave)
    got = bytearray()

    def drain():
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError as e:  # EIO: every writer of the terminal has gone
                assert e.errno == errno.EIO, e
                return
            if not chunk:
                return
            got.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    out = p.stdout.read()
    rc = p.wait(timeout=120)
    reader.join(timeout=30)
    os.close(master)
    assert rc == expect, f"gradcodec {' '.join(map(str, args))}: exit {rc}, expected {expect}\n{bytes(got)!r}"
    return out, bytes(got)


def screen_lines(raw):
    """What each stderr line ends as on the screen: the text after its last carriage return."""
    return [l.split(b"\r")[-1] for l in raw.split(b"\n")]


def check_bar(raw, title):
    """The bar was drawn (reaching 100%), each drawing fits in 79 columns of valid UTF-8, and it
    was cleared: no line ends with bar text on the screen."""
    text = raw.decode("utf-8")  # a cut in the middle of a character would raise here
    draws = [d for d in text.replace("\n", "\r").split("\r") if d.startswith(title + " [")]
    assert draws, f"no '{title} [' bar in {raw!r}"
    assert any(" 100%" in d for d in draws), f"the bar never reached 100%: {draws}"
    for d in draws:
        assert len(d.rstrip(" ")) <= 79, f"bar line wider than 79 columns: {d!r}"
    for line in screen_lines(raw):
        assert not line.strip(b" ").startswith(title.encode() + b" ["), f"bar left on the screen: {raw!r}"
    return draws


def test_encode_draws_a_bar_and_the_summary_starts_at_column_0():
    _, raw = run_tty("encode", path("g.npz"), "-o", path("tty.gcz"), "--pipeline", "topk(ratio=0.1)",
                     "--pass-through")
    draws = check_bar(raw, "encode")
    # The floating tensors' bytes: 60000*4 + 500*4 = 242000 (the int64 array is not counted).
    assert any("0.2/0.2 MB" in d for d in draws), draws
    assert any("~" in d for d in draws), f"the long name was not cut: {draws}"
    summary = [l for l in screen_lines(raw) if b"frame(s)" in l]
    assert len(summary) == 1 and summary[0].startswith(b"gradcodec: "), raw
    # The same container without a terminal.
    _, err = run("encode", path("g.npz"), "-o", path("pipe.gcz"), "--pipeline", "topk(ratio=0.1)",
                 "--pass-through")
    assert "\r" not in err and "encode [" not in err, repr(err)
    assert open(path("tty.gcz"), "rb").read() == open(path("pipe.gcz"), "rb").read()


def test_quiet_draws_nothing_on_a_terminal():
    _, raw = run_tty("encode", path("g2.npz"), "-o", path("q.gcz"), "--preset", "lossless", "--quiet")
    assert raw == b"", repr(raw)


def test_decode_draws_a_bar_and_writes_the_same_file():
    run("encode", path("g2.npz"), "-o", path("d.gcz"), "--preset", "fp16", "--force")
    _, raw = run_tty("decode", path("d.gcz"), "-o", path("tty_out.npz"))
    draws = check_bar(raw, "decode")
    # Both tensors decode to float32: 60000*4 + 500*4 bytes.
    assert any("0.2/0.2 MB" in d for d in draws), draws
    _, err = run("decode", path("d.gcz"), "-o", path("pipe_out.npz"))
    assert "\r" not in err, repr(err)
    a, b = np.load(path("tty_out.npz")), np.load(path("pipe_out.npz"))
    assert sorted(a.files) == sorted(b.files) == ["b", "w"]
    for k in a.files:
        assert np.array_equal(a[k], b[k])


def test_merge_and_bench_draw_their_bars():
    run("encode", path("g2.npz"), "-o", path("m1.gcz"), "--preset", "lossless", "--force")
    run("encode", path("g2.npz"), "-o", path("m2.gcz"), "--preset", "fp16", "--force")
    _, raw = run_tty("merge", path("m1.gcz"), path("m2.gcz"), "-o", path("m.gcz"), "--method", "mean")
    check_bar(raw, "merge")
    assert any(l.startswith(b"gradcodec: ") for l in screen_lines(raw)), raw
    out, raw = run_tty("bench", path("g2.npz"), "--preset", "lossless", "--preset", "fp16", "--min-time", "0",
                       "--repeat", "1")
    draws = check_bar(raw, "bench")
    assert any("2/2" in d for d in draws), draws
    assert b"lossless" in out and b"\r" not in out  # the table on stdout has no bar in it


def write_bf16_safetensors(p, n):
    """A safetensors file of one bfloat16 tensor 'h' (numpy has no bfloat16: written by hand)."""
    f32 = rng.standard_normal(n).astype(np.float32)
    bf16 = (f32.view(np.uint32) >> 16).astype(np.uint16).tobytes()
    header = json.dumps({"h": {"dtype": "BF16", "shape": [n], "data_offsets": [0, len(bf16)]}}).encode()
    header += b" " * (-len(header) % 8)
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + bf16)


def test_a_warning_while_the_bar_is_up_starts_at_column_0():
    # Decoding a bfloat16 tensor to NPZ warns (numpy has no bfloat16) while the decode bar is
    # on the screen: the warning must not be glued to the bar's text.
    write_bf16_safetensors(path("h.safetensors"), 4000)
    run("encode", path("h.safetensors"), "-o", path("h.gcz"), "--preset", "lossless", "--force")
    _, raw = run_tty("decode", path("h.gcz"), "-o", path("h.npz"))
    check_bar(raw, "decode")
    warns = [l for l in raw.split(b"\n") if b"bf16 stored as float32" in l]
    assert len(warns) == 1, raw
    assert warns[0].split(b"\r")[-1].startswith(b"gradcodec: warning: "), raw
    assert b"decode [" not in warns[0].split(b"\r")[-1], raw


clitest.run_all(globals())
