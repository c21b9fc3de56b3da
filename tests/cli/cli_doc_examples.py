#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The examples the docs give, read from the docs and checked against what gradcodec does, so a
doc edit or a code change that makes them disagree fails here: docs/format.md's worked example
(its byte table: file size, section offsets, lengths, footer entries) and its sample corrupt-
container message; docs/stages.md's tcspos example from the TCS paper; docs/grammar.md's
canonical-text example and its table of refusals. (The worked example's hex dump itself is
checked in cli_roundtrip.py, the generator's golden list in cli_generator_spec.py.)"""
import json
import os
import re
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import fails, path, run
from cli_decode_arithmetic import records

ROOT = sys.argv[2]


def doc(name):
    with open(os.path.join(ROOT, "docs", name), encoding="utf-8") as f:
        return f.read()


def worked_example(version="1.0"):
    """(the hex dump's bytes, the text around it, the annotation table's rows)."""
    text = doc("format.md").split(f"## Worked example ({version})")[1].split("\n## ")[0]
    block = text.split("```")[1]
    data = bytes.fromhex("".join(l.split(":")[1][:49] for l in block.strip().splitlines()))
    rows = [[c.strip() for c in l.strip().strip("|").split("|")] for l in text.split("```")[2].splitlines()
            if l.startswith("| `0x")]
    return data, text, rows


def hexes(cell):
    return [int(x, 16) for x in re.findall(r"0x[0-9a-f]+", cell)]


def test_worked_example_table_describes_its_bytes():
    data, text, rows = worked_example()
    size = int(re.search(r"gives\s+this (\d+)-byte file", text).group(1))
    assert len(data) == size, (len(data), size)
    table = {hexes(r[0])[0]: r[1] for r in rows}
    # Every section the table places starts there with its magic, and its stated lengths hold.
    sections = {at: m for at, m in ((at, re.match(r"`([A-Z]{4})`", what)) for at, what in table.items()) if m}
    assert sorted(m.group(1) for m in sections.values()) == ["FOOT", "FRAM", "TREC"], sections
    for at, m in sections.items():
        assert data[at:at + 4] == m.group(1).encode(), (hex(at), m.group(1))
        what = table[at]
        stated = re.search(r"length (?:`?0x([0-9a-f]+)`? = )?(\d+)", what)
        width = "<I" if m.group(1) == "TREC" else "<Q"  # TREC: u32 metadata length
        assert struct.unpack_from(width, data, at + 4)[0] == int(stated.group(2)), what
    # The header length, the footer's entries and the trailer's footer offset.
    (hlen,) = struct.unpack_from("<I", data, 12)
    assert hexes(table[0x00C])[0] == hlen
    footer_at = [at for at, m in sections.items() if m.group(1) == "FOOT"][0]
    frame_at, record_at, record_size = hexes(table[footer_at])[1:4]
    assert struct.unpack_from("<IQIQQ", data, footer_at + 12) == (1, frame_at, 1, record_at, record_size)
    assert data[frame_at:frame_at + 4] == b"FRAM" and data[record_at:record_at + 4] == b"TREC"
    assert data[record_at + record_size:record_at + record_size + 4] == b"FOOT"
    trailer_at = [at for at, what in table.items() if what.startswith("trailer")][0]
    assert trailer_at == len(data) - 24 and struct.unpack_from("<Q", data, trailer_at)[0] == footer_at
    assert hexes(table[trailer_at])[0] == footer_at
    # The value stream holds the fp16 words the table names.
    value_at = [at for at, what in table.items() if what.startswith("stream `value`")][0]
    words = [int(w, 16) for w in re.findall(r"`0x([0-9a-f]{4})`", table[value_at])]
    assert list(struct.unpack_from("<4H", data, value_at)) == words == [0x3800, 0xBC00, 0x4000, 0x0000]


def test_worked_example_1_1_table_describes_its_bytes():
    data, text, rows = worked_example("1.1")
    size = int(re.search(r"gives this (\d+)-byte file", text).group(1))
    assert len(data) == size, (len(data), size)
    table = {hexes(r[0])[0]: r[1] for r in rows}
    spans = {hexes(r[0])[0]: hexes(r[0]) for r in rows}
    (hlen,) = struct.unpack_from("<HHI", data, 8)[2:]
    assert struct.unpack_from("<HH", data, 8) == (1, 1) and "version 1.1" in table[0x008]
    assert hexes(table[0x00C])[0] == hlen and spans[0x010][1] == 16 + hlen - 1
    # The footer: where the table puts it, its stated length, and the trailer pointing at it.
    footer_at = [at for at, what in table.items() if what.startswith("`FOOT`")][0]
    assert data[footer_at:footer_at + 4] == b"FOOT"
    stated = re.search(r"length `0x([0-9a-f]+)` = (\d+)", table[footer_at])
    assert struct.unpack_from("<Q", data, footer_at + 4)[0] == int(stated.group(2)) == int(stated.group(1), 16)
    trailer_at = [at for at, what in table.items() if what.startswith("trailer")][0]
    assert trailer_at == len(data) - 24 and struct.unpack_from("<Q", data, trailer_at)[0] == footer_at
    assert hexes(table[trailer_at])[0] == footer_at
    # The body is the one stream the table names, where it says, right after the header.
    body_at = [at for at, what in table.items() if what.startswith("the body")][0]
    assert body_at == 16 + hlen + 8
    words = [int(w, 16) for w in re.findall(r"`0x([0-9a-f]{4})`", table[body_at])]
    assert list(struct.unpack_from("<4H", data, body_at)) == words == [0x3800, 0xBC00, 0x4000, 0x0000]
    # Each footer field the table quotes is at the offset it gives.
    for at, what in table.items():
        if footer_at < at < trailer_at and "`" in what and not what.startswith(("`FOOT`", "footer")):
            quoted = re.findall(r"`([0-9a-f]{2}(?: [0-9a-f]{2})*)`", what)
            assert quoted and data[at:at + 1].hex() == quoted[0].split()[0], (hex(at), what)
    # And the footer, read from docs/format.md's rules alone (tests/cli/gcz.py), says what the
    # table says: tensor "g", f32 [4], one layout with the stream value of width 2, a keyframe
    # whose source is the header's input, one record of 8 bytes and its check.
    import gcz
    c = gcz.Container(data)
    ((keyframe, source, (rec,)),) = c.frames
    assert keyframe and source == "g.npy" == c.header["inputs"][0]["path"]
    assert (rec.name, rec.dtype, rec.shape, rec.storage, rec.variant) == ("g", 3, [4], 0, 0)
    assert [(n, w, len(b)) for n, w, b in rec.streams] == [("value", 2, 8)] and rec.offset == body_at
    assert struct.pack("<I", rec.check).hex(" ") in table[[a for a in table if "record 0: head" in table[a]][0]]
    assert c.header["pipeline"] == "fp16" and c.header["versions"] == {"fp16": 1}


def test_corrupt_container_message_has_the_documented_shape():
    # docs/format.md: "gradcodec: error: run.gcz: corrupt container: footer at offset 1234:
    # checksum mismatch" — the worked example with one footer byte changed.
    sample = re.search(r"\n    (gradcodec: error: run\.gcz: corrupt container: footer at offset )1234(: .*)\n",
                       doc("format.md"))
    data, _, _ = worked_example()
    footer_at = struct.unpack_from("<Q", data, len(data) - 24)[0]
    bad = bytearray(data)
    bad[footer_at + 16] ^= 1  # inside the footer's payload: its checksum no longer matches
    os.makedirs(path("msg"), exist_ok=True)
    with open(path("msg", "run.gcz"), "wb") as f:
        f.write(bad)
    p = clitest.subprocess.run([clitest.EXE, "decode", "run.gcz", "-o", "out.npy"], cwd=path("msg"),
                               capture_output=True, timeout=60)
    assert p.returncode == 3
    assert p.stderr.decode().strip() == sample.group(1) + str(footer_at) + sample.group(2), p.stderr


def test_tcspos_paper_example():
    # docs/stages.md, tcspos: "(d = 12, φ = 1/4, positions 1, 3, 10 counted from 1:
    # `1 00 1 10 0 0 1 01 0`)" — the index stream `topk(k=3) | tcspos` writes for such a tensor.
    m = re.search(r"\(d = (\d+), φ = 1/(\d+), positions ([\d, ]+?)\s+counted from 1: `([01 ]+)`\)",
                  doc("stages.md").split("### tcspos")[1])
    d, inv_phi = int(m.group(1)), int(m.group(2))
    positions = [int(x) - 1 for x in m.group(3).split(",")]
    want_bits = m.group(4).replace(" ", "")
    assert len(positions) * inv_phi == d
    g = np.full(d, 0.01, np.float32)
    g[positions] = [5, 6, 7]
    np.save(path("tp.npy"), g)
    run("encode", path("tp.npy"), "-o", path("tp.gcz"), "--pipeline", f"topk(k={len(positions)}) | tcspos",
        "-f", "--quiet")
    with open(path("tp.gcz"), "rb") as f:
        stream = records(f.read())["tp"][1]["index"]
    L = len(bin(inv_phi - 1)) - 2  # ⌈log2(1/φ)⌉ for a power of two
    assert stream[:2] == bytes([len(positions), L])
    bits = "".join(f"{b:08b}" for b in stream[2:])
    assert bits.startswith(want_bits) and set(bits[len(want_bits):]) <= {"0"} and len(bits) - len(want_bits) < 8
    run("decode", path("tp.gcz"), "-o", path("tp_out.npy"), "-f")
    assert np.flatnonzero(np.load(path("tp_out.npy"))).tolist() == positions


def test_canonical_text_example():
    # docs/grammar.md: `"  fp16|zstd( level = 3 )"` → `fp16 | zstd`, as the container stores it.
    m = re.search(r'`"([^"`]+)"` → `([^`]+)`', doc("grammar.md"))
    np.save(path("ct.npy"), np.arange(8, dtype=np.float32))
    run("encode", path("ct.npy"), "-o", path("ct.gcz"), "--pipeline", m.group(1), "-f", "--quiet")
    with open(path("ct.gcz"), "rb") as f:
        blob = f.read()
    (hlen,) = struct.unpack_from("<I", blob, 12)
    assert json.loads(blob[16:16 + hlen])["pipeline"] == m.group(2)  # format 1.1: the text is the header's pipeline
    assert json.loads(run("inspect", path("ct.gcz"), "--json")[0])["pipeline"] == m.group(2)


def test_refusals_table():
    # docs/grammar.md, "Refusals": each input is refused with exit 1 and a message holding the
    # table's text (the parts the table elides with "..." are not compared).
    section = doc("grammar.md").split("## Refusals")[1]
    np.save(path("rf.npy"), np.arange(8, dtype=np.float32))
    rows = 0
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        inputs = [x.replace("\\|", "|") for x in re.findall(r"`([^`]+)`", cells[0])]
        messages = [x.replace("\\|", "|") for x in re.findall(r"`([^`]+)`", cells[1])]
        if len(messages) < len(inputs):
            messages = messages * len(inputs)
        for text, message in zip(inputs, messages):
            parts = [p for p in message.split("...") if p.strip(" ,")]
            fails("encode", path("rf.npy"), "-o", path("rf.gcz"), "--pipeline", text, code=1,
                  contains=[p.strip(" ,") for p in parts])
            rows += 1
    assert rows >= 12, rows


if __name__ == "__main__":
    clitest.run_all(globals())
