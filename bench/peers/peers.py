#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Peer comparison: gradcodec against straightforward NumPy / PyTorch / zstd implementations of
the same pipelines, on the same snapshot, in one process tree, one core (issue 10, item 2).

Usage:
  peers.py GRADCODEC_EXE [--snapshot FILE.safetensors] [--repeat N] [--rounds R] [--json OUT]
           [--markdown OUT] [--zstd-levels 1,3] [--seed S]

Without --snapshot, a VGG16-for-CIFAR-sized snapshot (15.2M f32 parameters) is made with
make_vgg16.py (next to this script) in a temporary directory. See README.md for what each peer
does and what is counted.

Timing: gradcodec's own figures come from `gradcodec bench --threads 1 --min-time 0` (median
encode/decode seconds of the codec in memory), run alternately with the preset's in-process peers
for --rounds rounds (speed ratios are the median of each round's ratio); a second gradcodec figure is the wall time of
`gradcodec encode --threads 1` run as a subprocess (process start, reading the file, writing the
container). Peers are timed with time.perf_counter around the work only (tensors already loaded),
median of --repeat runs after one warm-up run. Throughput = input bytes (f32) / median seconds,
in MB/s (10^6 bytes). Ratio = input bytes / output bytes.
"""
import os

# One core for every BLAS / OpenMP pool numpy or torch might start: set before importing them.
for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
           "VECLIB_MAXIMUM_THREADS", "BLIS_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import lzma  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import shlex  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import struct  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

try:
    import torch  # noqa: E402

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    TORCH_NOTE = f"torch {torch.__version__}, torch.set_num_threads(1)"
except Exception as e:  # ImportError, or a broken install
    torch = None
    TORCH_NOTE = f"torch not importable ({type(e).__name__}: {e}); torch rows skipped"

MB = 1e6
GAMMA = 1.4
# The peers code BIRD+'s block indices as the paper does (u32 under LZMA), so they are set against
# the preset that codes them the same way; the `bird+` preset's Golomb-Rice indices are smaller.
BIRD = "bird+-lzma"


# ---------------------------------------------------------------------------------------------
# Data


def read_safetensors(path):
    """[(name, shape, float32 ndarray)] in file order. A tiny reader: u64 LE header length, JSON
    header, raw little-endian data. Only F32 tensors are supported (others are refused)."""
    with open(path, "rb") as f:
        (hlen,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(hlen))
        data = bytearray(f.read())  # writable, so torch.from_numpy does not warn
    items = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise SystemExit(f"{path}: tensor {name} is {info['dtype']}; this script reads F32 only")
        start, end = info["data_offsets"]
        shape = tuple(info["shape"])
        arr = np.frombuffer(data, dtype="<f4", count=(end - start) // 4, offset=start).reshape(shape)
        items.append((start, name, shape, arr))
    items.sort(key=lambda t: t[0])
    return [(n, s, a) for _, n, s, a in items]


# ---------------------------------------------------------------------------------------------
# Timing


def time_median(fn, repeat):
    """One warm-up call, then `repeat` timed calls; (median seconds, [seconds], last result)."""
    fn()
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times, out


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


# ---------------------------------------------------------------------------------------------
# gradcodec


def gradcodec_bench(exe, snap, preset, repeat, tmp):
    out = os.path.join(tmp, f"bench-{preset}.json")
    run([exe, "bench", snap, "--preset", preset, "--threads", "1", "--repeat", str(repeat),
         "--min-time", "0", "--json", out, "--force", "--quiet"])
    with open(out) as f:
        row = json.load(f)["rows"][0]
    streams = row["bits_per_param"] - row["bits_overhead"]
    stream_bytes = row["output_bytes"] * streams / row["bits_per_param"] if row["bits_per_param"] else 0
    keep = ("pipeline", "parameters", "kept", "input_bytes", "output_bytes", "ratio", "bits_per_param",
            "bits_index", "bits_value", "bits_scale_side", "bits_overhead", "encode_mbps", "decode_mbps",
            "encode_seconds_median", "decode_seconds_median", "runs", "rel_l2")
    r = {k: row[k] for k in keep}
    r["stream_bytes"] = stream_bytes
    r["stream_ratio"] = row["input_bytes"] / stream_bytes if stream_bytes else None
    return r


def gradcodec_encode_wall(exe, snap, preset, repeat, tmp, input_bytes):
    out = os.path.join(tmp, f"enc-{preset}.gcz")
    cmd = [exe, "-q", "encode", snap, "-o", out, "--preset", preset, "--threads", "1", "--seed", "0", "-f"]
    med, times, _ = time_median(lambda: run(cmd), repeat)
    size = os.path.getsize(out)
    os.remove(out)
    return {"seconds_median": med, "seconds": times, "mbps": input_bytes / med / MB,
            "output_bytes": size, "ratio": input_bytes / size, "command": shlex.join(cmd)}


# ---------------------------------------------------------------------------------------------
# Peers. Each returns output bytes; the caller times it.


def keep_count(d, ratio=0.01):
    # gradcodec's KeepCount: llround(ratio * d) clamped to [1, d] (round half away from zero)
    return min(max(int(math.floor(ratio * d + 0.5)), 1), d) if d else 0


def topk_numpy(tensors):
    total = 0
    for _, _, x in tensors:
        x = x.reshape(-1)
        d = x.size
        k = keep_count(d)
        idx = np.argpartition(np.abs(x), d - k)[d - k:]
        vals = x[idx]
        idx32 = idx.astype(np.int32)
        total += idx32.nbytes + vals.nbytes
    return total


def topk_torch(ttensors):
    total = 0
    for x in ttensors:
        x = x.reshape(-1)
        k = keep_count(x.numel())
        _, idx = torch.topk(x.abs(), k, sorted=False)
        vals = x[idx]
        idx32 = idx.to(torch.int32)
        total += idx32.numel() * 4 + vals.numel() * 4
    return total


def signsgd_numpy(tensors, scale):
    total = 0
    for _, _, x in tensors:
        bits = np.packbits(x.reshape(-1) >= 0)  # MSB-first, 1 = non-negative (0 and -0 count as +)
        total += bits.nbytes
        if scale:
            s = np.float32(np.abs(x).mean())
            total += s.nbytes
    return total


def qsgd_numpy(tensors, seed, levels=7, bucket=512):
    """QSGD (Alistarh et al. 2017) as the qsgd4 preset codes it, vectorised per tensor: per bucket
    of 512 values the f32 L2 norm; level floor(r) + 1 with probability r - floor(r), r = |x|·s/norm;
    4-bit codes (sign, 3-bit level) packed two to a byte, and the f32 norms."""
    rng = np.random.default_rng(seed)
    total = 0
    for _, _, x in tensors:
        v = x.reshape(-1)
        n = v.size
        if n == 0:
            continue
        nb = -(-n // bucket)
        b = np.zeros(nb * bucket, np.float32)
        b[:n] = v
        b = b.reshape(nb, bucket)
        norms = np.sqrt(np.square(b, dtype=np.float64).sum(1)).astype(np.float32)
        scale = np.divide(levels, norms, out=np.zeros(nb), where=norms > 0)
        r = np.minimum(np.abs(b) * scale[:, None], levels)
        lvl = np.floor(r)
        lvl += rng.random(r.shape) < (r - lvl)
        code = ((b >= 0).astype(np.uint8) << 3 | lvl.astype(np.uint8)).reshape(-1)[:n]
        if n % 2:
            code = np.append(code, np.uint8(0))
        packed = code[0::2] << 4 | code[1::2]
        total += packed.nbytes + norms.nbytes
    return total


def bird_split(shape):
    """(blocks, m) of a rank >= 2 tensor (docs/stages.md "bird", layer splitting); None for a
    vector."""
    if len(shape) < 2:
        return None
    if len(shape) == 4:
        return shape[0] * shape[1], shape[2] * shape[3]
    return int(np.prod(shape[:-1])), shape[-1]


def bird_attach(tensors):
    """{vector name: sibling name} by gradcodec's attach rule (lib/sparsify/bird_split.hpp)."""
    by_name = {n: s for n, s, _ in tensors}
    out = {}
    for name, shape, _ in tensors:
        if len(shape) != 1 or shape[0] == 0:
            continue
        prefix, _, leaf = name.rpartition(".")
        pre = prefix + "." if "." in name else ""
        if leaf.endswith("bias") and leaf != "bias":
            sib = pre + leaf[: -len("bias")] + "weight"
        else:
            sib = pre + "weight"
        s = by_name.get(sib)
        if s is not None and len(s) >= 2 and int(np.prod(s)) > 0 and s[0] == shape[0]:
            out[name] = sib
    return out


def lzma_raw(data, capped, clock):
    """Raw LZMA2 at preset 6 (the gradcodec `lzma` stage's payload, without its 2-5 byte
    header). capped: dictionary limited to the data size (same bytes, much less set-up)."""
    f = {"id": lzma.FILTER_LZMA2, "preset": 6}
    if capped:
        f["dict_size"] = max(4096, len(data))
    t0 = time.perf_counter()
    out = lzma.compress(data, format=lzma.FORMAT_RAW, filters=[f])
    clock["lzma"] += time.perf_counter() - t0
    return out


def bird_vectors(tensors, attach, kept_blocks, xs_get):
    total = 0
    for name, shape, x in tensors:
        if len(shape) >= 2:
            continue
        n = int(np.prod(shape)) if shape else 1
        sib = attach.get(name)
        if sib is None:  # sent dense in f32
            total += 4 * n
            continue
        V, per_channel = kept_blocks[sib]
        sent = np.zeros(n, dtype=bool)
        sent[V // per_channel] = True
        bitmap = np.packbits(sent)
        vals = xs_get(name)[sent]
        total += bitmap.nbytes + 4 * int(vals.size)
    return total


def birdplus_numpy(tensors, attach, seed, capped, clock, gamma=GAMMA):
    """BIRD+ (docs/stages.md "bird", "bird+"), vectorised per tensor in NumPy.
    Output: per split tensor LZMA2(int32 block indices of V) + packed sign bits of the kept blocks
    + one f32 scale; per vector the gradcodec side stream (bitmap + sent f32 entries)."""
    rng = np.random.default_rng(seed)
    total, kept_blocks, kept_elems = 0, {}, 0
    for name, shape, x in tensors:
        split = bird_split(shape)
        if split is None:
            continue
        B, m = split
        t2 = x.reshape(B, m)
        a = np.abs(t2)
        L = a.sum(axis=1)  # f32 block L1 norms
        I = a.max(axis=1)  # f32 block L-inf norms
        Lmax = L.max()
        V = np.zeros(0, dtype=np.int64)
        if Lmax > 0 and np.isfinite(Lmax):
            U = np.flatnonzero(rng.random(B) < L / np.float64(Lmax))  # stage 1: p_i = L_i / Lmax
            S1 = np.float64(Lmax) / m
            IU = I[U]
            q = (IU / IU.max()).astype(np.float64) ** gamma  # (p_inf)^gamma
            K = int(np.count_nonzero(rng.random(U.size) < q))  # successes over U
            if K:
                V = np.sort(rng.choice(U, size=K, replace=False))  # K of U, uniform, no replacement
                S = np.float32(S1 * U.size / K)
                signs = np.packbits(t2[V] >= 0)  # one bit per element of each kept block
                idx = lzma_raw(V.astype("<i4").tobytes(), capped, clock)
                total += len(idx) + signs.nbytes + S.nbytes
                kept_elems += K * m
        kept_blocks[name] = (V, B // shape[0])
    xs = {n: x for n, _, x in tensors}
    total += bird_vectors(tensors, attach, kept_blocks, xs.__getitem__)
    return total, kept_elems


def birdplus_torch(tensors, ttensors, attach, seed, capped, clock, gamma=GAMMA):
    """The same rule with torch ops (sampling, gathers); sign bits are packed with np.packbits
    (torch has no packbits) and the indices go through Python's lzma."""
    g = torch.Generator().manual_seed(seed)
    total, kept_blocks, kept_elems = 0, {}, 0
    for (name, shape, _), x in zip(tensors, ttensors):
        split = bird_split(shape)
        if split is None:
            continue
        B, m = split
        t2 = x.reshape(B, m)
        a = t2.abs()
        L = a.sum(dim=1)
        I = a.amax(dim=1)
        Lmax = float(L.max())
        V = np.zeros(0, dtype=np.int64)
        if Lmax > 0 and math.isfinite(Lmax):
            p = L.double() / Lmax
            U = torch.nonzero(torch.rand(B, generator=g, dtype=torch.float64) < p).squeeze(1)
            S1 = Lmax / m
            IU = I[U]
            q = (IU / IU.max()).double().pow(gamma)
            K = int((torch.rand(U.numel(), generator=g, dtype=torch.float64) < q).sum())
            if K:
                Vt = U[torch.randperm(U.numel(), generator=g)[:K]].sort().values
                S = np.float32(S1 * U.numel() / K)
                signs = np.packbits((t2[Vt] >= 0).numpy())
                idx = lzma_raw(Vt.to(torch.int32).numpy().tobytes(), capped, clock)
                total += len(idx) + signs.nbytes + S.nbytes
                kept_elems += K * m
                V = Vt.numpy()
        kept_blocks[name] = (V, B // shape[0])
    xs = {n: x for n, _, x in tensors}
    total += bird_vectors(tensors, attach, kept_blocks, xs.__getitem__)
    return total, kept_elems


def timed_peer(fn, repeat):
    """Median of a peer that returns (bytes[, extra]) and may fill clock['lzma']."""
    clock = {"lzma": 0.0}
    lz = []

    def once():
        clock["lzma"] = 0.0
        r = fn(clock)
        lz.append(clock["lzma"])
        return r

    med, times, out = time_median(once, repeat)
    return med, times, out, statistics.median(lz[1:]) if len(lz) > 1 else lz[0]


# ---------------------------------------------------------------------------------------------
# zstd


ZSTD_BENCH_RE = re.compile(r"(\d+)\s*->\s*(\d+)\s*\(x\s*([\d.]+)\),\s*([\d.]+)\s*MB/s,\s*([\d.]+)\s*MB/s")


def zstd_cli(zstd, raw, level, repeat, tmp, input_bytes):
    out = os.path.join(tmp, f"raw.l{level}.zst")
    cmd = [zstd, f"-{level}", "-T1", "-q", "-f", raw, "-o", out]
    med, times, _ = time_median(lambda: run(cmd), repeat)
    size = os.path.getsize(out)
    os.remove(out)
    # zstd's own in-memory benchmark (-b): compression / decompression MB/s of the codec alone
    b = run([zstd, f"-b{level}", "-i1", "-T1", raw]).stdout.decode(errors="replace")
    m = ZSTD_BENCH_RE.findall(b)
    bench = None
    if m:
        src, dst, _, cs, ds = m[-1]
        bench = {"input_bytes": int(src), "output_bytes": int(dst), "ratio": int(src) / int(dst),
                 "compress_mbps": float(cs), "decompress_mbps": float(ds)}
    return {"seconds_median": med, "seconds": times, "mbps": input_bytes / med / MB, "output_bytes": size,
            "ratio": input_bytes / size, "command": shlex.join(cmd), "bench": bench,
            "bench_command": shlex.join([zstd, f"-b{level}", "-i1", "-T1", raw])}


# ---------------------------------------------------------------------------------------------
# Machine


def machine():
    info = {"model": platform.processor() or platform.machine(), "cpus": os.cpu_count()}
    try:
        out = run(["lscpu"]).stdout.decode()
        for line in out.splitlines():
            k, _, v = line.partition(":")
            if k.strip() == "Model name":
                info["model"] = v.strip()
            elif k.strip() == "CPU(s)":
                info["cpus"] = int(v.strip())
    except Exception:
        pass
    info["load_average"] = os.getloadavg()
    return info


def memory_figures(tensors, repeat):
    x = np.concatenate([a.reshape(-1) for _, _, a in tensors])
    buf = np.empty_like(x)
    n = x.nbytes
    r = max(repeat, 5)
    figs = {}
    for label, fn in (("read: x.sum()", lambda: x.sum()),
                      ("abs-sum: np.abs(x).sum()", lambda: np.abs(x).sum()),
                      ("memcpy: np.copyto(buf, x)", lambda: np.copyto(buf, x)),
                      ("copy: x.copy()", lambda: x.copy())):
        med, times, _ = time_median(fn, r)
        figs[label] = {"seconds_median": med, "mbps": n / med / MB}
    return figs


# ---------------------------------------------------------------------------------------------


def fmt(v, nd=1):
    if v is None:
        return "–"
    if isinstance(v, str):
        return v
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{nd}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("gradcodec")
    ap.add_argument("--snapshot", help="F32 safetensors snapshot (default: make_vgg16.py output)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per row (median); default 3")
    ap.add_argument("--json", help="write the raw numbers here")
    ap.add_argument("--markdown", help="write a markdown section here")
    ap.add_argument("--zstd", default=shutil.which("zstd") or "/usr/bin/zstd")
    ap.add_argument("--zstd-levels", default="3,1", help="comma list; default 3,1 (19 is slow)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the peers' random draws")
    ap.add_argument("--rounds", type=int, default=5,
                    help="rounds alternating gradcodec bench with the in-process peers; default 5")
    a = ap.parse_args()
    if a.repeat < 1:
        ap.error("--repeat must be >= 1")
    if a.rounds < 1:
        ap.error("--rounds must be >= 1")
    exe = os.path.abspath(a.gradcodec)
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    tmp = tempfile.mkdtemp(prefix="gradcodec-peers-", dir=base)
    try:
        return run_all(a, exe, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_all(a, exe, tmp):
    t_start = time.time()
    mach = machine()
    snap = a.snapshot
    if not snap:
        snap = os.path.join(tmp, "vgg16.safetensors")
        maker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "make_vgg16.py")
        print(run([sys.executable, maker, snap]).stdout.decode().strip(), flush=True)
    tensors = read_safetensors(snap)
    input_bytes = sum(x.nbytes for _, _, x in tensors)
    params = input_bytes // 4
    ttensors = [torch.from_numpy(x) for _, _, x in tensors] if torch is not None else None
    version = run([exe, "--version"]).stdout.decode().strip()
    zver = run([a.zstd, "--version"]).stdout.decode().strip()
    print(f"snapshot {snap}: {len(tensors)} tensors, {params:,} f32 parameters, {input_bytes:,} bytes")
    print(f"gradcodec: {exe} ({version}); numpy {np.__version__}; {TORCH_NOTE}; {zver}", flush=True)

    rows, notes = [], []

    def add(group, impl, seconds, output_bytes, gc=None, peer=True, **extra):
        row = {"group": group, "impl": impl, "seconds_median": seconds,
               "mbps": input_bytes / seconds / MB if seconds else None,
               "output_bytes": output_bytes,
               "ratio": input_bytes / output_bytes if output_bytes else None, "peer": peer}
        row.update(extra)
        if gc is not None and peer:
            row["speed_vs_peer_bench"] = gc["bench"]["encode_mbps"] / row["mbps"]
            row["speed_vs_peer_cli"] = gc["cli"]["mbps"] / row["mbps"]
            row["ratio_vs_peer"] = gc["bench"]["ratio"] / row["ratio"] if row["ratio"] else None
            row["stream_ratio_vs_peer"] = (gc["bench"]["stream_ratio"] / row["ratio"]
                                           if row["ratio"] and gc["bench"]["stream_ratio"] else None)
        rows.append(row)
        print(f"  {group:10s} {impl:58s} {fmt(row['mbps']):>9s} MB/s  ratio {fmt(row['ratio'], 2):>9s}", flush=True)
        return row

    gcs = {}

    def group(preset, peers):
        """gradcodec bench and each in-process peer of `preset`, alternated for --rounds rounds
        (gradcodec first in even rounds, last in odd ones). Each round's speed ratio compares
        figures taken seconds apart; the rows give medians over the rounds."""
        print(f"[{preset}] gradcodec bench and {len(peers)} peer(s), {a.rounds} rounds alternated", flush=True)
        benches, peer_runs = [], [[] for _ in peers]

        def measure_gc():
            benches.append(gradcodec_bench(exe, snap, preset, a.repeat, tmp))

        def measure_peer(i):
            med, _, out, lz = timed_peer(peers[i][1], a.repeat)
            peer_runs[i].append((med, out, lz))

        for r in range(a.rounds):
            if r % 2 == 0:
                measure_gc()
            for i in range(len(peers)):
                measure_peer(i)
            if r % 2 == 1:
                measure_gc()
        b = dict(benches[0])
        for k in ("encode_mbps", "decode_mbps", "encode_seconds_median", "decode_seconds_median"):
            b[k] = statistics.median(x[k] for x in benches)
        b["encode_mbps_rounds"] = [x["encode_mbps"] for x in benches]
        if any(x["output_bytes"] != b["output_bytes"] for x in benches):
            notes.append(f"{preset}: gradcodec bench wrote different sizes across rounds (seed 0 each time)")
        c = gradcodec_encode_wall(exe, snap, preset, a.repeat, tmp, input_bytes)
        if b["input_bytes"] != input_bytes:
            notes.append(f"{preset}: gradcodec counted {b['input_bytes']} input bytes, the reader {input_bytes}")
        gc = {"bench": b, "cli": c}
        gcs[preset] = gc
        add(preset, f"gradcodec bench (codec in memory; decode {fmt(b['decode_mbps'])} MB/s)",
            b["encode_seconds_median"], b["output_bytes"], peer=False, decode_mbps=b["decode_mbps"],
            stream_bytes=b["stream_bytes"], stream_ratio=b["stream_ratio"])
        add(preset, "gradcodec encode CLI, wall (process + file read + write)", c["seconds_median"],
            c["output_bytes"], peer=False)
        out_rows = []
        for (label, _), runs in zip(peers, peer_runs):
            secs = [m for m, _, _ in runs]
            out, lz = runs[-1][1], statistics.median(z for _, _, z in runs)
            res = out if isinstance(out, tuple) else (out,)
            r = add(preset, label.format(lzma_ms=lz * 1e3), statistics.median(secs), res[0], gc,
                    lzma_seconds_median=lz)
            # per round: gradcodec's figure of that round over the peer's figure of that round
            per_round = [g / (input_bytes / s / MB) for g, s in zip(b["encode_mbps_rounds"], secs)]
            r["speed_vs_peer_rounds"] = per_round
            r["speed_vs_peer_bench"] = statistics.median(per_round)
            if len(res) > 1:
                r["kept_elements"] = res[1]
            out_rows.append(r)
        return gc, out_rows

    # 1. top-k 1% per tensor
    peers = []
    if torch is not None:
        peers.append(("torch.topk(|x|, k, sorted=False) + gather; int32 idx + f32 val", lambda clk: topk_torch(ttensors)))
    else:
        notes.append("topk-1pct: " + TORCH_NOTE)
    peers.append(("np.argpartition(|x|, d-k) + gather; int32 idx + f32 val", lambda clk: topk_numpy(tensors)))
    group("topk-1pct", peers)

    # 2. BIRD+ (gamma = 1.4)
    attach = bird_attach(tensors)
    peers = [("numpy BIRD+ (lzma preset 6); of which lzma {lzma_ms:.0f} ms",
              lambda clk: birdplus_numpy(tensors, attach, a.seed, False, clk)),
             ("numpy BIRD+ (lzma preset 6, dict capped); of which lzma {lzma_ms:.0f} ms",
              lambda clk: birdplus_numpy(tensors, attach, a.seed, True, clk))]
    if torch is not None:
        peers.append(("torch BIRD+ (lzma preset 6); of which lzma {lzma_ms:.0f} ms",
                      lambda clk: birdplus_torch(tensors, ttensors, attach, a.seed, False, clk)))
    else:
        notes.append("bird+: " + TORCH_NOTE)
    _, brows = group(BIRD, peers)
    # The bird+ preset (Golomb-Rice indices: smaller than the peers' LZMA ones) against the same
    # NumPy peers: what a user gets from the preset against the paper's pipeline in NumPy.
    _, prows = group("bird+", peers[:2])
    for r in brows + prows:
        r["sampling_only_mbps"] = input_bytes / (r["seconds_median"] - r["lzma_seconds_median"]) / MB

    # 3. signSGD
    group("signsgd", [("np.packbits(x >= 0) per tensor (no scale, as the preset)",
                       lambda clk: signsgd_numpy(tensors, False)),
                      ("np.packbits(x >= 0) + f32 mean|x| scale per tensor",
                       lambda clk: signsgd_numpy(tensors, True))])
    # 4. QSGD 4-bit
    group("qsgd4", [("numpy QSGD (bucket 512, s = 7, 4-bit codes packed, f32 norms)",
                     lambda clk: qsgd_numpy(tensors, a.seed))])
    # 5. lossless (zstd runs as a CLI, after the rounds: its rows compare with the median)
    gc, _ = group("lossless", [])
    raw = os.path.join(tmp, "tensors.f32")
    with open(raw, "wb") as f:
        for _, _, x in tensors:
            f.write(x.tobytes())
    zstd_results = {}
    for lvl in [int(v) for v in a.zstd_levels.split(",") if v.strip()]:
        z = zstd_cli(a.zstd, raw, lvl, a.repeat, tmp, input_bytes)
        zstd_results[lvl] = z
        r = add("lossless", f"zstd -{lvl} -T1 CLI, wall (file in {'/dev/shm' if tmp.startswith('/dev/shm') else 'tmp'})",
                z["seconds_median"], z["output_bytes"], None, peer=True)
        r["speed_vs_peer_bench"] = None
        r["speed_vs_peer_cli"] = gc["cli"]["mbps"] / r["mbps"]
        r["ratio_vs_peer"] = gc["bench"]["ratio"] / r["ratio"]
        if z["bench"]:
            zb = z["bench"]
            r2 = add("lossless", f"zstd -b{lvl} -T1 (zstd's in-memory bench; decode {fmt(zb['decompress_mbps'])} MB/s)",
                     input_bytes / zb["compress_mbps"] / MB, zb["output_bytes"], None, peer=True,
                     decode_mbps=zb["decompress_mbps"])
            r2["mbps"] = zb["compress_mbps"]
            r2["speed_vs_peer_bench"] = gc["bench"]["encode_mbps"] / zb["compress_mbps"]
            r2["speed_vs_peer_cli"] = None
            r2["ratio_vs_peer"] = gc["bench"]["ratio"] / zb["ratio"]
            r2["ratio"] = zb["ratio"]
        else:
            notes.append(f"zstd -b{lvl}: could not parse zstd's benchmark output")
    os.remove(raw)

    # memory streaming figures, same process, same data
    print("[memory] NumPy streaming figures over the concatenated tensors", flush=True)
    mem = memory_figures(tensors, a.repeat)
    stream_read = mem["read: x.sum()"]["mbps"]

    targets = check_targets(gcs, rows, mem, zstd_results, torch is not None)
    result = {
        "schema": "gradcodec-peers/1",
        "command": shlex.join([sys.executable] + sys.argv),
        "machine": mach, "load_average_end": os.getloadavg(),
        "gradcodec": exe, "gradcodec_version": version, "numpy": np.__version__, "torch": TORCH_NOTE,
        "zstd": zver, "snapshot": snap, "snapshot_given": bool(a.snapshot), "tensors": len(tensors), "parameters": params,
        "input_bytes": input_bytes, "repeat": a.repeat, "rounds": a.rounds, "seed": a.seed,
        "gradcodec_rows": gcs, "rows": rows, "memory": mem, "streaming_read_mbps": stream_read,
        "targets": targets, "notes": notes, "elapsed_seconds": time.time() - t_start,
    }
    text = render_table(result)
    print()
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1, default=float)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(render_markdown(result))
    return 0


def check_targets(gcs, rows, mem, zstd_results, have_torch):
    read = mem["read: x.sum()"]["mbps"]
    t = []
    b = gcs[BIRD]["bench"]
    t.append((f"{BIRD} encode >= 2500 MB/s", b["encode_mbps"], 2500))
    t.append((f"{BIRD} encode >= 40% of streaming read (x.sum())", b["encode_mbps"] / read, 0.40))
    for preset in (BIRD, "bird+"):
        npb = [r for r in rows if r["group"] == preset and r["impl"].startswith("numpy BIRD+ (lzma preset 6)")]
        if npb:
            t.append((f"{preset} encode >= 20x NumPy BIRD+ (lzma preset 6)", npb[0]["speed_vs_peer_bench"], 20))
        npc = [r for r in rows if r["group"] == preset and "dict capped" in r["impl"]]
        if npc:
            t.append((f"{preset} encode >= 20x NumPy BIRD+ (dict capped)", npc[0]["speed_vs_peer_bench"], 20))
    k = gcs["topk-1pct"]["bench"]
    t.append(("topk-1pct encode >= 3000 MB/s", k["encode_mbps"], 3000))
    if "qsgd4" in gcs:
        t.append(("qsgd4 encode >= 3000 MB/s", gcs["qsgd4"]["bench"]["encode_mbps"], 3000))
    tt = [r for r in rows if r["group"] == "topk-1pct" and r["impl"].startswith("torch.topk")]
    if tt:
        t.append(("topk-1pct encode >= 10x torch.topk", tt[0]["speed_vs_peer_bench"], 10))
    nq = [r for r in rows if r["group"] == "qsgd4" and r["impl"].startswith("numpy QSGD")]
    if nq:
        t.append(("qsgd4 encode >= 20x NumPy QSGD", nq[0]["speed_vs_peer_bench"], 20))
    for p, g in gcs.items():
        t.append((f"{p} decode >= 3000 MB/s", g["bench"]["decode_mbps"], 3000))
    z = zstd_results.get(3)
    if z:
        l = gcs["lossless"]["bench"]
        t.append(("lossless encode >= 1000 MB/s", l["encode_mbps"], 1000))
        t.append(("lossless ratio >= 1.18", l["ratio"], 1.18))
        t.append(("lossless ratio >= zstd -3 ratio (ratio of ratios)", l["ratio"] / z["ratio"], 1.0))
        if z["bench"]:
            t.append(("lossless encode >= zstd -3 speed (bench vs zstd -b3)",
                      l["encode_mbps"] / z["bench"]["compress_mbps"], 1.0))
        t.append(("lossless encode >= zstd -3 speed (CLI wall vs CLI wall)",
                  gcs["lossless"]["cli"]["mbps"] / z["mbps"], 1.0))
    return [{"target": n, "value": v, "needed": need, "met": v >= need} for n, v, need in t]


def speed_cell(r):
    if not r.get("peer"):
        return "–"
    parts = []
    if r.get("speed_vs_peer_bench") is not None:
        rr = r.get("speed_vs_peer_rounds") or []
        span = f" ({min(rr):.2f}–{max(rr):.2f})" if len(rr) > 1 else ""
        parts.append(f"{r['speed_vs_peer_bench']:.2f}{span}")
    if r.get("speed_vs_peer_cli") is not None:
        parts.append(f"CLI {r['speed_vs_peer_cli']:.2f}")
    return " / ".join(parts) or "–"


def ratio_cell(r):
    if not r.get("peer") or r.get("ratio_vs_peer") is None:
        return "–"
    s = f"{r['ratio_vs_peer']:.3f}"
    if r.get("stream_ratio_vs_peer") is not None and r["group"] in (BIRD, "bird+"):
        s += f" (streams {r['stream_ratio_vs_peer']:.3f})"
    return s


def table_rows(res):
    out = []
    for r in res["rows"]:
        out.append([r["group"], r["impl"], f"{r['seconds_median'] * 1e3:.1f}", fmt(r["mbps"]),
                    f"{r['output_bytes']:,.0f}", fmt(r["ratio"], 3), speed_cell(r), ratio_cell(r)])
    return out


HEAD = ["preset", "implementation", "median ms", "MB/s", "output bytes", "ratio",
        "gc speed / peer", "gc ratio / peer"]


def render_table(res):
    rows = table_rows(res)
    w = [max(len(str(x)) for x in col) for col in zip(HEAD, *rows)]
    line = lambda cells: "  ".join(str(c).ljust(w[i]) if i < 2 else str(c).rjust(w[i]) for i, c in enumerate(cells))
    out = [line(HEAD), line(["-" * x for x in w])]
    prev = None
    for r in rows:
        if prev is not None and r[0] != prev:
            out.append("")
        prev = r[0]
        out.append(line(r))
    out.append("")
    out.append("gc speed / peer = gradcodec bench encode MB/s / peer MB/s, median of the alternated rounds' ratios (range)")
    out.append("  (CLI: gradcodec encode wall MB/s / peer MB/s);")
    out.append("gc ratio / peer = gradcodec container ratio / peer ratio (bird+: streams = without container overhead).")
    out.append("")
    out.append("memory streaming (NumPy, one core, %.1f MB):" % (res["input_bytes"] / MB))
    for k, v in res["memory"].items():
        out.append(f"  {k:28s} {v['mbps']:8.0f} MB/s")
    out.append("")
    out.append("targets (issue 10, as raised by issue 44 for real gradients):")
    for t in res["targets"]:
        out.append(f"  [{'met ' if t['met'] else 'MISS'}] {t['target']}: {t['value']:.3g} (needed {t['needed']:g})")
    for n in res["notes"]:
        out.append("note: " + n)
    la, lb = res["machine"]["load_average"], res["load_average_end"]
    out.append(f"load average at start {la[0]:.2f}, at end {lb[0]:.2f}; {res['elapsed_seconds']:.0f} s")
    return "\n".join(out)


def render_markdown(res):
    m = res["machine"]
    la, lb = m["load_average"], res["load_average_end"]
    o = ["## Peer comparison (bench/peers/peers.py)", ""]
    o.append(f"Machine: {m['model']}, {m['cpus']} logical CPUs (all runs on one core: `--threads 1`, "
             f"torch.set_num_threads(1), OMP/MKL/OpenBLAS threads 1); load average "
             f"{la[0]:.2f} at start, {lb[0]:.2f} at end. {res['gradcodec_version']}, numpy {res['numpy']}, "
             f"{res['torch']}, {res['zstd'].strip('* ')}.")
    o.append("")
    o.append(f"Data: `{os.path.basename(res['snapshot'])}`, {res['tensors']} tensors, "
             f"{res['parameters']:,} f32 parameters, {res['input_bytes']:,} bytes "
             f"({'given with --snapshot' if res.get('snapshot_given') else 'synthetic, VGG16-for-CIFAR shapes, `bench/peers/make_vgg16.py`'}"
             f"). gradcodec bench and the in-process peers of a preset are "
             f"alternated for {res['rounds']} rounds (gradcodec first in even rounds, last in odd ones); "
             f"in each round every figure is the median of {res['repeat']} runs (peers: after one warm-up; "
             "timed with `time.perf_counter` around the work, tensors already in memory). A row's time is the "
             "median over the rounds; *gc speed / peer* is the median of each round's ratio, with the "
             "rounds' range in brackets. "
             "MB = 10⁶ bytes of f32 input; ratio = input bytes / output bytes.")
    if max(la[0], lb[0]) > 0.5 * m["cpus"]:
        o.append("")
        o.append(f"**Caution:** the machine was shared during this run (load average up to "
                 f"{max(la[0], lb[0]):.1f} on {m['cpus']} CPUs), so absolute speeds are noisy; the ratios "
                 "compare figures taken minutes apart in the same run.")
    o.append("")
    o.append("Command:")
    o.append("")
    o.append("```")
    o.append(res["command"])
    o.append("```")
    o.append("")
    o.append("| " + " | ".join(HEAD) + " |")
    o.append("|" + "|".join(["---"] * 2 + ["---:"] * (len(HEAD) - 2)) + "|")
    for r in table_rows(res):
        o.append("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |")
    o.append("")
    o.append("*gc speed / peer* = gradcodec bench encode MB/s ÷ peer MB/s; *CLI* = wall MB/s of "
             "`gradcodec encode --threads 1` (process start, file read, container write) ÷ peer MB/s. "
             "*gc ratio / peer* = gradcodec's container ratio ÷ the peer's ratio; for bird+ also "
             "without the container's overhead (streams only), since the peers count payload bytes only.")
    o.append("")
    o.append("Output bytes counted: top-k peers 4-byte int32 index + 4-byte f32 value per kept element "
             "(gradcodec `topk-1pct`: varint gaps + f32 values, in a container); NumPy/torch BIRD+: "
             "raw LZMA2 (preset 6) of the int32 block indices + packed sign bits + one f32 scale per "
             "tensor + each attached bias's bitmap and sent f32 entries (gradcodec's `side` stream); "
             "signSGD: packed sign bits (+ 4 bytes per tensor with a scale); zstd: its output file "
             "for the concatenated raw f32 tensor bytes.")
    o.append("")
    o.append("Memory streaming figures, same process, same data (NumPy, one core):")
    o.append("")
    o.append("| operation | MB/s |")
    o.append("|---|---:|")
    for k, v in res["memory"].items():
        o.append(f"| `{k}` | {v['mbps']:.0f} |")
    o.append("")
    o.append("Issue 10 targets in this run:")
    o.append("")
    o.append("| target | value | needed | met |")
    o.append("|---|---:|---:|---|")
    for t in res["targets"]:
        o.append(f"| {t['target']} | {t['value']:.3g} | {t['needed']:g} | {'yes' if t['met'] else '**no**'} |")
    if res["notes"]:
        o.append("")
        for n in res["notes"]:
            o.append(f"- {n}")
    o.append("")
    return "\n".join(o)


if __name__ == "__main__":
    sys.exit(main())
