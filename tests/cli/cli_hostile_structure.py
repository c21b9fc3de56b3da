#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Crafted inputs whose checksums are valid but whose structure is hostile: JSON nested 100,000
levels deep (container header, pipeline variant, safetensors header), header values of the wrong
type or out of range, and stage streams a stage decoder refuses. Each must end in one error line
with the documented exit code and no output file (docs/robustness.md)."""
import json
import os
import struct
import subprocess
import sys
import unicodedata

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
import gcz
from clitest import fails, path, run

DEEP = 100_000  # levels of nesting in the hostile JSON


# ---------------------------------------------------------------- a .gcz taken apart and rebuilt
# gcz.py reads a container (format 1.1, docs/format.md) into a model; gcz.seal() writes the model
# again, changed, with every checksum recomputed (the record checks, footer, header, trailer).

def rebuilt(c, header_text=None):
    return gcz.seal(c, header_text)


def read(name):
    data = open(path(name), "rb").read()
    c = gcz.Container(data)
    assert c.minor == 1 and gcz.seal(c) == data  # 1.1 by default; re-sealing alone changes nothing
    return c


np.savez(path("g.npz"), w=np.linspace(-1, 1, 40, dtype=np.float32), b=np.ones(3, np.float32))
run("encode", path("g.npz"), "-o", path("g.gcz"), "--pipeline", "fp16", "--quiet")
GOOD = read("g.gcz")
# The same in format 1.0, for what 1.0 holds and 1.1 does not (its header's pipeline JSON and
# pipeline_text, its footer's JSON variants).
run("encode", path("g.npz"), "-o", path("g10.gcz"), "--pipeline", "fp16", "--format-version", "1.0", "--quiet")
GOOD10 = open(path("g10.gcz"), "rb").read()
GOOD10_HEADER = gcz.Container(GOOD10).header
assert gcz.Container(GOOD10).minor == 0


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


def header_with(key, raw_value, header=None):
    """The good header's JSON text (1.1, or the header given) with `key`'s value replaced by
    raw_value (bytes, as written)."""
    header = GOOD.header if header is None else header
    parts = []
    for k, v in header.items():
        val = raw_value if k == key else json.dumps(v, separators=(",", ":")).encode()
        parts.append(json.dumps(k).encode() + b":" + val)
    if key not in header:
        parts.append(json.dumps(key).encode() + b":" + raw_value)
    return b"{" + b",".join(parts) + b"}"


# ---------------------------------------------------------------- 1. no recursion on deep JSON

def test_rebuilt_container_is_still_good():
    # The crafting above changes nothing by itself: the rebuilt container decodes.
    f = write("same.gcz", rebuilt(GOOD, header_with("tool", json.dumps(GOOD.header["tool"]).encode())))
    run("decode", f, "-o", path("same.npz"), "--quiet")
    assert np.array_equal(np.load(path("same.npz"))["b"], np.ones(3, np.float32))
    assert v10(GOOD10) == GOOD10
    f = write("same10.gcz", v10(GOOD10, header_with("tool", json.dumps(GOOD10_HEADER["tool"]).encode(), GOOD10_HEADER)))
    run("decode", f, "-o", path("same10.npz"), "--quiet")
    assert np.array_equal(np.load(path("same10.npz"))["b"], np.ones(3, np.float32))
    # A longer 1.0 header moves the body: the footer's offsets follow it.
    f = write("longer10.gcz", v10(GOOD10, header_with("future_field", b'"' + b"x" * 1000 + b'"', GOOD10_HEADER)))
    run("decode", f, "-o", path("longer10.npz"), "--quiet")
    want = np.linspace(-1, 1, 40, dtype=np.float32).astype(np.float16).astype(np.float32)
    assert np.array_equal(np.load(path("longer10.npz"))["w"], want)


def test_deep_pipeline_in_header():
    refused(rebuilt(GOOD, header_with("pipeline", deep_array(DEEP))), 3,
            ("corrupt container: header at offset 16", "nested more than"))


def test_deep_inputs_in_header():
    refused(rebuilt(GOOD, header_with("inputs", deep_array(DEEP))), 3,
            ("corrupt container: header at offset 16", "nested more than"))


def test_deep_objects_in_an_unknown_header_field():
    deep = b'{"a":' * DEEP + b"1" + b"}" * DEEP
    refused(rebuilt(GOOD, header_with("future_field", deep)), 3, "nested more than")


def test_moderately_nested_unknown_field_is_ignored():
    # Readers ignore unknown fields (docs/format.md): nesting well under the cap stays readable.
    f = write("nested.gcz", rebuilt(GOOD, header_with("future_field", deep_array(40))))
    run("decode", f, "-o", path("nested.npz"), "--quiet")
    assert np.array_equal(np.load(path("nested.npz"))["b"], np.ones(3, np.float32))
    out, _ = run("inspect", f, "--json")
    assert json.loads(out)["pipeline"] == "fp16"


def v10(data, header_text=None, variants=None):
    """A 1.0 container (docs/format.md, "Format 1.0") with its header's JSON text and/or its
    footer's variants (JSON texts, bytes) replaced: the body kept as it is, the footer's offsets
    moved by the header's change of length, every checksum of the header, footer and trailer
    computed again. Unchanged, it gives the container back."""
    (hlen,) = struct.unpack_from("<I", data, 12)
    h = data[16:16 + hlen] if header_text is None else header_text
    head = data[:12] + struct.pack("<I", len(h)) + h
    head += struct.pack("<Q", gcz.xxh3(head))
    shift = len(head) - (16 + hlen + 8)
    (footer,) = struct.unpack_from("<Q", data, len(data) - 24)
    (flen,) = struct.unpack_from("<Q", data, footer + 4)
    p, pos = data[footer + 12:footer + 12 + flen], 4
    (frames,) = struct.unpack_from("<I", p, 0)
    index = bytearray(struct.pack("<I", frames))
    for _ in range(frames):
        off, n = struct.unpack_from("<QI", p, pos)
        index += struct.pack("<QI", off + shift, n)
        for k in range(n):
            o, size = struct.unpack_from("<QQ", p, pos + 12 + 16 * k)
            index += struct.pack("<QQ", o + shift, size)
        pos += 12 + 16 * n
    if variants is None:
        index += p[pos:]
    else:
        index += struct.pack("<I", len(variants)) + b"".join(struct.pack("<I", len(v)) + v for v in variants)
    sec = b"FOOT" + struct.pack("<Q", len(index)) + index
    out = head + data[16 + hlen + 8:footer] + sec + struct.pack("<Q", gcz.xxh3(sec))
    t = struct.pack("<QHH", footer + shift, 1, 0)
    return out + t + struct.pack("<I", gcz.xxh3(t) & 0xFFFFFFFF) + data[-8:]


def test_deep_pipeline_variant_in_footer():
    # Format 1.0 keeps a pipeline variant as JSON in the footer: that JSON nested 100,000 levels
    # deep. Specific to 1.0 (1.1's variants are pipeline text), so written with --format-version 1.0.
    assert v10(GOOD10, variants=[]) == GOOD10  # (no variant: one pipeline)
    refused(v10(GOOD10, variants=[deep_array(DEEP)]), 3, ("footer at offset", "variant 1", "nested more than"))


def test_hostile_pipeline_variant_text_in_footer():
    # 1.1: a footer variant is pipeline text, read by the pipeline parser: text nested deep, text
    # that is no pipeline and a stage without a version in the header are each refused as a
    # corrupt footer naming the variant.
    for text, why in (("(" * DEEP + "fp16" + ")" * DEEP, "expected a stage name at offset 0"),
                      ("fp16(" * DEEP, "fp16 takes no parameters"),
                      ("nosuchstage", "unknown stage 'nosuchstage'"),
                      ("topk(k=2) | raw | varint", '"versions" gives no version of stage "topk"')):
        g = read("g.gcz")
        g.variants = [text]
        line = refused(rebuilt(g), 3, ("footer at offset", "variant 1: ", why))
        assert len(line) < 600, line  # the text is not quoted whole


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
    g = read("s.gcz")
    rec = g.records(0)[1]
    idx = bytearray(rec.stream("index"))
    idx[gap_byte] = 0x7F
    rec.set_stream("index", bytes(idx))
    return rebuilt(g), rec.offset


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
    g = read("seq.gcz")
    rec = g.records(1)[0]
    idx = bytearray(rec.stream("index"))
    idx[2] = 0x7F
    rec.set_stream("index", bytes(idx))
    f = write("seq.gcz", rebuilt(g))
    refused(rebuilt(g), 3, ("record 0 of frame 1 (tensor w) at offset", "varint: gap 127"))
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
    ("target", b'"bits=1"', '"target" must be an object, not a string'),
    ("target", b"[1]", '"target" must be an object, not an array'),
]


BAD_VALUES_11 = [  # 1.1: "pipeline" is the pipeline's text, "versions" every stage's version
    ("pipeline", b'{"stage":"fp16"}', '"pipeline" must be a string, not an object'),
    ("pipeline", b'[{"stage":"fp16","version":1,"params":{}}]', '"pipeline" must be a string, not an array'),
    ("pipeline", b'"fp16 | nosuchstage"', "\"pipeline\": unknown stage 'nosuchstage'"),
    ("versions", b"[1]", '"versions" must be an object, not an array'),
    ("versions", b'{"fp16":"1"}', '"versions" gives no version of stage "fp16"'),
    ("versions", b'{"fp16":-1}', '"versions" gives no version of stage "fp16"'),
    ("versions", b'{"topk":1}', '"versions" gives no version of stage "fp16"'),
    ("versions", b'{"fp16":99}',
     "pipeline JSON: unknown version 99 of stage 'fp16' (this gradcodec decodes version 1)"),
]
BAD_VALUES_10 = [  # 1.0: "pipeline" is the pipeline's JSON, "pipeline_text" its text
    ("pipeline_text", b"{}", '"pipeline_text" must be a string, not an object'),
    ("pipeline", b'{"stage":"fp16"}', "pipeline JSON: expected a non-empty array of stages"),
]


def test_ill_typed_or_out_of_range_header_values_are_refused():
    for field, value, why in BAD_VALUES + BAD_VALUES_11:
        f = write("hostile.gcz", rebuilt(GOOD, header_with(field, value)))
        line = refused(rebuilt(GOOD, header_with(field, value)), 3)
        want = f"gradcodec: error: {f}: corrupt container: header at offset 16: "
        assert line.startswith(want) and why in line and len(line) <= len(want) + 300, (field, value, line)
        if field != "pipeline" or not value.startswith(b'"'):  # (the parser's message lists the stages)
            assert line == want + why, (field, value, line)
    # The same header values in format 1.0, and those only 1.0 has.
    for field, value, why in BAD_VALUES + BAD_VALUES_10:
        data = v10(GOOD10, header_with(field, value, GOOD10_HEADER))
        f = write("hostile.gcz", data)
        line = refused(data, 3)
        assert line == f"gradcodec: error: {f}: corrupt container: header at offset 16: {why}", (field, value, line)


def test_missing_header_fields_are_refused():
    for good, fields, seal in ((GOOD.header, ("versions",), lambda h: rebuilt(GOOD, h)),
                               (GOOD10_HEADER, ("pipeline_text",), lambda h: v10(GOOD10, h))):
        for field in ("tool", "pipeline", "seed", "keyframe_interval", "inputs", "format") + fields:
            h = {k: v for k, v in good.items() if k != field}
            f = write("hostile.gcz", seal(json.dumps(h).encode()))
            line = refused(seal(json.dumps(h).encode()), 3)
            want = '"format" must be "gcz"' if field == "format" else f'missing field "{field}"'
            assert line == f"gradcodec: error: {f}: corrupt container: header at offset 16: {want}", line


def test_header_values_at_their_limits_are_read():
    h = dict(GOOD.header, seed=2**64 - 1, keyframe_interval=2**32 - 1)
    h["inputs"] = [dict(h["inputs"][0], metadata={"a": "b"})]
    h["target"] = {"target": "bits=1", "future": [1, 2]}  # optional; its keys are the writer's
    f = write("limits.gcz", rebuilt(GOOD, json.dumps(h).encode()))
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
        g = read("z.gcz")
        rec = next(r for r in g.records(0) if len(r.stream("value")) > 100)  # w
        assert rec.name == "w"
        v = bytearray(rec.stream("value"))
        if stage == "zfp":
            v[:] = b"\xff" * len(v)
        else:
            v[20] ^= 0x04
        rec.set_stream("value", bytes(v))
        refused(rebuilt(g), 3, contains=(f"(tensor w)", f": {stage}: "))


def test_a_stream_name_twice_in_a_record_is_corrupt():
    # docs/stages.md: a reader looks streams up by name, and a name appears at most once in a
    # record. Renaming a record's `index` stream to `value` (same length, checksums resealed)
    # must be refused as a corrupt container, not reach the decoder as an internal error.
    run("encode", path("g.npz"), "-o", path("tk.gcz"), "--pipeline", "topk(ratio=0.5) | varint", "--quiet", "-f")
    g = read("tk.gcz")
    rec = g.records(0)[0]
    names = [n for n, *_ in rec.streams]
    assert sorted(names) == ["index", "value"], names
    i = names.index("index")
    rec.streams[i] = ("value",) + tuple(rec.streams[i][1:])
    refused(rebuilt(g), 3, contains=["'value'", "twice"])


def test_streams_are_read_by_name_in_any_order():
    # docs/stages.md: the order of a record's streams is not fixed; a reader looks them up by
    # name. The same record with its two streams (`value`, `index`) swapped (descriptors and bytes,
    # checksums resealed) decodes to the same values.
    run("encode", path("g.npz"), "-o", path("so.gcz"), "--pipeline", "topk(ratio=0.5) | varint", "--quiet", "-f")
    run("decode", path("so.gcz"), "-o", path("so.npz"), "-f")
    g = read("so.gcz")
    rec = g.records(0)[0]
    (n1, _, b1), (n2, _, b2) = rec.streams
    assert sorted((n1, n2)) == ["index", "value"]
    rec.streams.reverse()  # the layout's stream list and the bytes in the body, both swapped
    data = rebuilt(g)
    swapped = gcz.Container(data).records(0)[0]
    assert [n for n, *_ in swapped.streams] == [n2, n1] and swapped.stream(n1) == b1 and swapped.stream(n2) == b2
    assert data[swapped.offset:swapped.offset + len(b2)] == b2  # the body holds the second stream first now
    with open(path("so2.gcz"), "wb") as f:
        f.write(data)
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
    g = read("tk0.gcz")
    rec = g.records(0)[0]
    index = rec.stream("index")
    assert index[0] == 0  # k_g = 0 as written
    run("decode", path("tk0.gcz"), "-o", path("tk0_out.npz"), "-f")
    rec.set_stream("index", b"\x03" + index[1:])
    refused(rebuilt(g), 3, contains=["tcs", "coded position 0 is already in the global mask"])


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
    one_clean_line(["inspect", write("hostile.gcz", rebuilt(GOOD, h))], 3,
                   ("header at offset 16: not valid JSON", "last read: '\"\\xff'"))
    assert not os.path.exists(path("never.gcz"))


clitest.run_all(globals())
