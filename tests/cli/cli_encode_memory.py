#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""`encode --memory-limit` (issue 36, item 7): a tensor whose encoding would take more memory
than the limit — its bytes plus the working memory the pipeline's stages declare for it
(PipelineStages::work_bytes) — is refused before it is read, with exit 2 and one line naming the
file and the tensor. A 1 MB NPZ declaring a 1 GiB member drove `--preset powersgd-r2` to 4.2 GB
of RSS before. Peak RSS is each child's ru_maxrss, from os.wait4 as in cli_memory.py; the test
process stays small (no numpy, inputs written in 1 MiB pieces) since a child's ru_maxrss starts
at its parent's size. Not run under the sanitizers (their shadow memory is not the tool's)."""
import json
import os
import re
import struct
import subprocess
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import EXE, path

ROOT = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "..")
MiB = 1 << 20


def write_zip(p, name, npy_header, payload_chunks, total):
    """One deflated member: the NPY header, then `total` bytes handed out by payload_chunks() as
    (bytes, repeat) pairs; each distinct chunk is deflated once behind a full flush and its
    compressed form repeated, so a member of zeros declaring 1 GiB is a ~1 MB file."""
    co = zlib.compressobj(9, zlib.DEFLATED, -15)
    comp = [co.compress(npy_header) + co.flush(zlib.Z_FULL_FLUSH)]
    crc = zlib.crc32(npy_header)
    done = 0
    for chunk, repeat in payload_chunks:
        z = co.compress(chunk) + co.flush(zlib.Z_FULL_FLUSH)
        comp.append(z * repeat)
        for _ in range(repeat):
            crc = zlib.crc32(chunk, crc)
        done += len(chunk) * repeat
    assert done == total
    comp.append(co.flush())
    comp = b"".join(comp)
    usize = len(npy_header) + total
    fname = name.encode()
    zip64 = usize >= 0xFFFFFFFF
    extra_local = struct.pack("<HHQQ", 1, 16, usize, len(comp)) if zip64 else b""
    extra_central = struct.pack("<HHQQ", 1, 16, usize, len(comp)) if zip64 else b""
    u32 = (lambda v: 0xFFFFFFFF) if zip64 else (lambda v: v)
    version = 45 if zip64 else 20
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, version, 0, 8, 0, 0x21, crc, u32(len(comp)), u32(usize),
                        len(fname), len(extra_local)) + fname + extra_local
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, version, version, 0, 8, 0, 0x21, crc, u32(len(comp)),
                          u32(usize), len(fname), len(extra_central), 0, 0, 0, 0, 0) + fname + extra_central
    off = len(local) + len(comp)
    eocd = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central), off, 0)
    with open(p, "wb") as f:
        f.write(local + comp + central + eocd)


def npy_header(descr, shape):
    head = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': ({', '.join(map(str, shape))},), }}"
    head += " " * (-(10 + len(head) + 1) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode()


def write_zeros_npz(p, shape, descr="<f4", itemsize=4):
    """An NPZ whose member `w` declares an array of zeros of this shape (a zip bomb when large)."""
    n = 1
    for d in shape:
        n *= d
    total = n * itemsize
    full, rest = divmod(total, MiB)
    write_zip(p, "w.npy", npy_header(descr, shape), [(bytes(MiB), full), (bytes(rest), 1)], total)


def write_random_npz(p, shape):
    """An NPZ whose member `w` is gradient-like f32 values (finite, |x| in 2^-15..2^-14)."""
    high = bytes((b & 0x80) | 0x38 | ((b >> 6) & 1) for b in range(256))
    n = shape[0] * shape[1]
    chunks = []
    for _ in range(4 * n // MiB):
        buf = bytearray(os.urandom(MiB))
        buf[3::4] = bytes(buf[3::4]).translate(high)
        chunks.append((bytes(buf), 1))
    write_zip(p, "w.npy", npy_header("<f4", shape), chunks, 4 * n)


def in_child(write, *args):
    """Runs write(*args) in a forked child: the test process stays small, since every later
    child's ru_maxrss starts at its parent's size."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            write(*args)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, write.__name__


def encode_rss(*args):
    """Runs gradcodec encode; returns (exit code, stderr text, peak RSS in bytes)."""
    p = subprocess.Popen([EXE, "encode", *map(str, args)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    err = p.stderr.read().decode()
    p.stderr.close()
    return os.waitstatus_to_exitcode(status), err, usage.ru_maxrss * 1024


def one_error_line(err, *contains):
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("gradcodec: error: "), err
    for c in contains:
        assert c in lines[0], (c, lines[0])
    return lines[0]


def needs(err):
    m = re.search(r"needs (\d+) bytes", err)
    assert m, err
    return int(m.group(1))


def test_declared_gigabyte_member_is_refused_before_it_is_inflated():
    bomb = path("bomb.npz")
    in_child(write_zeros_npz, bomb, [16384, 16384])  # 1 GiB of f32 zeros
    assert os.path.getsize(bomb) < 2 * 10**6
    out = path("bomb.gcz")
    code, err, rss = encode_rss(bomb, "-o", out, "--preset", "powersgd-r2", "--memory-limit", "2G")
    print(f"  1 GiB member, powersgd-r2, --memory-limit 2G: exit {code}, peak RSS {rss / 1e6:.1f} MB")
    assert code == 2, err
    line = one_error_line(err, bomb, "tensor 'w'", "268435456 f32 elements", "powersgd(rank=2",
                          "memory limit of 2147483648 bytes", "--memory-limit")
    assert needs(line) > 2 << 30
    assert rss < 64 * 10**6, rss  # nothing of the member was inflated (4.2 GB before)
    assert not os.path.exists(out) and not [f for f in os.listdir(clitest.WORK) if ".tmp" in f]


def test_default_limit_is_8_gib():
    bomb = path("bomb3.npz")
    in_child(write_zeros_npz, bomb, [32768, 24576])  # 3 GiB of f32 zeros: over 8 GiB with powersgd's memory
    code, err, rss = encode_rss(bomb, "-o", path("bomb3.gcz"), "--preset", "powersgd-r2")
    print(f"  3 GiB member, powersgd-r2, default limit: exit {code}, peak RSS {rss / 1e6:.1f} MB")
    assert code == 2, err
    one_error_line(err, "tensor 'w'", "memory limit of 8589934592 bytes")
    assert rss < 64 * 10**6, rss
    os.remove(bomb)


def test_non_floating_tensor_counts_too():
    # A sparse .safetensors file declaring a 1 GiB int64 tensor (stored as it is with
    # --pass-through) beside a small f32 one: refused before either is read.
    src = path("ints.safetensors")
    header = json.dumps({"b": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                         "ints": {"dtype": "I64", "shape": [1 << 27], "data_offsets": [16, 16 + (8 << 27)]}}).encode()
    header += b" " * (-len(header) % 8)
    with open(src, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        f.truncate(8 + len(header) + 16 + (8 << 27))
    code, err, rss = encode_rss(src, "-o", path("ints.gcz"), "--preset", "lossless", "--pass-through",
                                "--memory-limit", "1G")
    assert code == 2, err
    one_error_line(err, "tensor 'ints'", "needs 2147483648 bytes", "memory limit of 1073741824 bytes")
    assert rss < 64 * 10**6, rss
    os.remove(src)


def test_just_under_the_limit_passes():
    # A 16 MiB tensor: the limit it needs is read from the refusal, then given exactly (passes,
    # and the measured peak stays under it) and one byte short (refused).
    src = path("small.npz")
    in_child(write_zeros_npz, src, [2048, 2048])
    out = path("small.gcz")
    code, err, _ = encode_rss(src, "-o", out, "--preset", "powersgd-r2", "--memory-limit", "1M")
    assert code == 2, err
    need = needs(one_error_line(err, "tensor 'w'", "memory limit of 1048576 bytes"))
    code, err, _ = encode_rss(src, "-o", out, "--preset", "powersgd-r2", "--memory-limit", need - 1)
    assert code == 2, err
    one_error_line(err, f"needs {need} bytes", f"memory limit of {need - 1} bytes")
    assert not os.path.exists(out)
    code, err, rss = encode_rss(src, "-o", out, "--preset", "powersgd-r2", "--memory-limit", need, "--quiet")
    print(f"  16 MiB tensor, powersgd-r2, --memory-limit {need}: exit {code}, peak RSS {rss / 1e6:.1f} MB")
    assert code == 0, err
    assert os.path.getsize(out) > 0
    clitest.run("decode", out, "-o", path("small_back.npz"))


def test_bad_limit_is_a_usage_error():
    src = path("tiny.npz")
    in_child(write_zeros_npz, src, [4, 4])
    clitest.fails("encode", src, "-o", path("tiny.gcz"), "--memory-limit", "12Q", code=1,
                  contains="--memory-limit: '12Q' is not a size")


def test_declared_memory_bounds_the_measured_peak():
    """Every preset's declared working memory is an upper bound on what it takes: peak RSS of
    encoding a 16 MiB f32 tensor of gradient-like values stays under the limit the refusal names,
    plus the process's own 40 MB (code, libraries, the compressors' contexts)."""
    src = path("grad.npz")
    in_child(write_random_npz, src, [2048, 2048])
    presets = [p["name"] for p in json.loads(clitest.run("list", "presets", "--json")[0])]
    for preset in presets:
        code, err, _ = encode_rss(src, "-o", path("g.gcz"), "--preset", preset, "--memory-limit", "1", "-f")
        assert code == 2, (preset, err)
        need = needs(err)
        code, err, rss = encode_rss(src, "-o", path("g.gcz"), "--preset", preset, "--threads", "1", "-f", "--quiet")
        assert code == 0, (preset, err)
        print(f"  {preset:20s} declared {need / 1e6:7.1f} MB, peak RSS {rss / 1e6:7.1f} MB")
        assert rss <= need + 40 * 10**6, (preset, rss, need)


def test_docs_table_lists_every_preset_as_the_tool_counts_it():
    doc = open(os.path.join(ROOT, "docs", "robustness.md")).read()
    section = doc[doc.index("## Encode memory limit"):]
    section = section[:section.index("\n## ")]
    rows = dict(re.findall(r"^\| `([^`]+)` \| ([0-9.]+) \|", section, re.M))
    tool = {p["name"]: p["encode_memory"] for p in json.loads(clitest.run("list", "presets", "--json")[0])}
    assert set(rows) == set(tool), (sorted(set(rows) ^ set(tool)))
    for name, value in tool.items():
        assert abs(float(rows[name]) - value) < 0.051, (name, rows[name], value)


clitest.run_all(globals())
