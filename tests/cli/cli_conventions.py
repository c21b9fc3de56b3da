#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Help and conventions: option help names values by one word (no CLI11 'TEXT:TEXT' / 'UINT:UINT'),
the sources of stages and presets name their papers by authors and year, and `inspect --json`
gives each tensor's dtype as numpy spells it (dtype.name and dtype.str)."""
import json
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import path, run

COMMANDS = ["encode", "decode", "inspect", "bench", "merge", "list"]


def test_help_names_values_without_cli11_type_noise():
    for args in [[]] + [[c] for c in COMMANDS]:
        out, _ = run(*args, "--help")
        text = out.decode()
        for noise in ["TEXT:TEXT", "UINT:UINT", "INT:INT", "FLOAT:FLOAT", "TEXT:{", "UINT", "FLOAT", "BOOLEAN"]:
            assert noise not in text, (args, noise, text)
    enc = run("encode", "--help")[0].decode()
    assert re.search(r"--seed N\s", enc) and re.search(r"-o,--output FILE REQUIRED", enc), enc
    assert re.search(r"--nonfinite \{refuse,raw\}\s", enc), enc
    bench = run("bench", "--help")[0].decode()
    assert re.search(r"--min-time NUM\s", bench) and re.search(r"--json FILE\s", bench), bench
    # the parse errors still say what a value must be (they read CLI11's own type names)
    clitest.fails("encode", path("x.npz"), "-o", path("y.gcz"), "--threads", "-3", code=1,
                  contains="is not a whole number >= 0")


def test_sources_name_papers_by_authors_and_year():
    cite = re.compile(r"[A-Z][A-Za-z'\u00C0-\u017F-]+(?: et al\.|,| &| and|\s)[^;]*?\b(19|20)\d\d\b")
    for what in ["stages", "presets"]:
        rows = json.loads(run("list", what, "--json")[0])
        for r in rows:
            src = r["source"]
            assert not re.search(r"\bseed \d{3}\b", src), (r["name"], src)
            # a source that points into a paper (a section, algorithm, table, figure) names it
            if re.search(r"§|Alg|Table|Fig|et al", src):
                assert cite.search(src), (r["name"], src)
    # the documentation cites the same way
    root = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "..")
    docs = [os.path.join(root, "README.md")] + [os.path.join(root, "docs", f) for f in os.listdir(os.path.join(root, "docs"))
                                                if f.endswith(".md")]
    docs += [os.path.join(root, "docs", "stages.d", f) for f in os.listdir(os.path.join(root, "docs", "stages.d"))]
    for d in docs:
        found = re.findall(r"[Ss]eed (?:\d{3}|NNN)\b", open(d).read())
        assert not found, (d, found)
    text = run("list", "stages")[0].decode()
    assert "seed 00" not in text
    assert "Wu, Yang, Zou et al. 2023 (BIRD+" in text and "Ozfatura, Ozfatura & Gündüz 2021 (TCS)" in text


def test_inspect_json_gives_numpy_dtypes():
    rng = np.random.default_rng(5)
    arrays = {"a32": rng.standard_normal(64).astype("<f4"), "b16": rng.standard_normal(64).astype("<f2"),
              "c64": rng.standard_normal(64).astype("<f8"), "dbe": rng.standard_normal(64).astype(">f4"),
              "steps": np.arange(8, dtype="<i8"), "mask": np.ones(8, dtype=bool), "u": np.arange(4, dtype="<u2")}
    np.savez(path("dt.npz"), **arrays)
    run("encode", path("dt.npz"), "-o", path("dt.gcz"), "--pass-through", "--force", "--quiet")
    rep = json.loads(run("inspect", path("dt.gcz"), "--json")[0])
    got = {t["name"]: (t["numpy_dtype"], t["numpy_descr"]) for f in rep["frames"] for t in f["tensors"]}
    for name, a in arrays.items():
        assert got[name] == (a.dtype.name, a.dtype.str), (name, got[name], a.dtype.name, a.dtype.str)
        assert np.dtype(got[name][1]) == a.dtype  # numpy reads the descr back to the same dtype



def test_tensors_read_from_standard_input_are_named_as_docs_formats_md_says():
    # docs/formats.md, "Reading": a format that names a tensor by the file's stem has none on
    # standard input: an .npy's array is arr_0 (np.savez's name for it).
    np.save(path("stdin_w.npy"), np.arange(3, dtype=np.float32))
    with open(path("stdin_w.npy"), "rb") as f:
        run("encode", "-", "-o", path("stdin_w.gcz"), "--force", "--quiet", stdin=f.read())
    info = json.loads(run("inspect", path("stdin_w.gcz"), "--json")[0])
    assert [t["name"] for t in info["frames"][0]["tensors"]] == ["arr_0"], info["frames"][0]


if __name__ == "__main__":
    clitest.run_all(globals())
