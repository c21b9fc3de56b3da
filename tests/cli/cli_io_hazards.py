#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""CLI end to end: inputs that misbehave while they are read — special files given by name
(FIFOs, devices), unbounded standard input, files that shrink during the read — and
interruptions of a decode to a directory. Each ends in one error line and the documented exit
code, never a hang or a crash, and leaves nothing behind (docs/robustness.md)."""
import fcntl
import os
import signal
import stat
import struct
import subprocess
import sys
import termios
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import EXE, fails, path, run

# A hang is a failure, not a stuck test: every command that could block gets this many seconds.
HANG = 30

np.savez(path("ok.npz"), w=np.arange(200, dtype=np.float32).reshape(20, 10))
run("encode", path("ok.npz"), "-o", path("ok.gcz"), "--quiet")


def fails_quickly(*args, code, contains=(), stdin=None):
    """fails() for a command that must not block: killed (and the test failed) after HANG s."""
    p = subprocess.Popen([EXE, *map(str, args)], stdin=stdin if stdin is not None else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(timeout=HANG)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise AssertionError(f"gradcodec {' '.join(map(str, args))}: still running after {HANG} s (a hang)")
    err = err.decode("utf-8", "replace")
    assert p.returncode == code, f"exit {p.returncode}, expected {code}\n{err}"
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("gradcodec: error: "), err
    for c in ([contains] if isinstance(contains, str) else contains):
        assert c in lines[0], f"'{c}' not in: {lines[0]}"
    return lines[0]


# ---------------------------------------------------------------- special files by name

def test_fifo_input_is_refused_without_blocking():
    # Nobody ever writes to these FIFOs: opening one for reading would wait forever.
    for name in ("f.npz", "f.gcz", "f.list"):
        if not os.path.exists(path(name)):
            os.mkfifo(path(name))
    hint = "not a regular file; read it through standard input ('-') instead"
    fails_quickly("encode", path("f.npz"), "-o", path("f.gcz.out"), code=2, contains=(path("f.npz"), "FIFO", hint))
    fails_quickly("decode", path("f.gcz"), "-o", path("out.npz"), code=2, contains=(path("f.gcz"), "FIFO"))
    fails_quickly("inspect", path("f.gcz"), code=2, contains=(path("f.gcz"), "FIFO"))
    fails_quickly("merge", path("ok.gcz"), path("f.gcz"), "-o", path("m.gcz"), "--method", "mean", code=2,
                  contains=(path("f.gcz"), "FIFO"))
    fails_quickly("bench", path("f.npz"), "--preset", "lossless", "--quiet", code=2, contains=(path("f.npz"), "FIFO"))
    fails_quickly("bench", "--workers", path("f.list"), "--quiet", code=2,
                  contains=(path("f.list"), "FIFO"))
    # A sequence whose second input is a FIFO: refused before the output is created.
    fails_quickly("encode", path("ok.npz"), path("f.npz"), "-o", path("seq.gcz"), code=2, contains="FIFO")
    assert not os.path.exists(path("seq.gcz")) and not os.path.exists(path("out.npz"))


def test_device_input_is_refused():
    fails_quickly("encode", "/dev/zero", "-o", path("z.gcz"), code=2, contains=("/dev/zero", "character device"))
    fails_quickly("decode", "/dev/zero", "-o", path("z.npz"), code=2, contains=("/dev/zero", "character device"))


def test_fifo_through_stdin_still_works():
    # '-' stays the way to read a pipe.
    data = open(path("ok.npz"), "rb").read()
    gcz, _ = run("encode", "-", "-o", "-", "--quiet", stdin=data)
    assert gcz[:4] == b"\x89GCZ"


# ---------------------------------------------------------------- interrupted decode to a directory

def full_pipe():
    """A pipe whose buffer is full: the first write to its write end blocks until the read end is
    read. Given to gradcodec as stderr, it holds the process at its first message."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    for n in (65536, 4096, 512, 64, 8, 1):
        try:
            while True:
                os.write(w, b"." * n)
        except BlockingIOError:
            pass
    os.set_blocking(w, True)
    return r, w


def drain(r):
    """Everything written to the read end r until every writer has closed it (with the filler)."""
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    return b"".join(chunks).lstrip(b".")


def sequence_container():
    if not os.path.exists(path("seq3.gcz")):
        rng = np.random.default_rng(8)
        for k in range(3):
            np.savez(path(f"step{k}.npz"), w=rng.standard_normal(5000).astype(np.float32),
                     b=rng.standard_normal(10).astype(np.float32))
        run("encode", *[path(f"step{k}.npz") for k in range(3)], "-o", path("seq3.gcz"), "--quiet")
    return path("seq3.gcz")


def interrupt_decode_after_frame_0(out, sig):
    """decode SEQ -o out -v, held by a full stderr right after frame 0 was written (its files under
    temporary names in out/frame000/), then sent `sig`. Returns what it wrote to stderr."""
    gcz = sequence_container()
    r, w = full_pipe()
    p = subprocess.Popen([EXE, "decode", gcz, "-o", out, "-v", "--threads", "1"], stdout=subprocess.DEVNULL,
                         stderr=w)
    os.close(w)
    # The process cannot pass the "frame 0 -> ..." line, so frame 1 never starts; wait for frame
    # 0's files to exist (polling a state the process cannot leave, not a guess at timing).
    frame0 = os.path.join(out, "frame000")
    deadline = time.time() + HANG
    while time.time() < deadline and p.poll() is None and not (os.path.isdir(frame0) and len(os.listdir(frame0)) >= 2):
        time.sleep(0.01)
    assert p.poll() is None and len(os.listdir(frame0)) >= 2, "decode did not stop after frame 0"
    p.send_signal(sig)
    err = drain(r)
    p.wait(timeout=HANG)
    assert p.returncode == -sig, p.returncode
    assert b"interrupted" in err, err
    return err


def test_interrupted_decode_removes_the_directories_it_created():
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        out = path(f"made-{int(sig)}", "out")  # neither exists: both are made by decode
        interrupt_decode_after_frame_0(out + "/", sig)
        assert not os.path.exists(out), (sig, os.listdir(out))
        assert not os.path.exists(os.path.dirname(out)), sig


def test_interrupted_decode_leaves_an_existing_directory_as_it_was():
    for sig in (signal.SIGINT, signal.SIGTERM):
        out = path(f"kept-{int(sig)}")
        os.makedirs(os.path.join(out, "old"))
        open(os.path.join(out, "keep.txt"), "w").write("mine")
        interrupt_decode_after_frame_0(out, sig)
        assert sorted(os.listdir(out)) == ["keep.txt", "old"], os.listdir(out)
        assert os.listdir(os.path.join(out, "old")) == []
        assert open(os.path.join(out, "keep.txt")).read() == "mine"


# ---------------------------------------------------------------- standard input is bounded

def test_stdin_that_is_no_container_fails_on_its_first_bytes():
    # An endless stream: refused on its magic, not read to the end (which never comes).
    with open("/dev/zero", "rb") as zero:
        fails_quickly("decode", "-", "-o", path("z.npz"), code=3, contains=("<stdin>", "bad magic"), stdin=zero)
    with open("/dev/zero", "rb") as zero:
        fails_quickly("inspect", "-", code=3, contains=("<stdin>", "bad magic"), stdin=zero)
    assert not os.path.exists(path("z.npz"))


def test_stdin_of_unknown_format_fails_at_once():
    with open("/dev/zero", "rb") as zero:
        fails_quickly("encode", "-", "-o", path("z.gcz"), code=2, contains=("<stdin>", "unknown file format"),
                      stdin=zero)
    with open("/dev/urandom", "rb") as noise:
        fails_quickly("encode", "-", "-o", path("z.gcz"), code=2, contains="<stdin>", stdin=noise)
    assert not os.path.exists(path("z.gcz"))


def npy_bytes(a):
    import io
    f = io.BytesIO()
    np.save(f, a)
    return f.getvalue()


def safetensors_bytes(arrays):
    import json
    import struct
    header, data = {}, b""
    for name, a in arrays.items():
        b = a.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


def encode_from_open_pipe(stream, out, what):
    """encode - with `stream` written to a pipe that stays open: gradcodec must stop reading where
    the stream's header says it ends (or refuse the header), not wait for an end of file that never
    comes. Returns (exit code, stderr text)."""
    p = subprocess.Popen([EXE, "encode", "-", "-o", out, "--quiet"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdin.write(stream)
    p.stdin.flush()
    try:
        p.wait(timeout=HANG)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        raise AssertionError(f"encode - waited for {what}")
    finally:
        p.stdin.close()
    return p.returncode, p.stderr.read().decode()


def test_stdin_reads_what_npy_and_safetensors_headers_declare_and_no_more():
    a = np.random.default_rng(4).standard_normal((64, 33)).astype(np.float32)
    for kind, stream in (("npy", npy_bytes(a)), ("st", safetensors_bytes({"w": a, "b": a[0]}))):
        out = path(f"pipe-{kind}.gcz")
        code, err = encode_from_open_pipe(stream, out, "the end of a stream whose size its header gives")
        assert code == 0, err
        run("decode", out, "-o", path(f"pipe-{kind}.npz"), "--quiet")
        got = np.load(path(f"pipe-{kind}.npz"))
        assert np.array_equal(got["w"] if kind == "st" else got[got.files[0]], a)


def test_stdin_shorter_than_its_header_declares_is_refused():
    a = np.arange(1000, dtype=np.float32)
    for stream in (npy_bytes(a)[:-100], safetensors_bytes({"w": a})[:-100]):
        fails("encode", "-", "-o", path("short.gcz"), code=2, contains="<stdin>", stdin=stream)
    assert not os.path.exists(path("short.gcz"))


def test_stdin_declaring_more_than_the_cap_is_refused_at_once():
    # A header declaring 32 GiB, then a pipe that stays open: refused on the header (over the
    # 16 GiB read through standard input), not after reading (or waiting for) 32 GiB.
    a = np.lib.format
    import io
    f = io.BytesIO()
    a.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (1 << 33,)})
    code, err = encode_from_open_pipe(f.getvalue() + b"\0" * 4096, path("huge.gcz"), "32 GiB its header declares")
    assert code == 2 and err.count("\n") == 1, (code, err)
    assert err.startswith("gradcodec: error: <stdin>: its header declares 34359738496 bytes, more than the 16 GiB"), err
    assert not os.path.exists(path("huge.gcz"))


# ---------------------------------------------------------------- inputs that shrink while read

def pipe_bytes(fd):
    """Bytes waiting in a pipe, read or not (FIONREAD)."""
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


def held_after_open(inputs, out):
    """encode INPUTS... -o OUT where the last input holds an int array with a 5000-character name:
    opening it prints a warning of over 4096 bytes (PIPE_BUF, so written in parts) after the inputs
    before it were opened and before any tensor is read. stderr is a pipe with one free page: the
    warning fills it and gradcodec waits there. Returns (process, read end) once it waits — the
    pipe full again, seen without reading it."""
    r, w = full_pipe()
    full = pipe_bytes(r)
    os.read(r, 4096)  # one page free
    p = subprocess.Popen([EXE, "encode", *inputs, "-o", out, "--threads", "1"], stdout=subprocess.DEVNULL, stderr=w)
    os.close(w)
    deadline = time.time() + HANG
    while time.time() < deadline and p.poll() is None and pipe_bytes(r) < full:
        time.sleep(0.01)
    assert p.poll() is None and pipe_bytes(r) == full, "encode did not stop at its warning"
    return p, r


def finish(p, r):
    """Lets a held process go on; returns (exit status, its stderr lines but the filler)."""
    err = drain(r).decode("utf-8", "replace")
    p.wait(timeout=HANG)
    return p.returncode, [l for l in err.splitlines() if l.strip()]


def long_named_ints():
    if not os.path.exists(path("ints.npz")):
        np.savez(path("ints.npz"), **{"i" * 5000: np.arange(10, dtype=np.int32)}, f=np.ones(4, np.float32))
    return path("ints.npz")


def check_shrank(status, lines, code, culprit, outdir):
    assert status == code, (status, [l[:200] for l in lines[-3:]])
    errors = [l for l in lines if l.startswith("gradcodec: error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], [l[:200] for l in lines[-3:]]
    assert culprit in errors[0] and "shrank" in errors[0], errors[0]
    assert os.listdir(outdir) == [], os.listdir(outdir)  # no output, no temporary


def test_input_truncated_during_encode_fails_with_exit_2():
    rng = np.random.default_rng(6)
    big = rng.standard_normal((1024, 1024)).astype(np.float32)  # 4 MiB
    os.makedirs(path("trunc-in", "dir"))
    np.save(path("trunc-in", "g.npy"), big)
    open(path("trunc-in", "g.safetensors"), "wb").write(safetensors_bytes({"a": big[:512], "b": big[512:]}))
    np.save(path("trunc-in", "dir", "a.npy"), big[:10])
    np.save(path("trunc-in", "dir", "b.npy"), big)
    cases = [(path("trunc-in", "g.npy"), path("trunc-in", "g.npy")),
             (path("trunc-in", "g.safetensors"), path("trunc-in", "g.safetensors")),
             (path("trunc-in", "dir"), path("trunc-in", "dir", "b.npy"))]
    for k, (given, victim) in enumerate(cases):
        outdir = path(f"trunc-out-{k}")
        os.makedirs(outdir)
        keep = open(victim, "rb").read()
        p, r = held_after_open([given, long_named_ints()], os.path.join(outdir, "x.gcz"))
        os.truncate(victim, 1 << 20)  # a quarter of the data left
        status, lines = finish(p, r)
        open(victim, "wb").write(keep)
        check_shrank(status, lines, 2, victim, outdir)


def test_container_truncated_during_decode_fails_with_exit_3():
    rng = np.random.default_rng(7)
    for k in range(3):
        np.save(path(f"frame{k}.npy"), rng.standard_normal(250_000).astype(np.float32))  # 1 MB
    gcz = path("trunc3.gcz")
    run("encode", *[path(f"frame{k}.npy") for k in range(3)], "-o", gcz, "--quiet")
    size = os.path.getsize(gcz)
    outdir = path("trunc-dec")
    os.makedirs(outdir)
    r, w = full_pipe()
    p = subprocess.Popen([EXE, "decode", gcz, "-o", os.path.join(outdir, "x.npz"), "-v", "--threads", "1"],
                         stdout=subprocess.DEVNULL, stderr=w)
    os.close(w)
    # Once frame 0's output exists the container is open; the full stderr holds the process
    # after frame 0 ("frame 0 -> ..."), so frames 1 and 2 are read after the truncation.
    deadline = time.time() + HANG
    while time.time() < deadline and p.poll() is None and not os.listdir(outdir):
        time.sleep(0.01)
    assert p.poll() is None, "decode ended before it could be held"
    os.truncate(gcz, size * 4 // 10)  # in frame 1's record
    status, lines = finish(p, r)
    check_shrank(status, lines, 3, gcz, outdir)


if __name__ == "__main__":
    clitest.run_all(globals())
