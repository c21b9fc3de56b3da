#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The licence: LICENSE is the BSD 3-Clause text, the README states it, and every source file
(C++, Python, shell, CMake) carries the one-line SPDX identifier near its top."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest

ROOT = sys.argv[2]
TAG = "SPDX-License-Identifier: BSD-3-Clause"
SOURCE_SUFFIXES = (".cpp", ".hpp", ".h", ".c", ".py", ".sh", ".cmake", ".cmake.in", ".pc.in")
SKIP_DIRS = {".git", "test_data", "corpus", "__pycache__"}


def source_files():
    for top, dirs, files in os.walk(ROOT):
        rel_top = os.path.relpath(top, ROOT)
        # build trees (build/, build-asan/, ...) are not sources
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not (rel_top == "." and d.startswith("build"))]
        for f in files:
            if f == "CMakeLists.txt" or f.endswith(SOURCE_SUFFIXES) or (rel_top == ".ci" and f == "run"):
                yield os.path.join(top, f)


def test_license_is_bsd_3_clause():
    text = open(os.path.join(ROOT, "LICENSE")).read()
    assert text.startswith("BSD 3-Clause License"), text[:80]
    for clause in ("Redistributions of source code must retain", "Redistributions in binary form must reproduce",
                   "Neither the name of the copyright holder"):
        assert clause in text, clause


def test_readme_states_the_license():
    readme = open(os.path.join(ROOT, "README.md")).read()
    assert "BSD-3-Clause" in readme and "(LICENSE)" in readme


def test_every_source_file_has_an_spdx_line():
    files = list(source_files())
    assert len(files) > 200, f"only {len(files)} source files found under {ROOT}"
    missing = []
    for p in files:
        with open(p, encoding="utf-8", errors="replace") as f:
            head = [next(f, "") for _ in range(3)]
        if not any(TAG in line for line in head):
            missing.append(os.path.relpath(p, ROOT))
    assert not missing, f"{len(missing)} file(s) without '{TAG}' in their first 3 lines: {missing[:20]}"


if __name__ == "__main__":
    clitest.run_all(globals())
