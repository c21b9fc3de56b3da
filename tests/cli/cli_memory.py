#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Peak memory of `encode` on a snapshot much larger than its largest tensor (issue 10, item 5):
the resident set must stay within 3x the largest tensor + 64 MB whatever the snapshot's size,
with 1 and 2 threads, for a sparsifier, a quantizer and the lossless preset. The input is a
memory-mapped safetensors file: without releasing each tensor's pages after use, the whole file
would end up resident. Peak RSS is the child's ru_maxrss (what `/usr/bin/time -v` reports).
Not run under the sanitizers (their shadow memory is not the tool's)."""
import json
import os
import struct
import subprocess
import sys
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import EXE, path

# Two snapshots of f32 tensors (element counts): 48 tensors of 4 MiB (192 MiB), and a mix whose
# largest tensors are 16 MiB, larger than the 4 MiB mmap threshold `encode` fixes for glibc:
# without it, glibc raises its threshold to each freed block's size and the worker threads' heaps
# keep the freed tensor-sized buffers resident (lossless, 2 threads: ~120 MB against a limit of
# 114 MB; ~92 MB with it).
SNAPSHOTS = {
    "uniform": [1 << 20] * 48,
    "mixed": [1 << 22, 1 << 14, 2359296, 1 << 10] * 6,
}


# High byte of each little-endian f32: keep the sign and one exponent bit, force the rest so every
# value is finite, of magnitude 2^-15..2^-14 (gradient-like), whatever the random bytes were.
HIGH = bytes((b & 0x80) | 0x38 | ((b >> 6) & 1) for b in range(256))


def write_snapshot(p, sizes):
    # No numpy here: the test process stays small, since a spawned child's peak RSS starts at
    # its parent's size (ru_maxrss survives exec).
    header, off = {}, 0
    for i, n in enumerate(sizes):
        header[f"layer{i}.weight"] = {"dtype": "F32", "shape": [n], "data_offsets": [off, off + 4 * n]}
        off += 4 * n
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for n in sizes:
            buf = bytearray(os.urandom(4 * n))
            buf[3::4] = bytes(buf[3::4]).translate(HIGH)
            f.write(buf)


def write_npz(p, sizes):
    # Stored members, as np.savez writes them (no numpy here, as above).
    with zipfile.ZipFile(p, "w", zipfile.ZIP_STORED) as z:
        for i, n in enumerate(sizes):
            head = f"{{'descr': '<f4', 'fortran_order': False, 'shape': ({n},), }}"
            head += " " * (-(10 + len(head) + 1) % 64) + "\n"
            buf = bytearray(os.urandom(4 * n))
            buf[3::4] = bytes(buf[3::4]).translate(HIGH)
            with z.open(f"layer{i}.weight.npy", "w", force_zip64=True) as m:
                m.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode())
                m.write(buf)


def peak_rss_bytes(*args):
    p = subprocess.Popen([EXE, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    err = p.stderr.read().decode()
    p.stderr.close()
    assert os.waitstatus_to_exitcode(status) == 0, err
    return usage.ru_maxrss * 1024  # kilobytes on Linux


def test_peak_rss_is_bounded_by_the_largest_tensor():
    for shape, sizes in SNAPSHOTS.items():
        snap = path(f"{shape}.safetensors")
        write_snapshot(snap, sizes)
        limit = 3 * 4 * max(sizes) + 64 * 10**6
        for preset in ("topk-1pct", "qsgd4", "bird+", "lossless"):
            for threads in ("1", "2"):
                rss = peak_rss_bytes("encode", snap, "-o", path("big.gcz"), "--preset", preset, "--threads", threads,
                                     "--force", "--quiet")
                print(f"  {shape:8s} {preset:10s} threads {threads}: peak RSS {rss / 1e6:.1f} MB (limit "
                      f"{limit / 1e6:.1f} MB, input {os.path.getsize(snap) / 1e6:.0f} MB)")
                assert rss <= limit, (shape, preset, threads, rss, limit)
        os.remove(snap)


def test_npz_input_is_not_held_whole():
    # An npz is read with pread (its members' pages never mapped into the process): when libzip
    # read the mapped file, the whole archive stayed resident (600 MB for a 590 MB npz).
    sizes = SNAPSHOTS["uniform"]
    limit = 3 * 4 * max(sizes) + 64 * 10**6
    snap = path("in.npz")
    write_npz(snap, sizes)
    # --threads 1000 is cut to the machine's cores: taken literally, every tensor would be in
    # flight at once (48 x 4 MiB read into memory).
    for preset in ("topk-1pct", "lossless"):
        for threads in ("1", "2", "1000"):
            rss = peak_rss_bytes("encode", snap, "-o", path("npz.gcz"), "--preset", preset, "--threads", threads,
                                 "--force", "--quiet")
            print(f"  npz input {preset:10s} threads {threads}: peak RSS {rss / 1e6:.1f} MB (limit "
                  f"{limit / 1e6:.1f} MB, input {os.path.getsize(snap) / 1e6:.0f} MB)")
            assert rss <= limit, ("npz", preset, threads, rss, limit)
    # The same archive under another extension, recognised by its magic bytes.
    other = path("in.archive")
    os.rename(snap, other)
    rss = peak_rss_bytes("encode", other, "-o", path("npz.gcz"), "--preset", "topk-1pct", "--force", "--quiet")
    print(f"  npz input by magic: peak RSS {rss / 1e6:.1f} MB (limit {limit / 1e6:.1f} MB)")
    assert rss <= limit, ("npz by magic", rss, limit)
    os.remove(other)


def test_decode_peak_rss_is_bounded_by_the_largest_tensor():
    # Decoding writes each tensor as it comes: safetensors' header (every offset) is written first
    # from the container's index, npz spools its members to a file. Holding the decoded tensors
    # until the end would make the peak the whole snapshot (192 MiB here).
    sizes = SNAPSHOTS["uniform"]
    snap = path("dec.safetensors")
    write_snapshot(snap, sizes)
    limit = 3 * 4 * max(sizes) + 64 * 10**6
    for preset in ("lossless", "qsgd4"):
        peak_rss_bytes("encode", snap, "-o", path("dec.gcz"), "--preset", preset, "--force", "--quiet")
        for out in ("out.safetensors", "out.npz"):
            for threads in ("1", "2", "1000"):  # 1000: cut to the cores, as for encode
                rss = peak_rss_bytes("decode", path("dec.gcz"), "-o", path(out), "--force", "--threads", threads)
                print(f"  decode {preset:8s} -> {out:16s} threads {threads}: peak RSS {rss / 1e6:.1f} MB (limit "
                      f"{limit / 1e6:.1f} MB, output {os.path.getsize(path(out)) / 1e6:.0f} MB)")
                assert rss <= limit, (preset, out, threads, rss, limit)
                os.remove(path(out))
    os.remove(snap)


clitest.run_all(globals())
