#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The step time of DistributedDataParallel with gradcodec's communication hook against the
default all-reduce (issue 42 item 5; figures in docs/performance.md).

2 processes on this machine, gloo on CPU, an MLP of about 4.2M parameters, batch 64. For each
hook: STEPS steps after WARMUP, every step timed alone (forward, backward with the hook, the
optimizer), medians over the ranks' steps. The same script runs every hook, one after another.

  PYTHONPATH=build/python /usr/bin/python3 bench/ddp_hook_step.py [--steps 30] [--warmup 5]
"""
import argparse
import os
import statistics
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HOOKS = ["default", "fp16", "ef | topk(ratio=0.01)", "powersgd-r2", "qsgd4"]


def worker(rank, world, rendezvous, hook_name, steps, warmup, out):
    import gradcodec.torch as gt

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 1024),
                                torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    state = None
    if hook_name != "default":
        state, hook = gt.ddp_comm_hook(hook_name, seed=0)
        ddp.register_comm_hook(state, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    x, y = torch.randn(64, 1024, generator=g), torch.randint(0, 10, (64,), generator=g)
    times = []
    for step in range(warmup + steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
        if step >= warmup:
            times.append(time.perf_counter() - t0)
    sent = state.bytes_sent if state else 0
    dense = state.bytes_dense if state else 0
    with open(os.path.join(out, f"{rank}.txt"), "w") as f:
        f.write(" ".join(map(str, times)) + f"\n{sent} {dense}\n")
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    params = 1024 * 2048 + 2048 + 2048 * 1024 + 1024 + 1024 * 10 + 10
    print(f"DDP, 2 processes, gloo on CPU, MLP of {params:,} parameters, batch 64, "
          f"{args.steps} timed steps after {args.warmup}")
    base = None
    for name in HOOKS:
        with tempfile.TemporaryDirectory() as tmp:
            mp.spawn(worker, args=(2, os.path.join(tmp, "rdv"), name, args.steps, args.warmup, tmp), nprocs=2)
            times, sent, dense = [], 0, 0
            for r in range(2):
                with open(os.path.join(tmp, f"{r}.txt")) as f:
                    line, counts = f.read().splitlines()
                times += [float(t) for t in line.split()]
                s, d = map(int, counts.split())
                sent, dense = sent + s, dense + d
        med = statistics.median(times)
        base = base or med
        ratio = f"{dense / sent:6.1f}x fewer bytes" if sent else "dense all-reduce"
        print(f"{name:24s} median step {med * 1e3:8.1f} ms   vs default {med / base:5.2f}   {ratio}", flush=True)


if __name__ == "__main__":
    main()
