#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The library's three layers have no arrow back up (docs/architecture.md "Layers"): lib/base/
includes nothing from the stage folders or the engine; the stage folders (transform, sparsify,
lowrank, quantize, index, lossless) include nothing from the engine, and their headers not
plugin/registry.hpp (parameters come from plugin/params.hpp). Includes are followed through the
repository's own headers, so an arrow up through a public header counts too. Each offence names
the file, the line and the include chain.

The CLI is built on the facade (docs/architecture.md "Layers"): a file of apps/ includes, of the
library's headers, only <gradcodec/gradcodec.hpp> and the formats' public headers
(<gradcodec/formats/...>); everything else it includes is its own or a third party's."""
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest

ROOT = sys.argv[2]

STAGE_DIRS = ("transform", "sparsify", "lowrank", "quantize", "index", "lossless")
# The engine's headers: its own folder and the public headers of the registry, the pipeline, the
# codec, the container and what sits on them (merge, the API facade).
ENGINE_PUBLIC = {
    "gradcodec/codec.hpp", "gradcodec/container.hpp", "gradcodec/container_error.hpp",
    "gradcodec/pipeline.hpp", "gradcodec/merge.hpp", "gradcodec/gradcodec.hpp",
    "gradcodec/plugin/registry.hpp", "gradcodec/plugin/pipeline_stages.hpp",
}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def resolve(root, name):
    """The repository file an include names (lib/include/... or lib/...), or None (system)."""
    for cand in (os.path.join(root, "lib", "include", name), os.path.join(root, "lib", name)):
        if os.path.isfile(cand):
            return os.path.relpath(cand, root)
    return None


def is_engine(rel):
    if rel.startswith("lib/engine/"):
        return True
    return rel.startswith("lib/include/") and rel[len("lib/include/"):] in ENGINE_PUBLIC


def is_stage(rel):
    return any(rel.startswith(f"lib/{d}/") for d in STAGE_DIRS)


def includes(root, rel, cache={}):
    """[(line number, include text, resolved repository path)] of one file."""
    key = (root, rel)
    if key not in cache:
        out = []
        for n, line in enumerate(open(os.path.join(root, rel), encoding="utf-8"), 1):
            m = INCLUDE.match(line)
            if m:
                target = resolve(root, m.group(2))
                if target:
                    out.append((n, line.strip(), target))
        cache[key] = out
    return cache[key]


def first_offence(root, rel, forbidden):
    """The first include of `rel` that reaches a forbidden file, directly or through the
    repository's headers: (line number, include line, chain) or None."""
    for n, line, target in includes(root, rel):
        seen, stack = set(), [(target, [target])]
        while stack:
            cur, chain = stack.pop()
            if cur in seen:
                continue
            seen.add(cur)
            if forbidden(cur):
                return n, line, chain
            for _, _, nxt in includes(root, cur):
                stack.append((nxt, chain + [nxt]))
    return None


def sources(root, folder):
    top = os.path.join(root, "lib", folder)
    for dirpath, _, files in os.walk(top):
        for f in sorted(files):
            if f.endswith((".cpp", ".hpp", ".h")):
                yield os.path.relpath(os.path.join(dirpath, f), root)


def offences(root):
    bad = []

    def check(rel, forbidden, what):
        hit = first_offence(root, rel, forbidden)
        if hit:
            n, line, chain = hit
            bad.append(f"{rel}:{n}: {line}  ({what}: {' -> '.join(chain)})")

    for rel in sources(root, "base"):
        check(rel, lambda t: is_engine(t) or is_stage(t), "base reaches a stage folder or the engine")
    for d in STAGE_DIRS:
        for rel in sources(root, d):
            check(rel, is_engine, "a stage folder reaches the engine")
            if rel.endswith(".hpp"):
                check(rel, lambda t: t == "lib/include/gradcodec/plugin/registry.hpp",
                      "a stage header includes registry.hpp")
    return bad


def app_offences(root):
    """apps/ files' includes of a library header other than the facade and the formats'."""
    bad = []
    top = os.path.join(root, "apps")
    for f in sorted(os.listdir(top)):
        if not f.endswith((".cpp", ".hpp", ".h")):
            continue
        for n, line in enumerate(open(os.path.join(top, f), encoding="utf-8"), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            name = m.group(2)
            if name == "gradcodec/gradcodec.hpp" or name.startswith("gradcodec/formats/"):
                continue
            if name.startswith("gradcodec/") or resolve(root, name):
                bad.append(f"apps/{f}:{n}: {line.strip()}")
    return bad


def test_apps_include_only_the_facade():
    bad = app_offences(ROOT)
    assert not bad, (f"{len(bad)} includes in apps/ reach past the facade (only <gradcodec/gradcodec.hpp> "
                     "and <gradcodec/formats/...>; docs/architecture.md):\n  " + "\n  ".join(bad))


def test_an_app_include_past_the_facade_is_caught():
    tmp = os.path.join(clitest.WORK, "layering_apps")
    shutil.copytree(os.path.join(ROOT, "lib"), os.path.join(tmp, "lib"))
    shutil.copytree(os.path.join(ROOT, "apps"), os.path.join(tmp, "apps"))
    with open(os.path.join(tmp, "apps", "cmd_list.cpp"), "a") as f:
        f.write("#include <gradcodec/codec.hpp>\n")
    with open(os.path.join(tmp, "apps", "common.hpp"), "a") as f:
        f.write('#include "api/facade.hpp"\n')  # a library header by a quoted path
    bad = "\n".join(app_offences(tmp))
    assert re.search(r"apps/cmd_list\.cpp:\d+: #include <gradcodec/codec\.hpp>", bad), bad
    assert re.search(r'apps/common\.hpp:\d+: #include "api/facade\.hpp"', bad), bad
    assert "gradcodec.hpp" not in bad and "formats/" not in bad, bad


def test_no_arrow_back_up():
    for folder in ("base", "engine") + STAGE_DIRS:
        assert os.path.isdir(os.path.join(ROOT, "lib", folder)), f"lib/{folder}/ is missing"
    bad = offences(ROOT)
    assert not bad, f"{len(bad)} includes point back up a layer:\n  " + "\n  ".join(bad)


def test_an_arrow_up_is_caught():
    """The check itself: a copy of the tree with three arrows up (one through a public header)
    reports each with its file and include line."""
    tmp = os.path.join(clitest.WORK, "layering")
    shutil.copytree(os.path.join(ROOT, "lib"), os.path.join(tmp, "lib"))
    with open(os.path.join(tmp, "lib", "base", "rng.cpp"), "a") as f:
        f.write("#include <gradcodec/codec.hpp>\n")
    with open(os.path.join(tmp, "lib", "sparsify", "topk.hpp"), "a") as f:
        f.write('#include <gradcodec/plugin/registry.hpp>\n')
    with open(os.path.join(tmp, "lib", "include", "gradcodec", "half.hpp"), "a") as f:
        f.write('#include "sparsify/topk.hpp"\n')  # base -> public header -> stage folder
    bad = "\n".join(offences(tmp))
    assert re.search(r"lib/base/rng\.cpp:\d+: #include <gradcodec/codec\.hpp>", bad), bad
    assert re.search(r"lib/sparsify/topk\.hpp:\d+: #include <gradcodec/plugin/registry\.hpp>"
                     r"  \(a stage folder reaches the engine", bad), bad
    assert "a stage header includes registry.hpp" in bad, bad
    assert re.search(r"lib/base/half\.cpp:\d+: #include <gradcodec/half\.hpp>  \(base reaches a stage "
                     r"folder or the engine: lib/include/gradcodec/half\.hpp -> lib/sparsify/topk\.hpp", bad), bad


clitest.run_all(globals())
