#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Crafted inputs whose checksums are valid but whose structure is hostile: JSON nested 100,000
levels deep (container header, pipeline variant, safetensors header), header values of the wrong
type or out of range, and stage streams a stage decoder refuses. Each must end in one error line
with the documented exit code and no output file (docs/robustness.md)."""
import ctypes
import json
import os
import struct
import subprocess
import sys
import unicodedata

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import fails, path, run

_xxh = ctypes.CDLL("libxxhash.so.0")  # Debian's libxxhash0, which gradcodec links too
_xxh.XXH3_64bits.restype = ctypes.c_uint64
_xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]

MAGIC = b"\x89GCZ\r\n\x1a\n"
END_MAGIC = b"\x89GCZEND\n"
DEEP = 100_000  # levels of nesting in the hostile JSON


def xxh3(b):
    return _xxh.XXH3_64bits(bytes(b), len(b))


# ---------------------------------------------------------------- a .gcz taken apart and rebuilt
# (layout: docs/format.md). Offsets of frames and records are kept relative to the body, so a
# header of another length moves them; every checksum is recomputed.

class Gcz:
    def __init__(self, data):
        hlen = struct.unpack_from("<I", data, 12)[0]
        self.header = json.loads(data[16:16 + hlen], object_pairs_hook=dict)
        body_start = 16 + hlen + 8
        footer = struct.unpack_from("<Q", data, len(data) - 24)[0]
        self.body = bytearray(data[body_start:footer])
        flen = struct.unpack_from("<Q", data, footer + 4)[0]
        p, pos = data[footer + 12:footer + 12 + flen], 0

        def take(fmt):
            nonlocal pos
            v = struct.unpack_from(fmt, p, pos)
            pos += struct.calcsize(fmt)
            return v[0] if len(v) == 1 else v
        self.frames = []
        for _ in range(take("<I")):
            off, n = take("<Q"), take("<I")
            self.frames.append((off - body_start, [(o - body_start, s) for o, s in (take("<QQ") for _ in range(n))]))
        self.variants = []
        for _ in range(take("<I")):
            n = take("<I")
            self.variants.append(p[pos:pos + n])
            pos += n

    def bytes(self, header_text=None):
        """The container again; header_text (bytes) replaces the header's JSON as it is."""
        h = header_text if header_text is not None else json.dumps(self.header, separators=(",", ":")).encode()
        out = bytearray(MAGIC + struct.pack("<HHI", 1, 0, len(h)) + h)
        out += struct.pack("<Q", xxh3(out))
        base = len(out)
        out += self.body
        footer = len(out)
        p = bytearray(struct.pack("<I", len(self.frames)))
        for off, recs in self.frames:
            p += struct.pack("<QI", off + base, len(recs))
            for o, s in recs:
                p += struct.pack("<QQ", o + base, s)
        p += struct.pack("<I", len(self.variants))
        for v in self.variants:
            p += struct.pack("<I", len(v)) + v
        sec = b"FOOT" + struct.pack("<Q", len(p)) + p
        out += sec + struct.pack("<Q", xxh3(sec))
        t = struct.pack("<QHH", footer, 1, 0)
        out += t + struct.pack("<I", xxh3(t) & 0xFFFFFFFF) + END_MAGIC
        return bytes(out)

    def record_streams(self, frame, i):
        """[(name, offset of its checksum in the body, offset of its bytes in the body, size)]."""
        off = self.frames[frame][1][i][0]
        b = self.body
        assert b[off:off + 4] == b"TREC"
        mlen = struct.unpack_from("<I", b, off + 4)[0]
        pos = off + 8
        name_len = struct.unpack_from("<H", b, pos)[0]
        pos += 2 + name_len
        dtype = b[pos]
        pos += 2
        if dtype == 0:
            pos += 2 + struct.unpack_from("<H", b, pos)[0]
        ndim = b[pos]
        pos += 1 + 8 * ndim + 1  # shape, storage
        while b[pos] & 0x80:  # variant (varint)
            pos += 1
        pos += 1
        count = b[pos]
        pos += 1
        data = off + 16 + mlen
        out = []
        for _ in range(count):
            nl = b[pos]
            name = bytes(b[pos + 1:pos + 1 + nl]).decode()
            pos += 1 + nl + 1
            size = struct.unpack_from("<Q", b, pos)[0]
            out.append((name, pos + 8, data, size))
            pos += 16
            data += size
        return out

    def set_stream(self, frame, i, stream, new):
        """Replaces a stream's bytes (same length) and re-seals its checksum and the metadata's."""
        off = self.frames[frame][1][i][0]
        for name, sum_at, data, size in self.record_streams(frame, i):
            if name == stream:
                assert len(new) == size
                self.body[data:data + size] = new
                struct.pack_into("<Q", self.body, sum_at, xxh3(new))
                mlen = struct.unpack_from("<I", self.body, off + 4)[0]
                struct.pack_into("<Q", self.body, off + 8 + mlen, xxh3(self.body[off:off + 8 + mlen]))
                return
        raise KeyError(stream)

    def stream(self, frame, i, stream):
        for name, _, data, size in self.record_streams(frame, i):
            if name == stream:
                return bytes(self.body[data:data + size])
        raise KeyError(stream)


np.savez(path("g.npz"), w=np.linspace(-1, 1, 40, dtype=np.float32), b=np.ones(3, np.float32))
run("encode", path("g.npz"), "-o", path("g.gcz"), "--pipeline", "fp16", "--quiet")
GOOD = Gcz(open(path("g.gcz"), "rb").read())


def write(name, data):
    with open(path(name), "wb") as f:
        f.write(data)
    return path(name)


def refused(data, code, contains=()):
    """decode (1 and 3 threads) and inspect of `data` each fail with one line and `code`; no output."""
    f = write("hostile.gcz", data)
    if os.path.exists(path("never.npz")):  # (left by a failed test before)
        os.remove(path("never.npz"))
    lines = []
    for cmd in (["decode", f, "-o", path("never.npz"), "--threads", "1"],
                ["decode", f, "-o", path("never.npz"), "--threads", "3"], ["inspect", f]):
        lines.append(fails(*cmd, code=code, contains=contains))
        assert not os.path.exists(path("never.npz"))
    return lines[0]


def deep_array(levels):
    return b"[" * levels + b"]" * levels


def header_with(key, raw_value):
    """The good header's JSON text with `key`'s value replaced by raw_value (bytes, as written)."""
    parts = []
    for k, v in GOOD.header.items():
        val = raw_value if k == key else json.dumps(v, separators=(",", ":")).encode()
        parts.append(json.dumps(k).encode() + b":" + val)
    if key not in GOOD.header:
        parts.append(json.dumps(key).encode() + b":" + raw_value)
    return b"{" + b",".join(parts) + b"}"


# ---------------------------------------------------------------- 1. no recursion on deep JSON

def test_rebuilt_container_is_still_good():
    # The crafting above changes nothing by itself: the rebuilt container decodes.
    f = write("same.gcz", GOOD.bytes(header_with("tool", json.dumps(GOOD.header["tool"]).encode())))
    run("decode", f, "-o", path("same.npz"), "--quiet")
    assert np.array_equal(np.load(path("same.npz"))["b"], np.ones(3, np.float32))


def test_deep_pipeline_in_header():
    refused(GOOD.bytes(header_with("pipeline", deep_array(DEEP))), 3,
            ("corrupt container: header at offset 16", "nested more than"))


def test_deep_inputs_in_header():
    refused(GOOD.bytes(header_with("inputs", deep_array(DEEP))), 3,
            ("corrupt container: header at offset 16", "nested more than"))


def test_deep_objects_in_an_unknown_header_field():
    deep = b'{"a":' * DEEP + b"1" + b"}" * DEEP
    refused(GOOD.bytes(header_with("future_field", deep)), 3, "nested more than")


def test_moderately_nested_unknown_field_is_ignored():
    # Readers ignore unknown fields (docs/format.md): nesting well under the cap stays readable.
    f = write("nested.gcz", GOOD.bytes(header_with("future_field", deep_array(40))))
    run("decode", f, "-o", path("nested.npz"), "--quiet")
    assert np.array_equal(np.load(path("nested.npz"))["b"], np.ones(3, np.float32))
    out, _ = run("inspect", f, "--json")
    assert json.loads(out)["pipeline"] == "fp16"


def test_deep_pipeline_variant_in_footer():
    g = Gcz(GOOD.bytes())
    g.variants = [deep_array(DEEP)]
    refused(g.bytes(), 3, ("footer at offset", "variant 1", "nested more than"))


def test_deep_safetensors_header():
    # An unknown field of a tensor entry (ignored when shallow, as the reference does) nested
    # 100,000 levels: refused as an input error, without building or walking it.
    for extra in (deep_array(DEEP), b'{"a":' * DEEP + b"1" + b"}" * DEEP):
        header = b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":' + extra + b"}}"
        header += b" " * (-len(header) % 8)
        f = write("deep.safetensors", struct.pack("<Q", len(header)) + header + b"\0" * 8)
        fails("encode", f, "-o", path("never.gcz"), "--preset", "lossless", code=2,
              contains=("deep.safetensors: safetensors: header has", "nested more than"))
        assert not os.path.exists(path("never.gcz"))


def test_shallow_unknown_safetensors_field_is_ignored():
    header = b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":' + deep_array(40) + b"}}"
    header += b" " * (-len(header) % 8)
    f = write("shallow.safetensors", struct.pack("<Q", len(header)) + header + struct.pack("<2f", 1.5, -2))
    run("encode", f, "-o", path("shallow.gcz"), "--preset", "lossless", "--quiet")


# ---------------------------------------------------------------- 9. stage decoder errors say where

def damaged_index(pipeline, gap_byte):
    """A two-tensor container of `pipeline` whose second tensor's index stream has byte gap_byte
    raised to 0x7f (a gap beyond the tensor), its checksums re-sealed; with the record's offset."""
    np.savez(path("s.npz"), a=np.linspace(-2, 2, 40, dtype=np.float32), w=np.linspace(-1, 1, 40, dtype=np.float32))
    run("encode", path("s.npz"), "-o", path("s.gcz"), "--pipeline", pipeline, "--quiet", "--force")
    g = Gcz(open(path("s.gcz"), "rb").read())
    data = open(path("s.gcz"), "rb").read()
    body_start = 16 + struct.unpack_from("<I", data, 12)[0] + 8
    idx = bytearray(g.stream(0, 1, "index"))
    idx[gap_byte] = 0x7F
    g.set_stream(0, 1, "index", bytes(idx))
    return g.bytes(), body_start + g.frames[0][1][1][0]


def test_stage_decoder_error_names_file_frame_tensor_and_offset():
    data, offset = damaged_index("topk(k=2) | raw | varint", 2)  # count 2, gaps 0 and 0x7f
    f = write("hostile.gcz", data)
    line = refused(data, 3)
    assert line == (f"gradcodec: error: {f}: corrupt container: record 1 of frame 0 (tensor w) at offset {offset}: "
                    "varint: gap 127 after position 0 leaves the universe of 40 positions"), line


def test_stage_decoder_error_in_a_later_frame_and_in_merge():
    # Frame 1 of a sequence: the frame is named; merge (which decodes every worker) says it too.
    np.savez(path("f0.npz"), w=np.linspace(-1, 1, 40, dtype=np.float32))
    np.savez(path("f1.npz"), w=np.linspace(1, -1, 40, dtype=np.float32))
    for name in ("seq", "other"):
        run("encode", path("f0.npz"), path("f1.npz"), "-o", path(name + ".gcz"), "--pipeline",
            "topk(k=2) | raw | varint", "--quiet", "--force")
    g = Gcz(open(path("seq.gcz"), "rb").read())
    idx = bytearray(g.stream(1, 0, "index"))
    idx[2] = 0x7F
    g.set_stream(1, 0, "index", bytes(idx))
    f = write("seq.gcz", g.bytes())
    refused(g.bytes(), 3, ("record 0 of frame 1 (tensor w) at offset", "varint: gap 127"))
    fails("merge", f, path("other.gcz"), "-o", path("never.gcz"), "--method", "mean", code=3,
          contains=(f"{f}: corrupt container: record 0 of frame 1 (tensor w) at offset", "varint: gap 127"))
    assert not os.path.exists(path("never.gcz"))


# ---------------------------------------------------------------- 10. header values are checked

BAD_VALUES = [  # (field, value as written, what the error says)
    ("keyframe_interval", b"1e300", '"keyframe_interval" must be an integer from 0 to 4294967295, not 1e+300'),
    ("keyframe_interval", b"4294967296", '"keyframe_interval" must be an integer from 0 to 4294967295, not 4294967296'),
    ("keyframe_interval", b"-1", '"keyframe_interval" must be an integer from 0 to 4294967295, not -1'),
    ("keyframe_interval", b"2.0", '"keyframe_interval" must be an integer from 0 to 4294967295, not 2.0'),
    ("keyframe_interval", b'"3"', '"keyframe_interval" must be an integer from 0 to 4294967295, not a string'),
    ("keyframe_interval", b"null", '"keyframe_interval" must be an integer from 0 to 4294967295, not null'),
    ("seed", b"-1", '"seed" must be an integer from 0 to 18446744073709551615, not -1'),
    ("seed", b"18446744073709551616", '"seed" must be an integer from 0 to 18446744073709551615, not 1.8446744073709552e+19'),
    ("seed", b"0.5", '"seed" must be an integer from 0 to 18446744073709551615, not 0.5'),
    ("seed", b"true", '"seed" must be an integer from 0 to 18446744073709551615, not a boolean'),
    ("seed", b"[0]", '"seed" must be an integer from 0 to 18446744073709551615, not an array'),
    ("tool", b"7", '"tool" must be a string, not 7'),
    ("pipeline_text", b"{}", '"pipeline_text" must be a string, not an object'),
    ("format", b'"zip"', '"format" must be "gcz"'),
    ("format", b"1", '"format" must be "gcz"'),
    ("inputs", b'{"path":"g.npz"}', '"inputs" must be an array of objects, not an object'),
    ("inputs", b'["g.npz"]', '"inputs" must be an array of objects: input 0 is a string'),
    ("inputs", b'[{"path":1,"format":"npz"}]', '"inputs": input 0: "path" must be a string, not 1'),
    ("inputs", b'[{"path":"g.npz","format":["npz"]}]', '"inputs": input 0: "format" must be a string, not an array'),
    ("inputs", b'[{"path":"g.npz","format":"npz","metadata":[]}]',
     '"inputs": input 0: "metadata" must be an object of strings, not an array'),
    ("inputs", b'[{"path":"g.npz","format":"npz","metadata":{"a":"b","c":2}}]',
     '"inputs": input 0: "metadata" must be an object of strings: "c" is 2'),
    ("pipeline", b'{"stage":"fp16"}', "pipeline JSON: expected a non-empty array of stages"),
    ("target", b'"bits=1"', '"target" must be an object, not a string'),
    ("target", b"[1]", '"target" must be an object, not an array'),
]


def test_ill_typed_or_out_of_range_header_values_are_refused():
    for field, value, why in BAD_VALUES:
        f = write("hostile.gcz", GOOD.bytes(header_with(field, value)))
        line = refused(GOOD.bytes(header_with(field, value)), 3)
        assert line == f"gradcodec: error: {f}: corrupt container: header at offset 16: {why}", (field, value, line)


def test_missing_header_fields_are_refused():
    for field in ("tool", "pipeline", "pipeline_text", "seed", "keyframe_interval", "inputs", "format"):
        h = {k: v for k, v in GOOD.header.items() if k != field}
        f = write("hostile.gcz", GOOD.bytes(json.dumps(h).encode()))
        line = refused(GOOD.bytes(json.dumps(h).encode()), 3)
        want = '"format" must be "gcz"' if field == "format" else f'missing field "{field}"'
        assert line == f"gradcodec: error: {f}: corrupt container: header at offset 16: {want}", line


def test_header_values_at_their_limits_are_read():
    h = dict(GOOD.header, seed=2**64 - 1, keyframe_interval=2**32 - 1)
    h["inputs"] = [dict(h["inputs"][0], metadata={"a": "b"})]
    h["target"] = {"target": "bits=1", "future": [1, 2]}  # optional; its keys are the writer's
    f = write("limits.gcz", GOOD.bytes(json.dumps(h).encode()))
    out, _ = run("inspect", f, "--json")
    info = json.loads(out)
    assert (info["seed"], info["keyframe_interval"]) == (2**64 - 1, 2**32 - 1), info
    assert info["target"] == h["target"]
    run("decode", f, "-o", path("limits.npz"), "--quiet", "--force")


# ---------------------------------------------------------------- 14. a library's text on one line

def one_clean_line(cmd, code, contains):
    """cmd fails with `code` and a stderr of exactly one line that is valid UTF-8 with no control
    character, nor any character a Unicode reader breaks lines at (U+0085, U+2028, U+2029)."""
    p = subprocess.run([clitest.EXE, *cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert p.returncode == code, (p.returncode, p.stderr)
    text = p.stderr.decode("utf-8")  # raises on bytes that are not UTF-8
    assert text.endswith("\n") and text.count("\n") == 1, repr(text)
    line = text[:-1]
    assert line.startswith("gradcodec: error: ") and len(line.splitlines()) == 1, repr(text)
    assert not any(unicodedata.category(c) == "Cc" or c in "\u2028\u2029" for c in line), repr(line)
    for c in contains:
        assert c in line, (c, line)
    return line


def test_altered_zfp_and_fpzip_streams_are_corrupt():
    # Checksums re-sealed, so the stage's own checks must refuse the stream: zfp's blocks would
    # run past the stream's end (all bits set), fpzip's hash no longer matches (one bit flipped).
    a = np.linspace(-1e-3, 1e-3, 1000, dtype=np.float32) * np.cos(np.arange(1000, dtype=np.float32))
    np.savez(path("z.npz"), w=a, b=np.ones(3, np.float32))
    for pipeline, stage in (("zfp(mode=accuracy, tolerance=1e-7)", "zfp"), ("zfp(mode=reversible)", "zfp"),
                            ("fpzip", "fpzip"), ("fpzip(precision=16)", "fpzip")):
        run("encode", path("z.npz"), "-o", path("z.gcz"), "--pipeline", pipeline, "--quiet", "--force")
        g = Gcz(open(path("z.gcz"), "rb").read())
        i = next(k for k in range(2) if len(g.stream(0, k, "value")) > 100)  # w
        v = bytearray(g.stream(0, i, "value"))
        if stage == "zfp":
            v[:] = b"\xff" * len(v)
        else:
            v[20] ^= 0x04
        g.set_stream(0, i, "value", bytes(v))
        refused(g.bytes(), 3, contains=(f"(tensor w)", f": {stage}: "))


def test_a_stream_name_twice_in_a_record_is_corrupt():
    # docs/stages.md: a reader looks streams up by name, and a name appears at most once in a
    # record. Renaming a record's `index` stream to `value` (same length, checksums resealed)
    # must be refused as a corrupt container, not reach the decoder as an internal error.
    run("encode", path("g.npz"), "-o", path("tk.gcz"), "--pipeline", "topk(ratio=0.5) | varint", "--quiet", "-f")
    g = Gcz(open(path("tk.gcz"), "rb").read())
    names = [n for n, *_ in g.record_streams(0, 0)]
    assert sorted(names) == ["index", "value"], names
    off = g.frames[0][1][0][0]
    mlen = struct.unpack_from("<I", g.body, off + 4)[0]
    meta = bytes(g.body[off:off + 8 + mlen])
    at = meta.index(b"\x05index")
    g.body[off + at + 1:off + at + 6] = b"value"
    struct.pack_into("<Q", g.body, off + 8 + mlen, xxh3(g.body[off:off + 8 + mlen]))
    refused(g.bytes(), 3, contains=["'value'", "twice"])


def test_streams_are_read_by_name_in_any_order():
    # docs/stages.md: the order of a record's streams is not fixed; a reader looks them up by
    # name. The same record with its two streams (`value`, `index`) swapped (descriptors and bytes,
    # checksums resealed) decodes to the same values.
    run("encode", path("g.npz"), "-o", path("so.gcz"), "--pipeline", "topk(ratio=0.5) | varint", "--quiet", "-f")
    run("decode", path("so.gcz"), "-o", path("so.npz"), "-f")
    g = Gcz(open(path("so.gcz"), "rb").read())
    off = g.frames[0][1][0][0]
    (n1, sum1, data1, size1), (n2, sum2, data2, size2) = g.record_streams(0, 0)
    assert sorted((n1, n2)) == ["index", "value"]
    d1 = (sum1 - 10 - len(n1), sum1 + 8)  # name length, name, width, size, checksum
    d2 = (sum2 - 10 - len(n2), sum2 + 8)
    assert d1[1] == d2[0]
    b = g.body
    b[d1[0]:d2[1]] = b[d2[0]:d2[1]] + b[d1[0]:d1[1]]
    b[data1:data2 + size2] = b[data2:data2 + size2] + b[data1:data1 + size1]
    mlen = struct.unpack_from("<I", b, off + 4)[0]
    struct.pack_into("<Q", b, off + 8 + mlen, xxh3(b[off:off + 8 + mlen]))
    assert [n for n, *_ in g.record_streams(0, 0)] == [n2, n1]
    with open(path("so2.gcz"), "wb") as f:
        f.write(g.bytes())
    run("decode", path("so2.gcz"), "-o", path("so2.npz"), "-f")
    with np.load(path("so.npz")) as want, np.load(path("so2.npz")) as got:
        assert sorted(want.files) == sorted(got.files)
        for k in want.files:
            assert want[k].tobytes() == got[k].tobytes(), k


def test_tcs_keyframe_k_g_is_a_mask_of_the_first_positions():
    # docs/stages.md, tcs: a keyframe record carries k_g = 0; the reader does not check the 0
    # itself, but with the previous output cleared a nonzero k_g makes the first k_g positions
    # the mask, and the keyframe's coded positions (here 0 … 14, a tensor of zeros) fall in it.
    np.savez(path("tk0.npz"), w=np.zeros(100, np.float32))
    run("encode", path("tk0.npz"), "-o", path("tk0.gcz"), "--pipeline", "tcs(global=0.1, local=0.05)", "--quiet", "-f")
    g = Gcz(open(path("tk0.gcz"), "rb").read())
    index = g.stream(0, 0, "index")
    assert index[0] == 0  # k_g = 0 as written
    run("decode", path("tk0.gcz"), "-o", path("tk0_out.npz"), "-f")
    g.set_stream(0, 0, "index", b"\x03" + index[1:])
    refused(g.bytes(), 3, contains=["tcs", "coded position 0 is already in the global mask"])


def test_library_message_quoting_the_file_stays_one_line():
    # nlohmann::json quotes the bytes it last read: a safetensors key holding NEL (U+0085), LINE
    # SEPARATOR (U+2028) and the control character that stops the parse.
    header = b'{"\xc2\x85\xe2\x80\xa8x\x01": 1}'
    header += b" " * (-len(header) % 8)
    f = write("nel.safetensors", struct.pack("<Q", len(header)) + header)
    one_clean_line(["encode", f, "-o", path("never.gcz")], 2,
                   ("invalid JSON in header", "\\u0085\\u2028x<U+0001>"))
    # ... and a container header's byte that is not UTF-8 (the header is not checked for UTF-8
    # before it is parsed; nlohmann::json stops there and quotes it), escaped.
    h = header_with("tool", b'"\xff\xfe\x1b[2J"')
    one_clean_line(["inspect", write("hostile.gcz", GOOD.bytes(h))], 3,
                   ("header at offset 16: not valid JSON", "last read: '\"\\xff'"))
    assert not os.path.exists(path("never.gcz"))


clitest.run_all(globals())
