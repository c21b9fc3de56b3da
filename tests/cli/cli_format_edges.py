#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""CLI end to end, edge cases of the input and output formats: an HDF5 input that changes while
it is encoded fails naming the dataset (never silent fill values), an HDF5 null dataspace
(h5py.Empty) is skipped with a warning, and the safetensors writer's header for many tensors."""
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import time

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import EXE, fails, path, run


def wait_until(cond, what, timeout=60.0):
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.01)


def test_hdf5_truncated_while_encoding_fails_naming_the_dataset():
    # libhdf5 reads data past the end of a file that shrank after it was opened as zeros: the old
    # binary exited 0 and c4, c5 decoded as all zeros. Deterministic: encode opens every input of
    # the sequence first, so it holds g.h5 open while it waits for the second input on stdin;
    # the file is truncated then, and stdin closed.
    rng = np.random.default_rng(3)
    h5 = path("trunc", "g.h5")
    os.makedirs(os.path.dirname(h5), exist_ok=True)
    with h5py.File(h5, "w") as f:  # contiguous datasets, data after each one's header
        for i in range(6):
            f.create_dataset(f"c{i}", data=rng.standard_normal((64, 64)).astype(np.float32))
    size = os.path.getsize(h5)
    out = path("trunc", "g.gcz")
    p = subprocess.Popen([EXE, "encode", h5, "-", "-o", out, "--preset", "lossless", "--threads", "1"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        fd_dir = f"/proc/{p.pid}/fd"

        def holds_h5():
            try:
                return any(os.path.realpath(os.path.join(fd_dir, n)) == os.path.realpath(h5)
                           for n in os.listdir(fd_dir))
            except OSError:
                return False
        wait_until(lambda: holds_h5() or p.poll() is not None, "encode has opened the HDF5 input")
        assert p.poll() is None, p.stderr.read().decode()

        def reads_stdin():  # blocked in read(0, ...): x86-64 syscall 0, arm64 63 (/proc/PID/syscall)
            try:
                with open(f"/proc/{p.pid}/syscall") as f:
                    fields = f.read().split()
            except OSError:
                return None
            return len(fields) > 1 and fields[0] in ("0", "63") and int(fields[1], 16) == 0
        if reads_stdin() is None:
            time.sleep(0.5)  # no /proc/PID/syscall: inspecting six datasets takes microseconds
        else:
            wait_until(lambda: reads_stdin() or p.poll() is not None, "encode waits for its second input")
        assert p.poll() is None, p.stderr.read().decode()
        os.truncate(h5, size * 2 // 5)  # c0's data is kept, the data of c3, c4 and c5 is not
        second = io.BytesIO()
        np.savez(second, c0=np.ones((64, 64), np.float32))
        _, err = p.communicate(second.getvalue(), timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    err = err.decode("utf-8", "replace")
    assert p.returncode == 2, f"exit {p.returncode}:\n{err}"
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"gradcodec: error: {h5}: dataset /c"), err
    assert "the file changed while it was read" in lines[0] and f"{size} bytes when opened" in lines[0], err
    assert not os.path.exists(out)
    assert os.listdir(os.path.dirname(out)) == ["g.h5"], os.listdir(os.path.dirname(out))  # no temporaries


def test_hdf5_null_dataspace_is_skipped_with_a_warning():
    # h5py.Empty has no shape; it was encoded as a tensor of shape [0] without a word.
    h5 = path("null.h5")
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    with h5py.File(h5, "w") as f:
        f.create_dataset("grad/w", data=w)
        f.create_dataset("grad/nothing", data=h5py.Empty("<f4"))
        f.create_dataset("flag", data=h5py.Empty("<i4"))
    gcz = path("null.gcz")
    _, err = run("encode", h5, "-o", gcz, "--preset", "lossless")
    for name in ("/grad/nothing", "/flag"):
        warning = [l for l in err.splitlines() if name in l]
        assert len(warning) == 1, err
        assert warning[0].startswith(f"gradcodec: warning: {h5}: skipping dataset {name}:"), warning[0]
        assert "null (h5py.Empty)" in warning[0], warning[0]
    # --strict refuses non-floating arrays; a null dataspace is no array: still skipped, named.
    _, err = run("encode", h5, "-o", path("null_strict.gcz"), "--strict")
    assert "skipping dataset /grad/nothing" in err and "skipping dataset /flag" in err, err
    run("decode", gcz, "-o", path("null_out.npz"))
    z = np.load(path("null_out.npz"))
    assert sorted(z.files) == ["grad.w"], z.files
    assert np.array_equal(z["grad.w"], w)
    # Only null dataspaces: nothing to encode, said as such.
    with h5py.File(path("only_null.h5"), "w") as f:
        f.create_dataset("e", data=h5py.Empty("<f4"))
    fails("encode", path("only_null.h5"), "-o", path("only_null.gcz"), code=2, contains="no floating-point tensor")
    assert not os.path.exists(path("only_null.gcz"))


def test_safetensors_header_of_many_tensors_lists_each_in_order():
    # The header is written entry by entry (it was one ordered JSON object, quadratic in the number
    # of tensors): the same bytes as json.dumps without spaces, names escaped, offsets contiguous.
    rng = np.random.default_rng(5)
    names = [f"layer{i}.w" for i in range(3000)] + ['q"uote', "back\\slash", "tab\tname", "naïve→名"]
    arrays = {n: rng.standard_normal(1 + i % 5).astype(np.float32) for i, n in enumerate(names)}
    np.savez(path("many.npz"), **arrays)
    run("encode", path("many.npz"), "-o", path("many.gcz"), "--preset", "lossless")
    run("decode", path("many.gcz"), "-o", path("many.safetensors"))
    with open(path("many.safetensors"), "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    text = blob[8:8 + n].decode("utf-8")
    assert n % 8 == 0 and text == text.rstrip(" ") + " " * (len(text) - len(text.rstrip(" ")))
    header = json.loads(text)
    expected = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name in names:
        a = arrays[name]
        expected[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    assert list(header) == list(expected) and header == expected
    assert text.rstrip(" ") == json.dumps(expected, separators=(",", ":"), ensure_ascii=False)
    data = blob[8 + n:]
    assert len(data) == offset
    for name in names:
        b, e = header[name]["data_offsets"]
        assert np.array_equal(np.frombuffer(data[b:e], dtype="<f4"), arrays[name]), name


def test_safetensors_metadata_of_many_keys_kept_in_order():
    # __metadata__ is written key by key too, in file order (the reader refuses a key given twice).
    keys = [f"k{i}" for i in range(2000)]
    meta_text = ",".join(json.dumps(k) + ":" + json.dumps(f"v{k}\u00e9") for k in keys)
    w = np.arange(6, dtype="<f4")
    header = ('{"__metadata__":{' + meta_text + '},"w":{"dtype":"F32","shape":[6],"data_offsets":[0,24]}}').encode()
    header += b" " * ((8 - len(header) % 8) % 8)
    with open(path("meta.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + w.tobytes())
    run("encode", path("meta.safetensors"), "-o", path("meta.gcz"), "--preset", "lossless")
    run("decode", path("meta.gcz"), "-o", path("meta_out.safetensors"))
    with open(path("meta_out.safetensors"), "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    pairs = json.loads(blob[8:8 + n], object_pairs_hook=lambda p: p)
    assert pairs[0][0] == "__metadata__"
    got = pairs[0][1]
    assert [k for k, _ in got] == keys, [k for k, _ in got][:10]
    assert dict(got)["k6"] == "vk6\u00e9"


clitest.run_all(dict(globals()))
