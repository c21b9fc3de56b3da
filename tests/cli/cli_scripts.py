#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""scripts/demo.sh and scripts/test.sh talk and share their build: run on a copy of scripts/ with
stand-ins for cmake, ctest and dpkg-query on PATH (nothing is built), they must show the build's
progress, configure build/ with the same flags (a demo then a test run builds once), and treat
warnings of the sanitizer build as errors."""
import os
import shutil
import stat
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest
from clitest import path

SRC = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "..")

FAKE_CMAKE = r'''#!/usr/bin/env bash
# stand-in for cmake: logs its arguments; --build prints make-style progress and makes the binary
echo "$*" >> "$FAKE_LOG"
if [ "$1" = "--build" ]; then
  echo "[ 10%] Building CXX object lib/CMakeFiles/gradcodec_core.dir/core/codec.cpp.o"
  echo "[ 55%] Building CXX object apps/CMakeFiles/gradcodec.dir/main.cpp.o"
  echo "[100%] Linking CXX executable gradcodec"
  mkdir -p "$2/apps"
  printf '#!/bin/sh\necho "fake gradcodec $*"\n' > "$2/apps/gradcodec"
  chmod +x "$2/apps/gradcodec"
fi
'''
FAKES = {"cmake": FAKE_CMAKE,
         "ctest": '#!/bin/sh\necho "ctest $*" >> "$FAKE_LOG"\n',
         "dpkg-query": '#!/bin/sh\nprintf "install ok installed"\n',
         "nproc": '#!/bin/sh\necho 2\n'}


def sandbox(name):
    root = path(name)
    shutil.copytree(os.path.join(SRC, "scripts"), os.path.join(root, "scripts"))
    bin_dir = os.path.join(root, "fakebin")
    os.makedirs(bin_dir)
    for tool, text in FAKES.items():
        p = os.path.join(bin_dir, tool)
        with open(p, "w") as f:
            f.write(text)
        os.chmod(p, os.stat(p).st_mode | stat.S_IEXEC)
    return root, bin_dir


def run_script(root, bin_dir, script, extra_env=None):
    log = os.path.join(root, "log")
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ["PATH"], "FAKE_LOG": log, **(extra_env or {})}
    p = subprocess.run(["bash", os.path.join(root, "scripts", script)], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, env=env, timeout=60)
    out = p.stdout.decode()
    assert p.returncode == 0, out
    calls = open(log).read().splitlines()
    os.remove(log)
    return out, calls


def configure_of(calls, build_dir):
    got = [c for c in calls if f"-B {build_dir} " in c + " " and not c.startswith("--build")]
    assert len(got) == 1, calls
    return got[0]


def test_demo_shows_build_progress():
    root, bin_dir = sandbox("demo")
    out, calls = run_script(root, bin_dir, "demo.sh")
    assert "[ 55%] Building CXX object apps/CMakeFiles/gradcodec.dir/main.cpp.o" in out, out
    assert "building gradcodec" in out, out
    assert "fake gradcodec bench" in out, out
    assert any(c.startswith("--build build") and "--target gradcodec" in c for c in calls), calls


def test_demo_and_test_configure_build_the_same_way():
    root, bin_dir = sandbox("both")
    _, demo = run_script(root, bin_dir, "demo.sh")
    _, test = run_script(root, bin_dir, "test.sh", {"GRADCODEC_SKIP_SANITIZERS": "1"})
    assert configure_of(demo, "build") == configure_of(test, "build"), (demo, test)
    assert "-DGRADCODEC_WERROR=ON" in configure_of(test, "build")


def test_sanitizer_build_treats_warnings_as_errors():
    root, bin_dir = sandbox("asan")
    out, calls = run_script(root, bin_dir, "test.sh")
    asan = configure_of(calls, "build-asan")
    assert "-DGRADCODEC_SANITIZE=ON" in asan and "-DGRADCODEC_WERROR=ON" in asan, asan
    assert "Building CXX object" in out  # the test run's builds talk as well


if __name__ == "__main__":
    clitest.run_all(globals())
