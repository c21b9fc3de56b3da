# SPDX-License-Identifier: BSD-3-Clause
"""gradcodec.torch.ddp_comm_hook in real data-parallel training: 2 processes, PyTorch's
DistributedDataParallel over the gloo backend on CPU, ~20 steps (docs/python.md, "PyTorch")."""

import datetime
import json
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

STEPS = 20


def worker(rank, world, rendezvous, out_dir, pipeline):
    import gradcodec.torch as gt

    # Both ranks are on this machine: gloo talks over the loopback device, not the interface the
    # host name resolves to (a CI machine may resolve it to an address it cannot reach, and gloo
    # would wait there for half an hour). A stuck collective fails after two minutes, not never.
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    torch.manual_seed(0)  # the same initial model on every rank (DDP also broadcasts it)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.004)  # several buckets
    state, hook = gt.ddp_comm_hook(pipeline, seed=11)
    ddp.register_comm_hook(state, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    teacher = torch.Generator().manual_seed(7)
    w_true = torch.randn(32, 4, generator=teacher)
    x = torch.randn(256, 32, generator=g)
    y = x @ w_true
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(everyone, flat)
    same = all(torch.equal(everyone[0].view(torch.int32), e.view(torch.int32)) for e in everyone)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"losses": losses, "same_parameters": same, "bytes_sent": state.bytes_sent,
                   "bytes_dense": state.bytes_dense}, f)
    dist.barrier()
    dist.destroy_process_group()
    # The worker leaves without the interpreter's teardown: with Debian's torch 1.13, tearing down
    # a DDP model's Reducer at exit can join a gloo thread that waits for the GIL the exiting
    # thread holds (seen under load: a rank stuck in ~ProcessGroupGloo until the test's timeout).
    # Everything this test checks is in the file written above.
    os._exit(0)


@pytest.mark.parametrize("pipeline", ["ef | topk(ratio=0.05)", "powersgd-r2"])
def test_training_with_the_hook(tmp_path, pipeline):
    mp.spawn(worker, args=(2, str(tmp_path / "rendezvous"), str(tmp_path), pipeline), nprocs=2, join=True)
    results = [json.load(open(tmp_path / f"rank{r}.json")) for r in range(2)]
    for r in results:
        assert r["same_parameters"], "the ranks' parameters differ"
        first, last = r["losses"][0], r["losses"][-1]
        assert last < 0.5 * first, r["losses"]
        # The hook sent compressed records, not the dense buckets.
        assert 0 < r["bytes_sent"] < 0.5 * r["bytes_dense"], r


def test_the_hook_refuses_nan_naming_its_own_keyword_or_sends_it_raw(monkeypatch):
    import numpy as np

    import gradcodec
    import gradcodec.torch as gt

    # One rank, without a process group: the state asks torch.distributed for its rank and size.
    monkeypatch.setattr(dist, "get_rank", lambda group=None: 0)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 1)
    g = np.array([1.0, np.nan, 2.0, -np.inf] * 16, np.float32)
    state, _ = gt.ddp_comm_hook("qsgd4", seed=1)
    state._start()
    with pytest.raises(gradcodec.InputError) as e:
        state.compressor.encode("param0", g)
    assert str(e.value).endswith('nonfinite="raw" stores such tensors raw'), e.value
    state, _ = gt.ddp_comm_hook("qsgd4", seed=1, nonfinite="raw")
    state._start()
    _, decoded = state.compressor.encode("param0", g)
    assert decoded.tobytes() == g.tobytes()
    with pytest.raises(gradcodec.UsageError):
        gt.ddp_comm_hook("qsgd4", nonfinite="zero")


def test_the_hook_state_counts_before_training():
    import gradcodec.torch as gt

    state, hook = gt.ddp_comm_hook("qsgd4", seed=1)
    assert callable(hook) and state.bytes_sent == 0 and state.compressor is None
