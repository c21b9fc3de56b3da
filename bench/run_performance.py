#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Builds gradcodec in Release, runs the performance measurements and writes docs/performance.md.

    /usr/bin/python3 bench/run_performance.py [--build-dir build-release] [--no-build] [--quick]
                                              [--out docs/performance.md] [--corpus DIR] [--only-real]

Steps, all in one run on this machine (so that every figure can be quoted as a ratio against a
baseline measured minutes apart, never against a number from elsewhere):
  1. Google Benchmark (bench/gradcodec_bench): the streaming baselines (sum of |x|, memcpy), every
     preset's encode and decode through the container at d = 10^3 .. 10^7 (10^8 for the main
     presets), and the per-kind micro-benchmarks (sparsifiers, quantizers, index coders, lossless,
     BIRD, sequence codecs). Medians of 3 repetitions.
  2. The VGG16-size snapshot (bench/peers/make_vgg16.py, 15.2M parameters): one-core encode and
     decode speed of the main presets with `gradcodec bench`, and the peer comparison
     (bench/peers/peers.py: NumPy, PyTorch, zstd); bird+ encode and the read pass alternated
     for 7 rounds, for the 40%-of-read target, and (bench/bench_snapshot.cpp) each main preset's
     encode against a read pass over the same tensors in one process.
  3. Threads: `gradcodec bench --threads 1` and `--threads 2`, alternated for 5 rounds, on a
     snapshot with many tensors (the VGG16 stack 4 times, 110 tensors) and once on VGG16 itself
     (32 tensors), and byte-identical containers for both; bench_snapshot's in-process 1- and
     2-thread encodes and read passes on the 110 tensors; in each round, what a second thread adds to
     loops that touch no memory (bench/bench_two_threads.cpp).
  4. Memory: peak RSS (ru_maxrss of the child) of `gradcodec encode` on a 2 GB snapshot (the VGG16
     conv stack 34 times) for 1 and 2 threads.
  5. The real-gradient corpus (bench/perf_real_corpus.py; issue 44): the target presets on step 0 of
     the ResNet-18, VGG16-BN and transformer gradients of bench/real_gradients.py (made afresh, or
     read from --corpus DIR), one core, and the peer comparison on the real VGG16-BN, with issue
     44's targets checked. --only-real runs this step alone and writes its section alone to --out.
After the measured sections come bench/writers_scaling.md and the sections of bench/performance.d/
(each from a run of its own script, with its command and data set; updated by hand after those
runs).
--quick runs fewer sizes and repetitions (a check of the script, not numbers to publish; the
corpus is made with --tiny).
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import perf_real_corpus  # noqa: E402  (bench/perf_real_corpus.py)
MAIN = ["bird+", "topk-1pct", "signsgd", "qsgd4", "lossless"]


def sh(cmd, **kw):
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    return subprocess.run(cmd, check=True, **kw)


def build(build_dir):
    sh(["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release", "-DGRADCODEC_BUILD_BENCH=ON",
        "-DGRADCODEC_BUILD_TESTS=OFF"], stdout=subprocess.DEVNULL)
    sh(["cmake", "--build", build_dir, "-j", str(os.cpu_count() or 2), "--target", "gradcodec", "gradcodec_bench"],
       stdout=subprocess.DEVNULL)


def machine():
    model = "?"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}"


def google_benchmark(exe, flt, reps, min_time, cpu=None, env=None):
    """Medians of the benchmarks matching flt; on one CPU only when cpu is given; env: extra
    environment variables."""
    out = tempfile.mktemp(suffix=".json")
    pin = None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu}))
    sh([exe, f"--benchmark_filter={flt}", f"--benchmark_repetitions={reps}", "--benchmark_report_aggregates_only=true",
        f"--benchmark_min_time={min_time}", f"--benchmark_out={out}", "--benchmark_out_format=json"],
       stdout=subprocess.DEVNULL, preexec_fn=pin, env=None if env is None else {**os.environ, **env})
    with open(out) as f:
        data = json.load(f)
    os.remove(out)
    rows = {}
    for b in data["benchmarks"]:
        # medians with several repetitions; the single run otherwise
        if (reps > 1 and b.get("aggregate_name") != "median") or (reps == 1 and b.get("run_type") != "iteration"):
            continue
        name = b["run_name"].replace("/real_time", "").replace("/iterations:15/manual_time", "")
        rows[name] = b
    return rows


def gc_bench(exe, snapshot, presets, threads, repeat):
    out = tempfile.mktemp(suffix=".json")
    cmd = [exe, "bench", snapshot, "--threads", str(threads), "--repeat", str(repeat), "--min-time", "0", "--json", out, "--force"]
    for p in presets:
        cmd += ["--preset", p]
    sh(cmd, stdout=subprocess.DEVNULL)
    with open(out) as f:
        rows = json.load(f)["rows"]
    os.remove(out)
    return {r["label"]: r for r in rows}


def same_bytes(exe, snapshot, presets, tmp):
    """Per preset: whether `gradcodec encode` writes the same container with 1 and 2 threads."""
    same = {}
    for p in presets:
        outs = []
        for t in ("1", "2"):
            o = os.path.join(tmp, f"t{t}.gcz")
            sh([exe, "encode", snapshot, "-o", o, "--preset", p, "--threads", t, "--force", "--quiet"])
            with open(o, "rb") as f:
                outs.append(f.read())
            os.remove(o)
        same[p] = outs[0] == outs[1]
    return same


def peak_rss(cmd):
    """Peak RSS in bytes, from /usr/bin/time (a small parent: a child's ru_maxrss starts at its
    parent's high-water mark, so this script's own size must not count); else from wait4."""
    if os.path.exists("/usr/bin/time"):
        p = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True, check=True)
        return int(p.stderr.strip().splitlines()[-1]) * 1024
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(" ".join(cmd) + " failed")
    return usage.ru_maxrss * 1024


def safetensors_count(path):
    """The number of tensors a safetensors file holds (its JSON header's keys, less __metadata__)."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    return sum(1 for k in header if k != "__metadata__")


# Benchmarks run pinned to each CPU in turn (cache-resident vector sum; the 3x3 BIRD norms over 10^7 floats).
PER_CPU = ["BM_baseline/abs_sum/100000", "BM_bird_norms/9"]


def snapshot_rows(like, cells):
    """A Markdown row per main preset that has a BM_snapshot result: the preset, then cells(result)."""
    return [f"| {p} | " + " | ".join(cells(b)) + " |" for p in MAIN if (b := like.get(f"BM_snapshot/{p}"))]


def mbps(b):
    return b["bytes_per_second"] / 1e6


def fmt(x, nd=0):
    return f"{x:,.{nd}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build-release"))
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "performance.md"))
    ap.add_argument("--corpus", help="the real-gradient corpus of bench/real_gradients.py, made there if absent "
                                     "(default: made afresh in a temporary directory)")
    ap.add_argument("--only-real", action="store_true",
                    help="measure only the real-gradient corpus and write its section alone to --out")
    a = ap.parse_args()
    if not a.no_build:
        build(a.build_dir)
    exe = os.path.join(a.build_dir, "apps", "gradcodec")
    bench_exe = os.path.join(a.build_dir, "bench", "gradcodec_bench")
    reps, min_time, repeat = (1, 0.05, 3) if a.quick else (3, 0.2, 9)
    if a.only_real:
        tmp = tempfile.mkdtemp(prefix="gradcodec_perf_")
        try:
            real = perf_real_corpus.measure(exe, a.corpus or os.path.join(tmp, "corpus"), tmp, repeat, a.quick)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        with open(a.out, "w") as f:
            f.write("\n".join(perf_real_corpus.section(real)) + "\n")
        print(f"wrote {a.out}")
        return
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load_start = os.getloadavg()[0]
    tmp = tempfile.mkdtemp(prefix="gradcodec_perf_", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        sizes = "(1000|100000|10000000)" if a.quick else "[0-9]+"
        gb = google_benchmark(bench_exe, f"BM_baseline/.*/{sizes}(/real_time)?$|BM_preset_(en|de)code/.*/{sizes}/", reps, min_time)
        stages = {} if a.quick else google_benchmark(
            bench_exe, "BM_(topk|randk|dgc|full_sort|quantize|index|lossless|bird_plus_select|bird_norms|bird_stage1|vgg16|tcs|powersgd|decode_(zstd|shuffle)|checksum)",
            reps,
            min_time)

        vgg = os.path.join(tmp, "vgg16.safetensors")
        sh(["/usr/bin/python3", os.path.join(ROOT, "bench", "peers", "make_vgg16.py"), vgg], stdout=subprocess.DEVNULL)
        one = gc_bench(exe, vgg, MAIN, 1, repeat)
        two = gc_bench(exe, vgg, MAIN, 2, repeat)
        # bird+ against the read pass, the two alternated round by round: this machine's speed
        # moves by ±30% from one minute to the next, and a ratio of two figures taken minutes
        # apart moves with it.
        paired = []
        for _ in range(2 if a.quick else 7):
            rd_round = google_benchmark(bench_exe, "BM_baseline/abs_sum/10000000$", 1, 0.2)["BM_baseline/abs_sum/10000000"]
            bird_round = gc_bench(exe, vgg, ["bird+"], 1, repeat)["bird+"]["encode_mbps"]
            paired.append((mbps(rd_round), bird_round))
        same = same_bytes(exe, vgg, MAIN, tmp)
        # Like for like: each preset's encode against a read pass over the same tensors, in one
        # process, alternated within each iteration (bench/bench_snapshot.cpp); medians of 3
        # processes of 15 iterations each.
        snap_reps = 1 if a.quick else 3
        like_vgg = google_benchmark(bench_exe, "BM_snapshot/", snap_reps, 0, env={"GRADCODEC_BENCH_SNAPSHOT": vgg})
        # Each vCPU on its own: a cache-resident vector loop and the 3x3 norms, pinned to one CPU,
        # the CPUs alternated round by round. Two threads can give at most (a + b) / max(a, b).
        cpus = sorted(os.sched_getaffinity(0))
        per_cpu = {c: {k: [] for k in PER_CPU} for c in cpus}
        for _ in range(2 if a.quick else 5):
            for c in cpus:
                rows = google_benchmark(bench_exe, "|".join(f"{k}$" for k in PER_CPU), 1, 0.2, cpu=c)
                for k in PER_CPU:
                    per_cpu[c][k].append(mbps(rows[k]))
        # Threads on a snapshot with many tensors (the VGG16 stack 4 times: 110 tensors), 1 and 2
        # threads alternated round by round so that both see the same machine; medians per preset.
        many = os.path.join(tmp, "many.safetensors")
        sh(["/usr/bin/python3", os.path.join(ROOT, "bench", "peers", "make_vgg16.py"), many, "--scale", "4"],
           stdout=subprocess.DEVNULL)
        many_tensors = safetensors_count(many)
        rounds = 2 if a.quick else 5
        by_threads = {1: {p: [] for p in MAIN}, 2: {p: [] for p in MAIN}}
        # What a second thread adds to loops that touch no memory (bench/bench_two_threads.cpp),
        # once per round: on this machine it changes from one minute to the next.
        ceiling = {}
        for _ in range(rounds):
            for t in (1, 2):
                rows = gc_bench(exe, many, MAIN, t, 3)
                for p in MAIN:
                    by_threads[t][p].append(rows[p]["encode_mbps"])
            for k, b in google_benchmark(bench_exe, "BM_two_threads/", 1, 0).items():
                if "speedup" in b:
                    ceiling.setdefault(k, []).append(b["speedup"])
        # What getting a second thread working costs: a new thread against the helper pool
        # (bench/bench_thread_start.cpp).
        starts = google_benchmark(bench_exe, "BM_thread_start/|BM_ordered_pool", 1, 0)
        same_many = same_bytes(exe, many, MAIN, tmp)
        like_many = google_benchmark(bench_exe, "BM_snapshot/", snap_reps, 0, env={"GRADCODEC_BENCH_SNAPSHOT": many})
        os.remove(many)
        peers_md = os.path.join(tmp, "peers.md")
        peers_json = os.path.join(tmp, "peers.json")
        sh(["/usr/bin/python3", os.path.join(ROOT, "bench", "peers", "peers.py"), exe, "--snapshot", vgg, "--repeat",
            "3" if not a.quick else "1", "--rounds", "5" if not a.quick else "2", "--json", peers_json,
            "--markdown", peers_md], stdout=subprocess.DEVNULL)
        with open(peers_json) as f:
            peers = json.load(f)
        with open(peers_md) as f:
            peers_text = f.read()

        big = os.path.join(tmp, "big.safetensors")
        scale = "4" if a.quick else "34"
        sh(["/usr/bin/python3", os.path.join(ROOT, "bench", "peers", "make_vgg16.py"), big, "--scale", scale],
           stdout=subprocess.DEVNULL)
        big_bytes = os.path.getsize(big)
        largest = 512 * 512 * 9 * 4
        mem = []
        for p in ("bird+", "topk-1pct", "qsgd4", "lossless"):
            for t in ("1", "2"):
                rss = peak_rss([exe, "encode", big, "-o", os.path.join(tmp, "big.gcz"), "--preset", p, "--threads", t,
                                "--force", "--quiet"])
                mem.append((p, t, rss))
                os.remove(os.path.join(tmp, "big.gcz"))
        os.remove(big)
        real = perf_real_corpus.measure(exe, a.corpus or os.path.join(tmp, "corpus"), tmp, repeat, a.quick)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load_end = os.getloadavg()[0]

    # ------------------------------------------------------------------ the report
    read = gb.get("BM_baseline/abs_sum/10000000")
    copy = gb.get("BM_baseline/memcpy/10000000")
    L = []
    L.append("# Performance\n")
    L.append("Written by `bench/run_performance.py` (do not edit by hand; rerun it). Every figure below comes from ")
    L.append("one run of that script on one machine, so figures are compared as ratios within the run.\n")
    L.append(f"- Machine: {machine()}; run {started}; load average {load_start:.2f} at the start, {load_end:.2f} at the end.")
    argv = " ".join(sys.argv[1:])
    L.append(f"- Command: `/usr/bin/python3 bench/run_performance.py{' ' + argv if argv else ''}` (Release build, "
             f"Google Benchmark medians of {reps} repetitions; `gradcodec bench` medians of {repeat} runs).")
    L.append("- MB = 10⁶ bytes of f32 input; GB/s = 10⁹ bytes of input per second; one core unless a thread count is given.")
    L.append("- **Data sets.** Every section names its data: *synthetic* (bench/peers/make_vgg16.py's VGG16-size snapshot, "
             "Gaussian tensors) or *real* gradients (bench/real_gradients.py's ResNet-18, VGG16-BN and transformer; the "
             "bundled test_data snapshots). **The speed targets are judged on real gradients**, in \"Real-gradient corpus: "
             "issue 44's targets\" below; the issue 10 section that follows records what the same targets gave on the "
             "synthetic snapshot.\n")
    notes = os.path.join(ROOT, "bench", "performance_notes.md")
    if os.path.exists(notes):  # the hand-written reading of the results (update it after a run)
        with open(notes) as f:
            L.append(f.read())
    L.append("## Streaming baselines (same run; synthetic: sums and copies of Gaussian floats)\n")
    L.append("| d (f32 elements) | sum of \\|x\\| (one read pass) MB/s | memcpy MB/s | write into fresh memory MB/s |")
    L.append("| ---: | ---: | ---: | ---: |")
    for d in ("1000", "10000", "100000", "1000000", "10000000", "100000000"):
        r, c = gb.get(f"BM_baseline/abs_sum/{d}"), gb.get(f"BM_baseline/memcpy/{d}")
        w = gb.get(f"BM_baseline/fresh_write/{d}")
        if r and c:
            L.append(f"| {int(d):,} | {fmt(mbps(r))} | {fmt(mbps(c))} | {fmt(mbps(w)) if w else '–'} |")
    read_two = gb.get("BM_baseline/abs_sum_two_threads/10000000")
    if read_two and read:
        L.append(f"\nThe same read pass on two threads at once (each over its own 10⁷ floats): "
                 f"{fmt(mbps(read_two))} MB/s for both, {mbps(read_two) / mbps(read):.2f}× one thread — the most "
                 "`--threads 2` can give an encoder bound by reading its input.")
    L.append("\nThe streaming-read figure the targets refer to is the sum of |x| at d = 10⁷ "
             f"({fmt(mbps(read)) if read else '?'} MB/s): larger than the caches, one pass. memcpy writes into "
             "a buffer it reuses; the last column allocates its buffer each time (page faults included): "
             "no decoder that returns a dense tensor can be faster than that.\n")

    L.append("## Presets: encode and decode through the container (bench/bench_presets.cpp; synthetic Gaussian tensors)\n")
    L.append("One f32 tensor [d/1000, 1000] of Gaussian values (σ = 10⁻³); the library's SequenceEncoder into a "
             "container in /dev/shm and SequenceDecoder out of it; MB/s of input, medians.\n")
    ds = sorted({int(k.split("/")[-1]) for k in gb if k.startswith("BM_preset_encode/")})
    L.append("| preset | ratio | " + " | ".join(f"enc {d:.0e}" for d in ds) + " | " + " | ".join(f"dec {d:.0e}" for d in ds) + " |")
    L.append("| --- | ---: | " + " | ".join("---:" for _ in ds) + " | " + " | ".join("---:" for _ in ds) + " |")
    names = sorted({k.split("/")[1] for k in gb if k.startswith("BM_preset_encode/")})
    for n in names:
        enc = [gb.get(f"BM_preset_encode/{n}/{d}") for d in ds]
        dec = [gb.get(f"BM_preset_decode/{n}/{d}") for d in ds]
        ratio = next((e["ratio"] for e in reversed(enc) if e), 0)
        L.append(f"| {n} | {ratio:.1f} | " + " | ".join(fmt(mbps(e)) if e else "–" for e in enc) + " | " +
                 " | ".join(fmt(mbps(e)) if e else "–" for e in dec) + " |")

    if stages:
        L.append("\n## Stage micro-benchmarks (per kind; synthetic inputs)\n")
        L.append("| benchmark | median time | MB/s of input | counters |")
        L.append("| --- | ---: | ---: | --- |")
        for k, b in sorted(stages.items()):
            extra = ", ".join(f"{c}={b[c]:.3g}" for c in ("ratio", "bits/value", "per_elem") if c in b)
            rate = fmt(mbps(b)) if "bytes_per_second" in b else "–"
            L.append(f"| `{k}` | {b['real_time']:.4g} {b['time_unit']} | {rate} | {extra} |")

    L.append("\n## Synthetic VGG16-size snapshot (15.2M parameters, 32 tensors), one core: the issue 10 targets\n")
    L.append("`gradcodec bench SNAPSHOT --preset P --threads 1` (codec in memory, every run checked to give the same bytes).\n")
    L.append("| preset | ratio | encode MB/s | decode MB/s |")
    L.append("| --- | ---: | ---: | ---: |")
    for p in MAIN:
        r = one[p]
        L.append(f"| {p} | {r['ratio']:.2f} | {fmt(r['encode_mbps'])} | {fmt(r['decode_mbps'])} |")
    rd = mbps(read) if read else float("nan")
    L.append("\n| target | measured | met |")
    L.append("| --- | --- | --- |")
    bird = one["bird+"]["encode_mbps"]
    L.append(f"| bird+ encode ≥ 2.4 GB/s and ≥ 40% of streaming read (the tables above) | {bird / 1e3:.2f} GB/s = "
             f"{100 * bird / rd:.1f}% of {rd / 1e3:.2f} GB/s | {'yes' if bird >= 2400 and bird >= 0.4 * rd else 'no'} |")
    p_read = statistics.median(r for r, _ in paired)
    p_bird = statistics.median(b for _, b in paired)
    shares = sorted(100 * b / r for r, b in paired)
    L.append(f"| the same, read pass and bird+ alternated for {len(paired)} rounds (medians) | {p_bird / 1e3:.2f} GB/s = "
             f"{100 * p_bird / p_read:.1f}% of {p_read / 1e3:.2f} GB/s (rounds {shares[0]:.1f}–{shares[-1]:.1f}%) | "
             f"{'yes' if p_bird >= 2400 and p_bird >= 0.4 * p_read else 'no'} |")
    lb = like_vgg.get("BM_snapshot/bird+")
    if lb:
        L.append(f"| the same, against a read pass over the same 32 tensors in the same process, alternated within each "
                 f"iteration (bench_snapshot, below; medians) | {lb['enc_GBps']:.2f} GB/s = {100 * lb['enc_per_read']:.1f}% "
                 f"of {lb['read_GBps']:.2f} GB/s | {'yes' if lb['enc_GBps'] >= 2.4 and lb['enc_per_read'] >= 0.4 else 'no'} |")
    topk = one["topk-1pct"]["encode_mbps"]
    L.append(f"| topk-1pct encode ≥ 1 GB/s | {topk / 1e3:.2f} GB/s | {'yes' if topk >= 1000 else 'no'} |")
    worst = min(one[p]["decode_mbps"] for p in MAIN)
    L.append(f"| decode of any preset ≥ 2 GB/s | slowest of the five: {worst / 1e3:.2f} GB/s | {'yes' if worst >= 2000 else 'no'} |")
    if like_vgg:
        L.append("\nLike for like (bench/bench_snapshot.cpp, GRADCODEC_BENCH_SNAPSHOT = this snapshot): each preset's "
                 "encode (as `gradcodec bench` runs it) against the read pass over the same tensors in the same "
                 "memory, the two alternated within each of 15 iterations; *encode ÷ read* is the median of the "
                 f"iterations' ratios. Medians of {snap_reps} processes.\n")
        L.append("| preset | read pass GB/s | encode GB/s | encode ÷ read | 2 threads: encode speed-up | read speed-up |")
        L.append("| --- | ---: | ---: | ---: | ---: | ---: |")
        L += snapshot_rows(like_vgg, lambda b: [f"{b['read_GBps']:.2f}", f"{b['enc_GBps']:.2f}",
                                                f"{100 * b['enc_per_read']:.1f}%", f"{b['enc_speedup']:.2f}×",
                                                f"{b['read_speedup']:.2f}×"])
    L.append("\nThe peer ratios (bird+ ≥ 20× NumPy, topk ≥ 5× torch.topk, lossless vs zstd -3) are in the peer "
             "table below.\n")

    L.append(f"## Threads: a synthetic snapshot with many tensors (VGG16 stack ×4: {many_tensors} tensors, "
             f"{4 * 15245130 / 1e6:.1f}M parameters)\n")
    L.append(f"`gradcodec bench --threads 1` and `--threads 2` ({3} timed runs each) alternated for {rounds} rounds; "
             "medians over the rounds; *rounds* gives each round's 2-thread ÷ 1-thread figure. "
             "*same bytes*: `gradcodec encode` with 1 and 2 threads writes the same container.\n")
    L.append("| preset | encode MB/s, 1 thread | 2 threads | speed-up | rounds | same bytes |")
    L.append("| --- | ---: | ---: | ---: | --- | --- |")
    for p in MAIN:
        e1, e2 = statistics.median(by_threads[1][p]), statistics.median(by_threads[2][p])
        each = sorted(b / a_ for a_, b in zip(by_threads[1][p], by_threads[2][p]))
        L.append(f"| {p} | {fmt(e1)} | {fmt(e2)} | {e2 / e1:.2f}× | {each[0]:.2f}–{each[-1]:.2f}× | "
                 f"{'yes' if same_many[p] else 'NO'} |")
    if ceiling:
        L.append("\nWhat a second thread adds to loops that touch no memory (bench/bench_two_threads.cpp), run once "
                 "in each of the rounds above: 2 × one-thread time ÷ two-thread time, each thread doing the one "
                 "thread's work. Two cores of their own give 2 for every loop; an encoder bound by arithmetic "
                 "cannot gain more from `--threads 2` than these loops do at the same moment.\n")
        L.append("| loop | speed-up, median | rounds |")
        L.append("| --- | ---: | --- |")
        for k, v in ceiling.items():
            v = sorted(v)
            L.append(f"| `{k}` | {statistics.median(v):.2f}× | {v[0]:.2f}–{v[-1]:.2f}× |")
    if starts:
        L.append("\nWhat getting a second thread working costs, with an empty body (bench/bench_thread_start.cpp): "
                 "a new `std::thread` against a call of `run_with_helpers` (the encoder's and decoder's helpers, kept "
                 "between calls), alternated in one process; medians, and the median of each iteration's ratio. "
                 "*back to back*: one call straight after another (the helper still polling); *after sleep*: each "
                 "call after 5 ms of sleep (the helper asleep, as at the start of an encode).\n")
        L.append("| calls | new thread µs | helper µs | speed-up |")
        L.append("| --- | ---: | ---: | ---: |")
        for k, b in sorted(starts.items()):
            if k.startswith("BM_thread_start/") and "speedup" in b:
                L.append(f"| {k.split('/')[1].replace('_', ' ')} | {b['new_thread_us']:.1f} | {b['helpers_us']:.1f} | "
                         f"{b['speedup']:.1f}× |")
        pool = next((b for k, b in starts.items() if k.startswith("BM_ordered_pool")), None)
        if pool:
            L.append(f"\nWaking a waiting thread (`BM_ordered_pool`: `run_ordered` on 2 threads over 256 items of ~20 µs "
                     f"that wait for each other's commits): {pool['poll_us'] / 1e3:.2f} ms with its threads polling "
                     f"before they sleep, {pool['sleep_us'] / 1e3:.2f} ms sleeping at once; "
                     f"{pool['speedup']:.2f}× (median of the iterations' ratios).")
    L.append("\nThe same snapshot in one process (bench/bench_snapshot.cpp): each iteration runs the read pass and "
             "the encode on one thread pinned to each vCPU in turn (they differ in speed), then the read pass on two "
             "threads (each taking the next tensor) and the encode on two threads; *speed-up* is the median of each "
             "iteration's faster 1-thread time ÷ 2-thread time, for the encode and for the read pass (what two "
             "threads can give an encoder that only reads); *vCPU spread* is the slower vCPU's one-thread encode "
             "time ÷ the faster's; *read-share model* is 1 ÷ (f ÷ read speed-up + (1 − f) ÷ 2) with f = read time "
             "÷ encode time on one thread: what an encoder that reads its input at the read pass's speed, then "
             "computes, gets when its reading gains what the read pass gained and the rest is halved. "
             f"Medians of {snap_reps} processes of 15 iterations.\n")
    L.append("| preset | encode GB/s, 1 thread | 2 threads | speed-up | read pass GB/s, 1 thread | 2 threads | "
             "read speed-up | read-share model | vCPU spread |")
    L.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    L += snapshot_rows(like_many, lambda b: [f"{b['enc_GBps']:.2f}", f"{b['enc2_GBps']:.2f}", f"{b['enc_speedup']:.2f}×",
                                             f"{b['read_GBps']:.2f}", f"{b['read2_GBps']:.2f}",
                                             f"{b['read_speedup']:.2f}×", f"{b.get('enc_speedup_model', 0):.2f}×",
                                             f"{b.get('enc1_cpu_spread', 1):.2f}"])
    L.append("\nOn the VGG16 snapshot itself (32 tensors, five of 2.36M parameters holding 80% of them), one "
             "round, the medians of the one-core table above against 2 threads:\n")
    L.append("| preset | encode MB/s, 1 thread | 2 threads | speed-up | same bytes |")
    L.append("| --- | ---: | ---: | ---: | --- |")
    for p in MAIN:
        e1, e2 = one[p]["encode_mbps"], two[p]["encode_mbps"]
        L.append(f"| {p} | {fmt(e1)} | {fmt(e2)} | {e2 / e1:.2f}× | {'yes' if same[p] else 'NO'} |")

    if len(cpus) > 1:
        L.append(f"\nEach vCPU alone (the benchmark pinned to it; CPUs alternated for {len(per_cpu[cpus[0]][PER_CPU[0]])} "
                 "rounds, medians). A vector loop's speed on one vCPU is what a second thread adds; *ceiling* = "
                 "(sum over the CPUs) ÷ (fastest CPU), the most `--threads 2` can give if every thread's work is "
                 "like that loop's:\n")
        L.append("| benchmark | " + " | ".join(f"CPU {c} MB/s" for c in cpus) + " | ceiling |")
        L.append("| --- | " + " | ".join("---:" for _ in cpus) + " | ---: |")
        for k in PER_CPU:
            med = [statistics.median(per_cpu[c][k]) for c in cpus]
            L.append(f"| `{k}` | " + " | ".join(fmt(m) for m in med) + f" | {sum(med) / max(med):.2f}× |")

    L.append(f"\n## Memory: encoding a {big_bytes / 1e9:.2f} GB synthetic snapshot (memory-mapped safetensors)\n")
    L.append(f"Largest tensor {largest / 1e6:.1f} MB; limit 3 × largest + 64 MB = {(3 * largest + 64e6) / 1e6:.1f} MB. "
             "Peak RSS = ru_maxrss of the `gradcodec encode` child (what `/usr/bin/time -v` reports).\n")
    L.append("| preset | threads | peak RSS MB | within limit |")
    L.append("| --- | ---: | ---: | --- |")
    for p, t, rss in mem:
        L.append(f"| {p} | {t} | {rss / 1e6:.1f} | {'yes' if rss <= 3 * largest + 64e6 else 'NO'} |")

    L.append("\n" + peers_text.replace("## Peer comparison", "## Peer comparison (synthetic VGG16-size snapshot)", 1))
    L.append("")
    L += perf_real_corpus.section(real)
    scaling = os.path.join(ROOT, "bench", "writers_scaling.md")
    if os.path.exists(scaling):  # bench/bench_writers.py --out writes it (its own run, minutes long)
        with open(scaling) as f:
            L.append("\n" + f.read())
    # Sections from runs of their own scripts, each with its command and data set (written by hand
    # after those runs; in file-name order).
    extra = os.path.join(ROOT, "bench", "performance.d")
    for name in sorted(os.listdir(extra)) if os.path.isdir(extra) else []:
        if name.endswith(".md"):
            with open(os.path.join(extra, name)) as f:
                L.append("\n" + f.read().rstrip("\n"))
    with open(a.out, "w") as f:
        f.write("\n".join(L) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
