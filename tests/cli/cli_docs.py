#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Every registered stage has its section in docs/stages.md, with its normative wire layout apart
from its implementation notes; every doc link points inside the repository; every preset appears
in the README or docs; docs/stages.md is what docs/make_stages.sh assembles from docs/stages.d/;
and no doc, comment, test or script cites a document the repository does not hold."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import run

ROOT = sys.argv[2]


def stage_names():
    out, _ = run("list", "stages")
    return [l.split()[0] for l in out.decode().splitlines() if l and not l.startswith(" ")]


def test_every_stage_has_a_section():
    doc = open(os.path.join(ROOT, "docs", "stages.md")).read()
    headings = set(re.findall(r"^### (\S+)", doc, re.M))
    missing = [s for s in stage_names() if s not in headings]
    assert not missing, f"docs/stages.md has no '### NAME' section for: {missing}"


def test_stages_md_is_assembled():
    parts = sorted(f for f in os.listdir(os.path.join(ROOT, "docs", "stages.d")) if f.endswith(".md"))
    want = "".join(open(os.path.join(ROOT, "docs", "stages.d", f)).read() + "\n" for f in parts)
    got = open(os.path.join(ROOT, "docs", "stages.md")).read()
    assert got == want, "docs/stages.md is stale: run docs/make_stages.sh"


def test_readme_demo_table_is_the_bench_table():
    """The README quotes the demo's first table: the presets in registry order, each row with its
    12 figures and its runs (a row pasted from the demo's second table, with 10 columns, fails
    this)."""
    readme = open(os.path.join(ROOT, "README.md")).read()
    start = readme.index("pipeline                      ratio")
    lines = [l for l in readme[start:readme.index("\n\n", start)].splitlines()
             if not l.startswith("! = ")]  # the note under the rows of a busy machine's run
    header, rows = lines[0].split(), [l.split() for l in lines[1:]]
    assert header[:3] == ["pipeline", "ratio", "bits/p"] and header[-5:] == ["enc", "MB/s", "dec", "MB/s", "runs"], header
    presets, _ = run("list", "presets")
    names = [l.split()[0] for l in presets.decode().splitlines() if l and not l.startswith(" ")]
    assert [r[0] for r in rows] == names, "the README's demo table does not list the presets in order"
    # 12 figures (a speed may carry the '!' of a row whose runs spread more than 2x), then the runs
    bad = [r[0] for r in rows if len(r) != 14 or not all(re.fullmatch(r"-?[0-9.]+(e[-+][0-9]+)?!?", x) for x in r[1:13])
           or not re.fullmatch(r"[0-9]+/[0-9]+", r[13])]
    assert not bad, f"README demo rows without the table's 12 figures and runs: {bad}"


def test_doc_links_and_paths_point_inside_the_repository():
    """Every markdown link and every backquoted relative path in README.md and docs/*.md names a
    file of the repository (a reader of a clone has nothing outside it)."""
    docs = [os.path.join(ROOT, "README.md")] + [os.path.join(ROOT, "docs", f)
                                                for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md")]
    bad = []
    for d in docs:
        text = open(d).read()
        targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
        targets += [t for t in re.findall(r"`(\.\./[^`\s]+)`", text)]
        for t in targets:
            if re.match(r"[a-z]+://", t):
                continue
            full = os.path.normpath(os.path.join(os.path.dirname(d), t))
            if not full.startswith(os.path.normpath(ROOT) + os.sep) or not os.path.exists(full):
                bad.append(f"{os.path.relpath(d, ROOT)}: {t}")
    assert not bad, f"links or paths outside the repository or missing: {bad}"


def test_user_facing_text_cites_no_unshipped_document():
    """The notes the project was specified from are not in a clone: docs and the stage and
    preset lists cite the papers and docs/stages.md, never those notes."""
    texts = {"list stages": run("list", "stages")[0].decode(), "list presets": run("list", "presets")[0].decode()}
    for f in ["README.md"] + [os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs"))
                              if f.endswith(".md")]:
        texts[f] = open(os.path.join(ROOT, f)).read()
    bad = [k for k, t in texts.items() if re.search(r"ALGORITHMS\.md|DESIGN\.md|STYLE\.md|BUILD[-]FACTS\.md", t)]
    assert not bad, f"cites a document the repository does not hold: {bad}"


def test_every_stage_section_separates_wire_layout_from_implementation_notes():
    """Each '### stage' section of docs/stages.md states the normative wire layout (what any
    decoder must read the same way) under "**Wire layout (normative).**", apart from, and before,
    how this encoder chooses, runs fast and buffers, under "**Implementation notes.**"."""
    doc = open(os.path.join(ROOT, "docs", "stages.md")).read()
    sections = re.split(r"(?m)^### ", doc)[1:]
    assert sections, "docs/stages.md has no '### stage' section"
    bad = []
    for s in sections:
        body = re.split(r"(?m)^##? ", s)[0]  # up to the next kind's heading
        w, i = body.find("**Wire layout (normative).**"), body.find("**Implementation notes.**")
        if w < 0 or i < 0 or w > i:
            bad.append(s.split(None, 1)[0])
    assert not bad, f"stage sections without a wire layout, then implementation notes: {bad}"


# What a clone lacks: the notes the project was specified from (by file name), the folder of
# papers it numbered from 000 up ("seed" and the number), and any docs/*.md path that is not in
# docs/. The patterns are written so that this file does not match itself.
UNSHIPPED = re.compile(r"\b(?:DESIGN|ALGORITHMS|STYLE)\.md\b|\bBUILD-FACTS\b|\bdesign[ ]notes?\b"
                       r"|\b[Ss]eeds?[ ]?[0-9]{3}\b|(?:^|[\s\"'`(/])seeds/")
DOC_PATH = re.compile(r"\bdocs/[A-Za-z0-9_./-]*?\.md\b")
SOURCE_DIRS = ["lib", "apps", "formats", "tests", "bench", "scripts", "cmake"]


def source_text_files():
    """(relative path, text) of every text file under SOURCE_DIRS (files with a NUL byte are data)."""
    for top in SOURCE_DIRS:
        for dirpath, dirnames, files in os.walk(os.path.join(ROOT, top)):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("build"))
            for f in sorted(files):
                full = os.path.join(dirpath, f)
                data = open(full, "rb").read()
                if b"\0" not in data:
                    yield os.path.relpath(full, ROOT), data.decode("utf-8", "replace")


def test_sources_cite_no_unshipped_document():
    """Comments, tests and scripts cite papers by authors and year and the repository's own docs:
    never the notes or numbered papers the project was written from (a clone has none of them),
    nor a docs/*.md page that does not exist. Names file:line."""
    bad = []
    for rel, text in source_text_files():
        lines = text.splitlines()
        for n, line in enumerate(lines, 1):
            for m in UNSHIPPED.finditer(line):
                bad.append(f"{rel}:{n}: {m.group(0).strip()}")
            nxt = re.match(r"\s*(?://+|#|\*)?\s*([0-9]{3})\b", lines[n]) if n < len(lines) else None
            if nxt and re.search(r"\b[Ss]eeds?\s*$", line):  # the number wrapped onto the next line
                bad.append(f"{rel}:{n}: {line.split()[-1]} {nxt.group(1)}")
            for m in DOC_PATH.finditer(line):
                if not os.path.isfile(os.path.join(ROOT, m.group(0))):
                    bad.append(f"{rel}:{n}: {m.group(0)} (no such file)")
    assert not bad, f"{len(bad)} citations of documents the repository does not hold:\n  " + "\n  ".join(bad)


clitest.run_all(globals())
