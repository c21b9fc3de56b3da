# SPDX-License-Identifier: BSD-3-Clause
"""Tiny harness for the CLI end-to-end tests: run gradcodec, check exit codes and one-line errors.

Each test script defines functions named test_*; run_all() calls them, prints
'N passed, N failed' and exits non-zero on any failure.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import traceback

EXE = os.path.abspath(sys.argv[1])
WORK = tempfile.mkdtemp(prefix="gradcodec_cli_")


def path(*parts):
    return os.path.join(WORK, *parts)


def run(*args, stdin=None, expect=0, env=None):
    """Runs gradcodec with args (and extra environment variables); checks the exit code; returns
    (stdout bytes, stderr text)."""
    p = subprocess.run([EXE, *map(str, args)], input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120, env={**os.environ, **(env or {})})
    err = p.stderr.decode("utf-8", "replace")
    if p.returncode != expect:
        raise AssertionError(f"gradcodec {' '.join(map(str, args))}: exit {p.returncode}, expected {expect}\n{err}")
    return p.stdout, err


def printable(text):
    """Whether text (str) has no control characters but newlines and tabs."""
    return all(c in "\n\t" or (ord(c) >= 32 and ord(c) != 127) for c in text)


def fails(*args, code, contains=(), stdin=None, env=None):
    """Runs a command that must fail with `code` and exactly one stderr line 'gradcodec: error: ...'."""
    _, err = run(*args, expect=code, stdin=stdin, env=env)
    lines = [l for l in err.splitlines() if l.strip()]
    errors = [l for l in lines if l.startswith("gradcodec: error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], f"expected one error line, got:\n{err}"
    assert printable(errors[0]), f"control characters in the error line: {errors[0]!r}"
    for c in ([contains] if isinstance(contains, str) else contains):
        assert c in errors[0], f"'{c}' not in: {errors[0]}"
    return errors[0]


def run_all(namespace):
    tests = [(n, f) for n, f in sorted(namespace.items()) if n.startswith("test_") and callable(f)]
    passed = failed = 0
    for name, fn in tests:
        try:
            fn()
            passed += 1
            print(f"ok   {name}")
        except Exception:
            failed += 1
            print(f"FAIL {name}")
            traceback.print_exc()
    print(f"{passed} passed, {failed} failed")
    if not os.environ.get("GRADCODEC_KEEP_TMP"):  # set it to look at a failed test's files
        shutil.rmtree(WORK, ignore_errors=True)
    sys.exit(1 if failed else 0)
