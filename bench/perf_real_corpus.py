# SPDX-License-Identifier: BSD-3-Clause
"""The real-gradient part of bench/run_performance.py (issue 44): every preset of the targets on
each model of the corpus of bench/real_gradients.py (ResNet-18, VGG16-BN, transformer; step 0),
one core, and the peer comparison (bench/peers/peers.py) on the real VGG16-BN; the targets of
issue 44 items 2 and 3 checked on them. measure() runs it, section() renders its markdown."""
import datetime
import json
import os
import subprocess
import sys

MODELS = ["resnet18", "vgg16bn", "transformer"]
PRESETS = ["topk-1pct", "bird+", "bird+-lzma", "qsgd4", "lossless"]
BENCH = os.path.dirname(os.path.abspath(__file__))


def _sh(cmd):
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def measure(exe, corpus, tmp, repeat, quick):
    """Makes the corpus in `corpus` unless its files are there, then measures. Returns a dict."""
    if not all(os.path.exists(os.path.join(corpus, m, "step_000.safetensors")) for m in MODELS):
        _sh(["/usr/bin/python3", os.path.join(BENCH, "real_gradients.py"), corpus,
             "--models", ",".join(MODELS), "--steps", "1"] + (["--tiny"] if quick else []))
    rows = {}
    for m in MODELS:
        out = os.path.join(tmp, f"real_{m}.json")
        cmd = [exe, "bench", os.path.join(corpus, m, "step_000.safetensors"), "--threads", "1", "--repeat", str(repeat),
               "--min-time", "0" if quick else "0.5", "--json", out, "--force"]
        for p in PRESETS:
            cmd += ["--preset", p]
        _sh(cmd)
        with open(out) as f:
            rows[m] = {r["label"]: r for r in json.load(f)["rows"]}
        os.remove(out)
    peers_json = os.path.join(tmp, "real_peers.json")
    peers_md = os.path.join(tmp, "real_peers.md")
    _sh(["/usr/bin/python3", os.path.join(BENCH, "peers", "peers.py"), exe, "--snapshot",
         os.path.join(corpus, "vgg16bn", "step_000.safetensors"), "--repeat", "1" if quick else "3",
         "--rounds", "2" if quick else "5", "--json", peers_json, "--markdown", peers_md])
    with open(peers_json) as f:
        peers = json.load(f)
    with open(peers_md) as f:
        peers_text = f.read()
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return {"corpus": corpus, "rows": rows, "peers": peers, "peers_text": peers_text, "quick": quick, "when": when,
            "command": "/usr/bin/python3 bench/run_performance.py " + " ".join(sys.argv[1:])}


def targets(res):
    """Issue 44 item 2 on the real VGG16-BN: (name, measured, needed, met)."""
    v = res["rows"]["vgg16bn"]
    t = [("topk-1pct encode MB/s", v["topk-1pct"]["encode_mbps"], 3000),
         ("bird+ encode MB/s", v["bird+"]["encode_mbps"], 2500),
         ("bird+ ratio ÷ the paper's coding's (bird+-lzma)", v["bird+"]["ratio"] / v["bird+-lzma"]["ratio"], 1.0),
         ("qsgd4 encode MB/s", v["qsgd4"]["encode_mbps"], 3000),
         ("lossless encode MB/s", v["lossless"]["encode_mbps"], 1000),
         ("lossless ratio", v["lossless"]["ratio"], 1.18)]
    t += [(f"{p} decode MB/s", v[p]["decode_mbps"], 3000) for p in PRESETS]
    return [(n, x, need, x >= need) for n, x, need in t]


def section(res):
    L = ["## Real-gradient corpus: issue 44's targets (bench/perf_real_corpus.py)\n"]
    L.append("Step 0 of each model of `bench/real_gradients.py` (gradients after 5 SGD steps on random inputs; "
             "docs: \"Real gradients\" below), `gradcodec bench FILE --threads 1 --preset P ...` (codec in memory, "
             "medians, every run checked to give the same bytes)" + (" — **--quick: tiny models, not figures to "
             "publish**" if res["quick"] else "") + f". Measured {res['when']} by `{res['command']}`.\n")
    L.append("| preset | " + " | ".join(f"{m}: ratio, enc MB/s, dec MB/s" for m in MODELS) + " |")
    L.append("| --- | " + " | ".join("---" for _ in MODELS) + " |")
    for p in PRESETS:
        cells = []
        for m in MODELS:
            r = res["rows"][m][p]
            cells.append(f"{r['ratio']:.2f}, {r['encode_mbps']:,.0f}, {r['decode_mbps']:,.0f}")
        L.append(f"| {p} | " + " | ".join(cells) + " |")
    L.append("\nIssue 44 item 2, on the real VGG16-BN, one core:\n")
    L.append("| target | measured | needed | met |")
    L.append("| --- | ---: | ---: | --- |")
    for n, x, need, met in targets(res):
        L.append(f"| {n} | {x:,.2f} | {need:,} | {'yes' if met else 'no'} |")
    L.append("\nIssue 44 item 3 and the rest of peers.py's targets, from the peer run below:\n")
    L.append("| target | measured | needed | met |")
    L.append("| --- | ---: | ---: | --- |")
    for t in res["peers"]["targets"]:
        L.append(f"| {t['target']} | {t['value']:,.3g} | {t['needed']:,} | {'yes' if t['met'] else 'no'} |")
    L.append("")
    L.append(res["peers_text"].replace("## Peer comparison (bench/peers/peers.py)",
                                       "### Peers on the real VGG16-BN (bench/peers/peers.py)", 1))
    return L
