#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""gradcodec.encode (the Python module) against the C++ facade on the same tensors in memory
(issue 42 item 5; figures in docs/performance.md).

Writes the VGG16-size snapshot (bench/peers/make_vgg16.py, 15.2M float32 parameters), loads it
into numpy arrays here and into memory in bench_facade_encode, then for each preset alternates
rounds of the two (REPEAT encodes each per round, every encode timed alone, one thread) and
reports the medians and their ratio. Checks that both wrote the same container bytes.

With --recycle both processes run with glibc told to keep freed memory for reuse
(GLIBC_TUNABLES mmap_threshold and trim_threshold of 1 GiB), so neither side's result lands in
fresh pages the kernel must zero on first touch. By default glibc maps a block above 32 MiB
fresh each time in the Python process (the previous `bytes` was such a block) while the C++ loop
happens to get its freed vector back; --recycle separates that allocator effect from the
binding's own cost (docs/performance.md).

  PYTHONPATH=build/python /usr/bin/python3 bench/python_vs_facade.py build [--rounds 3] [--repeat 5] [--recycle]
"""
import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRESETS = ["lossless", "topk-1pct", "bird+"]
RECYCLE = "glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=1073741824"


def load_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack_from("<Q", blob, 0)
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, e in header.items():  # json keeps the file's order
        assert e["dtype"] == "F32"
        a, b = e["data_offsets"]
        out[name] = np.frombuffer(blob, np.float32, (b - a) // 4, 8 + n + a).reshape(e["shape"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--presets", default=",".join(PRESETS))
    ap.add_argument("--snapshot", help="an .npz of real gradients to use instead of the synthetic VGG16-size one "
                                       "(e.g. test_data/snapshots/step_000.npz)")
    ap.add_argument("--recycle", action="store_true",
                    help="run both sides with glibc keeping freed memory for reuse (see above)")
    args = ap.parse_args()
    if args.recycle and os.environ.get("GLIBC_TUNABLES") != RECYCLE:
        # The tunables are read when the process starts: start this script again with them (the
        # facade's process inherits them).
        os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, GLIBC_TUNABLES=RECYCLE))
    sys.path.insert(0, os.path.join(os.path.abspath(args.build), "python"))
    import gradcodec

    exe = os.path.join(args.build, "bench", "bench_facade_encode")
    with tempfile.TemporaryDirectory() as tmp:
        if args.snapshot:
            snap = os.path.abspath(args.snapshot)
            with np.load(snap) as z:
                grads = {name: z[name] for name in z.files}
            what = f"{os.path.basename(snap)} (real gradients)"
        else:
            snap = os.path.join(tmp, "vgg16.safetensors")
            subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "bench", "peers", "make_vgg16.py"), snap],
                           check=True, stdout=subprocess.DEVNULL)
            grads = load_safetensors(snap)
            what = "synthetic VGG16-size snapshot"
        params = sum(a.size for a in grads.values() if a.dtype.kind == "f")
        print(f"{what}: {len(grads)} tensors, {params:,} float32 parameters; one thread; "
              f"{args.rounds} rounds x {args.repeat} encodes each side, alternating; "
              f"allocator: {'freed memory kept for reuse (--recycle)' if args.recycle else 'glibc defaults'}")
        rows = []
        for preset in args.presets.split(","):
            cpp, py = [], []
            for _ in range(args.rounds):
                out = os.path.join(tmp, "cpp.gcz")
                run = subprocess.run([exe, snap, preset, "1", str(args.repeat), out], check=True,
                                     capture_output=True, text=True)
                cpp += [float(line.split()[0]) for line in run.stdout.splitlines()]
                blob = None
                for _ in range(args.repeat):
                    # The previous container is freed before the clock starts, as bench_facade_encode
                    # frees its previous vector before timing (freeing 50 MB is a few ms of munmap).
                    blob = None
                    t0 = time.perf_counter()
                    blob = gradcodec.encode(grads, preset=preset, threads=1)
                    py.append(time.perf_counter() - t0)
                with open(out, "rb") as f:
                    same = f.read() == blob
                if not same:
                    sys.exit(f"{preset}: the Python module and the facade wrote different containers")
            c, p = statistics.median(cpp), statistics.median(py)
            rows.append((preset, c, p, p / c))
            print(f"{preset:10s} facade median {c * 1e3:8.1f} ms   python median {p * 1e3:8.1f} ms   "
                  f"python/facade {p / c:.3f}   (same bytes)", flush=True)
    worst = max(r[3] for r in rows)
    print(f"worst ratio {worst:.3f} (target <= 1.10)")


if __name__ == "__main__":
    main()
