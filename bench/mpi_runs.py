# SPDX-License-Identifier: BSD-3-Clause
"""What the MPI timing scripts (mpi_encode.py, mpi_decode_dir.py; docs/scale-out.md) share: the
mpirun command, a timed run, and the synthetic VGG16 stack they default to."""
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def mpirun(n):
    """`mpirun -np n` as the tests run it: as root, oversubscribed, and with shared memory
    between ranks without cross-memory attach, which containers that restrict ptrace refuse."""
    return [shutil.which("mpirun"), "--allow-run-as-root", "--oversubscribe", "--mca",
            "btl_vader_single_copy_mechanism", "none", "-np", str(n)]


def timed(cmd):
    """The wall time of `cmd`, which must succeed (its output is dropped)."""
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=1800)
    return time.perf_counter() - t


def stack(given, work):
    """`given`, or the synthetic 110-tensor VGG16 stack (bench/peers/make_vgg16.py --scale 4)
    written into `work`."""
    if given:
        return given
    path = os.path.join(work, "vgg16x4.safetensors")
    subprocess.run([sys.executable, os.path.join(HERE, "peers", "make_vgg16.py"), path, "--scale", "4"], check=True)
    return path
