#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""CLI end to end: exit codes (0 ok, 1 usage, 2 input, 3 corrupt container) and one-line errors;
nothing is lost: no partial outputs, no overwrite without --force, no binary to a terminal."""
import json
import os
import pickle
import pty
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zipfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import EXE, fails, path, printable, run

np.savez(path("ok.npz"), w=np.arange(200, dtype=np.float32).reshape(20, 10))


def test_usage_errors_exit_1():
    fails("encode", path("ok.npz"), code=1, contains="--output")
    fails("frobnicate", code=1)
    fails("encode", path("ok.npz"), "-o", path("x.gcz"), "--pipeline", "zstdd", code=1, contains="unknown stage 'zstdd'")
    fails("encode", path("ok.npz"), "-o", path("x.gcz"), "--preset", "nope", code=1, contains="unknown preset 'nope'")
    fails("encode", path("ok.npz"), "-o", path("x.gcz"), "--preset", "fp16", "--pipeline", "zstd", code=1)
    fails("encode", path("ok.npz"), "-o", path("x.gcz"), "--pipeline", "zstd(level=99)", code=1, contains="out of range")
    fails("encode", path("ok.npz"), "-o", path("x.gcz"), "--include", "(", code=1, contains="--include")
    fails("list", "nothing", code=1)
    # An unknown option is named, wherever it stands, not hidden behind another complaint.
    for args, where in [(["--bogus"], "gradcodec --help"), (["encode", "--bogus", path("ok.npz")], "encode --help"),
                        (["encode", path("ok.npz"), "-o", path("x.gcz"), "--bogus=3"], "encode --help"),
                        (["list", "presets", "--x"], "list --help")]:
        err = fails(*args, code=1, contains=where)
        assert "unknown option '--" in err and "=3" not in err, err
    assert not os.path.exists(path("x.gcz"))


def test_input_errors_exit_2():
    fails("encode", path("missing.npz"), "-o", path("x.gcz"), code=2, contains="missing.npz")
    with open(path("text.npz"), "w") as f:
        f.write("not a zip")
    fails("encode", path("text.npz"), "-o", path("x.gcz"), code=2, contains="text.npz")
    np.savez(path("ints.npz"), a=np.arange(5))
    fails("encode", path("ints.npz"), "-o", path("x.gcz"), code=2, contains="no floating-point tensor")
    fails("encode", path("ok.npz"), "-o", path("x.gcz"), "--include", "^nomatch$", code=2, contains="--include")
    np.save(path("trunc.npy"), np.ones((100, 100), np.float32))
    with open(path("trunc.npy"), "r+b") as f:
        f.truncate(1000)
    fails("encode", path("trunc.npy"), "-o", path("x.gcz"), code=2, contains="trunc.npy")
    assert not os.path.exists(path("x.gcz"))
    # What users pass by mistake is named: a container, a pickle, nothing. A torch.save zip is read
    # (tests/cli/cli_torch_files.py): this one holds no tensor.
    run("encode", path("ok.npz"), "-o", path("ok.gcz"), "--quiet", "--force")
    fails("encode", path("ok.gcz"), "-o", path("x.gcz"), code=2, contains="a gradcodec container, not gradients")
    with open(path("g.pkl"), "wb") as f:
        pickle.dump({"w": [1.0, 2.0]}, f, protocol=4)
    fails("bench", path("g.pkl"), code=2, contains=["a Python pickle", "never unpickled"])
    with zipfile.ZipFile(path("ckpt.pt"), "w") as z:  # the layout of torch.save since PyTorch 1.6
        z.writestr("ckpt/data.pkl", pickle.dumps({}))
        z.writestr("ckpt/version", "3\n")
    fails("encode", path("ckpt.pt"), "-o", path("x.gcz"), code=2, contains="no floating-point tensor")
    p = subprocess.run([EXE, "encode", "-", "-o", path("x.gcz")], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert p.returncode == 2 and b"<stdin>: empty input" in p.stderr, p.stderr
    assert not os.path.exists(path("x.gcz"))


def write_safetensors(name, tensors):
    """A .safetensors file of f32 tensors, written by hand: {name: (shape, values)}."""
    header, blobs, off = {}, [], 0
    for key, (shape, values) in tensors.items():
        blob = np.asarray(values, "<f4").tobytes()
        header[key] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    text = json.dumps(header).encode()
    with open(path(name), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def test_what_a_container_cannot_store_exit_2():
    # Names over 65535 bytes and more than 32 dimensions are legal in the input formats; the
    # container's u16 lengths and u8 rank cannot hold them. Refused as input, naming the file and
    # the tensor (this was exit 4, "internal error", for the name), before any output exists.
    write_safetensors("longname.safetensors", {"ok": ([2], [1, 2]), "x" * 70000: ([2], [1, 2])})
    fails("encode", path("longname.safetensors"), "-o", path("ln.gcz"), code=2,
          contains=["longname.safetensors", "70000 bytes", "at most 65535"])
    write_safetensors("rank34.safetensors", {"deep": ([1] * 33 + [2], [1, 2])})
    fails("encode", path("rank34.safetensors"), "-o", path("ln.gcz"), code=2,
          contains=["rank34.safetensors", "'deep'", "34 dimensions", "at most 32"])
    fails("bench", path("rank34.safetensors"), "--preset", "lossless", code=2, contains="34 dimensions")
    assert not os.path.exists(path("ln.gcz"))
    assert not [f for f in os.listdir(clitest.WORK) if ".tmp-" in f], os.listdir(clitest.WORK)


def test_corrupt_container_exit_3():
    # A snapshot given as a container is an input error said as such (exit 2, tests/cli/cli_new_user.py);
    # bytes of no known format are a corrupt container.
    fails("decode", path("ok.npz"), "-o", path("y.npz"), code=2, contains=["ok.npz", "not a gradcodec container"])
    with open(path("noise.gcz"), "wb") as f:
        f.write(bytes(range(256)))
    fails("inspect", path("noise.gcz"), code=3, contains="bad magic")
    run("encode", path("ok.npz"), "-o", path("ok.gcz"), "--quiet")
    data = open(path("ok.gcz"), "rb").read()
    with open(path("bad.gcz"), "wb") as f:
        f.write(data[:-1])
    fails("decode", path("bad.gcz"), "-o", path("y.npz"), code=3, contains=["bad.gcz", "trailer"])
    assert not os.path.exists(path("y.npz"))


def test_no_overwrite_without_force():
    run("encode", path("ok.npz"), "-o", path("exists.gcz"), "--quiet")
    before = open(path("exists.gcz"), "rb").read()
    fails("encode", path("ok.npz"), "-o", path("exists.gcz"), "--preset", "fp16", code=1, contains="--force")
    assert open(path("exists.gcz"), "rb").read() == before
    with open(path("exists.npz"), "wb") as f:
        f.write(b"precious")
    fails("decode", path("exists.gcz"), "-o", path("exists.npz"), code=1, contains="--force")
    assert open(path("exists.npz"), "rb").read() == b"precious"
    run("decode", path("exists.gcz"), "-o", path("exists.npz"), "--force")
    assert np.load(path("exists.npz"))["w"].shape == (20, 10)


def test_failure_midway_leaves_no_partial_file():
    # The second member's deflate data is damaged: found only when that tensor is read.
    np.savez_compressed(path("dmg.npz"), a=np.ones(5000, np.float32), b=np.random.default_rng(1).standard_normal(5000).astype(np.float32))
    raw = bytearray(open(path("dmg.npz"), "rb").read())
    with zipfile.ZipFile(path("dmg.npz")) as z:
        info = z.getinfo("b.npy")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra) + 200
    for i in range(start, start + 64):
        raw[i] ^= 0x5A
    open(path("dmg.npz"), "wb").write(bytes(raw))
    fails("encode", path("dmg.npz"), "-o", path("dmg.gcz"), code=2, contains="dmg.npz")
    assert not os.path.exists(path("dmg.gcz"))
    assert not [f for f in os.listdir(clitest.WORK) if ".tmp-" in f], os.listdir(clitest.WORK)


def test_failed_frame_leaves_no_file_of_any_frame():
    # Three frames; the last holds a name HDF5 cannot take ('a/.b'). Every frame's file is
    # completed under a temporary name and renamed only when all are: none is left behind
    # (before, out.frame000.h5 and out.frame001.h5 were).
    for f in range(3):
        extra = {"a/.b": np.ones(2, np.float32)} if f == 2 else {}
        np.savez(path(f"fr{f}.npz"), w=np.full(3, f, np.float32), **extra)
    run("encode", path("fr0.npz"), path("fr1.npz"), path("fr2.npz"), "-o", path("fr.gcz"), "--quiet")
    os.makedirs(path("frames"))
    fails("decode", path("fr.gcz"), "-o", path("frames", "out.h5"), code=1, contains=["out.frame002.h5", "a/.b"])
    assert os.listdir(path("frames")) == [], os.listdir(path("frames"))
    # To a directory of .npy ('a/.b' cannot be a file name there): the directories the run made
    # (DIR, DIR/sub, DIR/sub/frameNNN) are gone too; a directory that was there stays.
    fails("decode", path("fr.gcz"), "-o", path("made", "sub") + "/", code=1, contains="a/.b")
    assert not os.path.exists(path("made"))
    fails("decode", path("fr.gcz"), "-o", path("frames") + "/", code=1, contains="a/.b")
    assert os.listdir(path("frames")) == [], os.listdir(path("frames"))
    # The same container to .npz: all three frames.
    run("decode", path("fr.gcz"), "-o", path("frames", "out.npz"))
    assert sorted(os.listdir(path("frames"))) == [f"out.frame00{f}.npz" for f in range(3)]
    assert np.load(path("frames", "out.frame001.npz"))["w"].tolist() == [1, 1, 1]


def test_devices_and_fifos_are_written_in_place():
    # A device or a FIFO is written to, never renamed over (before, '--force' replaced the node
    # with a regular file, and without it the run was refused as "already exists").
    run("encode", path("ok.npz"), "-o", "/dev/null", "--quiet")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    fifo = path("out.fifo")
    os.mkfifo(fifo)
    for extra in ([], ["--force"]):
        got = []
        reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
        reader.start()
        run("encode", path("ok.npz"), "-o", fifo, "--quiet", *extra)
        reader.join(60)
        assert stat.S_ISFIFO(os.stat(fifo).st_mode)
        assert got and got[0][:4] == b"\x89GCZ", got[:1]
    # HDF5 needs a regular file to write by name: a device (here through a link named .h5) is
    # refused, and the link and the device stay as they were.
    run("encode", path("ok.npz"), "-o", path("dev.gcz"), "--quiet")
    os.symlink("/dev/null", path("null.h5"))
    fails("decode", path("dev.gcz"), "-o", path("null.h5"), "--force", code=1, contains="device or a FIFO")
    assert os.path.islink(path("null.h5")) and stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_empty_output_path_refused_before_work():
    fails("encode", path("ok.npz"), "-o", "", code=1, contains="--output: is empty")


def test_interrupted_run_leaves_no_temporary():
    # A slow encode (lzma preset 9 over 8 MB of noise), interrupted once its temporary exists.
    np.savez(path("slow.npz"), w=np.random.default_rng(3).standard_normal(2_000_000).astype(np.float32))
    os.makedirs(path("intr"))
    for sig in (signal.SIGINT, signal.SIGTERM):
        p = subprocess.Popen([EXE, "encode", path("slow.npz"), "-o", path("intr", "slow.gcz"), "--pipeline",
                              "raw | lzma(preset=9)", "--quiet"], stderr=subprocess.PIPE)
        deadline = time.time() + 60
        while not os.listdir(path("intr")) and time.time() < deadline and p.poll() is None:
            time.sleep(0.01)
        assert p.poll() is None, "the encode ended before it could be interrupted"
        p.send_signal(sig)
        _, err = p.communicate(timeout=60)
        assert p.returncode == -sig, p.returncode
        assert b"interrupted" in err, err
        assert os.listdir(path("intr")) == [], os.listdir(path("intr"))


def test_interrupted_bench_leaves_no_scratch_container():
    # bench writes its timed runs' container to /dev/shm (or the temp directory) and reads it
    # back; an interrupt between runs must not leave it behind, nor the temporary each run writes
    # before renaming it into place. Each timed run removes the previous container first, so the
    # final name exists only for the few milliseconds of a decode: the test waits for either name.
    if not os.path.exists(path("slow.npz")):
        np.savez(path("slow.npz"), w=np.random.default_rng(3).standard_normal(2_000_000).astype(np.float32))
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
    p = subprocess.Popen([EXE, "bench", path("slow.npz"), "--preset", "lossless", "--min-time", "60", "--quiet"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    scratch = f"gradcodec-bench-{p.pid}.gcz"

    def left():
        return [n for n in os.listdir(shm) if n == scratch or n.startswith(scratch + ".tmp-")]

    deadline = time.time() + 60
    while not left() and time.time() < deadline and p.poll() is None:
        time.sleep(0.002)
    if p.poll() is not None:  # say why, not only that
        raise AssertionError(f"bench ended ({p.returncode}) before its container appeared: {p.stderr.read()!r}")
    assert left(), f"neither {scratch} nor its temporary in {shm} after 60 s"
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == -signal.SIGINT, p.returncode
    assert b"interrupted" in err, err
    assert left() == [], left()


def test_output_that_is_an_input_or_a_directory_is_refused_before_work():
    # --force replaces an existing output, never a file being read (under any name).
    np.savez(path("victim.npz"), w=np.arange(10, dtype=np.float32))
    before = open(path("victim.npz"), "rb").read()
    fails("encode", path("victim.npz"), "-o", path("victim.npz"), "--force", code=1,
          contains="is also an input")
    os.symlink(path("victim.npz"), path("alias.npz"))
    fails("encode", path("victim.npz"), "-o", path("alias.npz"), "--force", code=1, contains="is also an input")
    assert open(path("victim.npz"), "rb").read() == before
    run("encode", path("victim.npz"), "-o", path("v1.gcz"), "--quiet")
    run("encode", path("victim.npz"), "-o", path("v2.gcz"), "--quiet")
    v1 = open(path("v1.gcz"), "rb").read()
    fails("merge", path("v1.gcz"), path("v2.gcz"), "-o", path("v1.gcz"), "--force", "--method", "mean", code=1,
          contains="is also an input")
    assert open(path("v1.gcz"), "rb").read() == v1
    # An existing directory as encode's output: refused at once (it failed after the whole run).
    os.makedirs(path("outdir"), exist_ok=True)
    fails("encode", path("victim.npz"), "-o", path("outdir"), "--force", code=1, contains="is a directory")
    # decode to a device without a format in its name writes NPZ there, as the README says.
    run("decode", path("v1.gcz"), "-o", "/dev/null")


def test_failed_write_to_stdout_is_an_error():
    if not os.path.exists("/dev/full"):
        return
    run("encode", path("ok.npz"), "-o", path("full.gcz"), "--quiet")
    for args in (["inspect", path("full.gcz")], ["list", "stages"]):
        with open("/dev/full", "wb") as full:
            p = subprocess.run([EXE, *args], stdout=full, stderr=subprocess.PIPE, timeout=60)
        assert p.returncode == 2, (args, p.returncode)
        assert b"<stdout>: write failed" in p.stderr, p.stderr


def test_option_values_checked_and_messages_on_one_line():
    fails("foo", code=1, contains="unknown command 'foo'")
    # A parse error in a subcommand points to that subcommand's help, naming what is missing.
    fails("list", code=1, contains=["stages|presets is required", "(see gradcodec list --help)"])
    fails("encode", path("ok.npz"), code=1, contains=["--output is required", "(see gradcodec encode --help)"])
    for opt in ("--preset", "--pipeline"):
        fails("encode", path("ok.npz"), "-o", path("o1.gcz"), opt, "", code=1, contains=f"{opt}: is empty")
        fails("bench", path("ok.npz"), opt, " ", code=1, contains=f"{opt}: is empty")
    # Any option's empty value is refused, naming the option (CLI11 would otherwise take the
    # default and run: --threads '' as all cores, decode --frame '' as every frame).
    for opt in ("--threads", "--memory-limit", "--keyframe-interval"):
        fails("encode", path("ok.npz"), "-o", path("o1.gcz"), opt, "", code=1, contains=f"{opt}: is empty")
    for opt in ("--threads", "--repeat"):
        fails("bench", path("ok.npz"), opt, "", code=1, contains=f"{opt}: is empty")
    run("encode", path("ok.npz"), "-o", path("o_empty.gcz"), "--quiet", "--force")
    for opt in ("--frame", "--threads", "--memory-limit"):
        fails("decode", path("o_empty.gcz"), "-o", path("o_empty.npz"), opt, "", code=1, contains=f"{opt}: is empty")
    # (The empty-value check is on options that take a value: the help shows flags bare.)
    for sub in ("encode", "decode", "inspect", "bench", "merge", "list"):
        for line in run(sub, "--help")[0].decode().splitlines():
            if line.strip().startswith(("-f,--force", "-v,--verbose", "-h,--help", "--strict", "--pass-through")):
                assert "TEXT" not in line, (sub, line)
    # A --frame out of range is named as typed (CLI11 would clamp it to 2^63-1 first).
    fails("decode", path("o_empty.gcz"), "-o", path("o_empty.npz"), "--frame", "99999999999999999999", code=1,
          contains="--frame: '99999999999999999999' is not a whole number")
    for seed in ("-1", "99999999999999999999999", "7x"):
        fails("encode", path("ok.npz"), "-o", path("o1.gcz"), "--seed", seed, code=1, contains="whole number")
    run("encode", path("ok.npz"), "-o", path("o1.gcz"), "--seed", str(2**64 - 1), "--quiet")
    assert json.loads(run("inspect", path("o1.gcz"), "--json")[0])["seed"] == 2**64 - 1
    # --frame counts from the end when negative (-1 is the last frame): beyond the first, refused.
    fails("decode", path("o1.gcz"), "-o", path("o1.npz"), "--frame", "-2", code=1,
          contains="--frame -2: the container holds 1 frame(s): 0..0, or -1..-1 counting from the end")
    # Numbers CLI11 cannot convert, or out of range: what the option takes, not "Could not
    # convert" or a range printed as a 309-digit number.
    for args, msg in [(["encode", path("ok.npz"), "-o", path("o1.gcz"), "--threads", "-3"],
                       "--threads: '-3' is not a whole number >= 0 (see gradcodec encode --help)"),
                      (["bench", path("ok.npz"), "--repeat", "1.5"], "--repeat: '1.5' is not a whole number >= 0"),
                      (["bench", path("ok.npz"), "--min-time", "-1"], "--min-time: '-1' is not a number of seconds >= 0"),
                      (["bench", path("ok.npz"), "--min-time", "nan"], "'nan' is not a number of seconds >= 0")]:
        err = fails(*args, code=1, contains=msg)
        assert len(err) < 200, err
    assert not os.path.exists(path("o1.npz"))
    # A tensor name holding a newline: the warning and the error stay on one line (\n escaped).
    np.savez(path("nl.npz"), w=np.ones(3, np.float32), **{"bad\nint": np.arange(3)})
    _, err = run("encode", path("nl.npz"), "-o", path("nl.gcz"))
    warnings = [l for l in err.splitlines() if "warning" in l]
    assert len(warnings) == 1 and "bad\\nint" in warnings[0], err
    assert all(l.startswith("gradcodec: ") for l in err.splitlines() if l.strip()), err
    fails("encode", path("nl.npz"), "-o", path("nl2.gcz"), "--strict", code=2, contains="bad\\nint")


def test_binary_output_to_terminal_refused():
    run("encode", path("ok.npz"), "-o", path("t.gcz"), "--quiet")
    for args in (["encode", path("ok.npz"), "-o", "-"], ["decode", path("t.gcz"), "-o", "-"]):
        master, slave = pty.openpty()
        p = subprocess.run([EXE, *args], stdout=slave, stderr=subprocess.PIPE, timeout=60)
        os.close(slave)
        os.close(master)
        assert p.returncode == 1, p.returncode
        assert b"terminal" in p.stderr


def test_help_and_list():
    out, _ = run("--help")
    assert b"encode" in out and b"decode" in out and b"inspect" in out
    out, _ = run("list", "presets")
    assert b"lossless" in out and b"fp16" in out
    out, _ = run("list", "stages")
    assert b"zstd" in out and b"source:" in out
    # Every subcommand's help is text: UTF-8, no control characters (CLI11 once printed the
    # --nonfinite enum's values as bytes 0x01 and 0x00 here).
    for sub in ("encode", "decode", "inspect", "bench", "merge", "list"):
        out, _ = run(sub, "--help")
        text = out.decode("utf-8")
        assert printable(text), f"{sub} --help: {[c for c in text if not printable(c)]}"
        assert "--help" in text
    out, _ = run("encode", "--help")
    assert b"{refuse,raw}" in out


def test_unknown_tensor_and_frame():
    run("encode", path("ok.npz"), "-o", path("u.gcz"), "--quiet")
    fails("decode", path("u.gcz"), "--tensor", "nope", "-o", path("u.npy"), code=1, contains=["nope", "w"])
    fails("decode", path("u.gcz"), "--frame", "3", "-o", path("u.npz"), code=1, contains="frame 3")


def test_decode_memory_limit():
    # A tensor needing 4 MB to decode: refused under a 1M limit before any allocation, decoded
    # under 8M; a bad size is a usage error. The header cap and the tensor-count cap are covered
    # by test_data/corrupt (cli_corrupt), NPZ bombs by the npz fixtures, lossless bombs by
    # test_lossless.
    np.savez(path("big.npz"), w=np.ones((1000, 1000), np.float32))
    run("encode", path("big.npz"), "-o", path("big.gcz"), "--preset", "topk-1pct", "--quiet")
    fails("decode", path("big.gcz"), "-o", path("big_out.npz"), "--memory-limit", "1M", code=2,
          contains=["tensor 'w'", "needs 4000000 bytes", "memory limit of 1048576 bytes", "--memory-limit"])
    assert not os.path.exists(path("big_out.npz"))
    run("decode", path("big.gcz"), "-o", path("big_out.npz"), "--memory-limit", "8M")
    for bad in ("lots", "-5", "3X", "99999999999T"):
        fails("decode", path("big.gcz"), "-o", path("big_out2.npz"), "--memory-limit", bad, code=1,
              contains="--memory-limit")


clitest.run_all(globals())
