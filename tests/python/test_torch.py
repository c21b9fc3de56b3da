# SPDX-License-Identifier: BSD-3-Clause
"""gradcodec with PyTorch (docs/python.md, "PyTorch"): torch tensors in, bfloat16 kept, and
GradientRecorder writing a small CNN's gradients during training."""

import json

import numpy as np
import pytest
import torch

import gradcodec
import gradcodec.torch as gt
from conftest import cli, records


def test_a_bfloat16_tensor_comes_back_bit_for_bit():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(257, 33, generator=g).to(torch.bfloat16)
    blob = gradcodec.encode({"x": x})
    info = gradcodec.open(blob).tensors()[0]
    assert info.dtype == "bfloat16" and info.shape == (257, 33)
    back = gt.decode(blob)["x"]
    assert back.dtype == torch.bfloat16 and torch.equal(back.view(torch.int16), x.view(torch.int16))
    widened = gradcodec.decode(blob)["x"]  # numpy has no bfloat16: float32, exactly the same values
    assert widened.dtype == np.float32 and np.array_equal(widened, x.float().numpy())


def test_a_0d_bfloat16_tensor_comes_back():
    blob = gradcodec.encode({"s": torch.tensor(-2.5).to(torch.bfloat16)})
    back = gt.decode(blob)["s"]
    assert back.dtype == torch.bfloat16 and back.shape == () and back.item() == -2.5
    widened = gradcodec.decode(blob)["s"]
    assert widened.dtype == np.float32 and widened.shape == () and widened == -2.5
    assert gradcodec.Compressor("fp16").roundtrip("s", torch.tensor(3.0).to(torch.bfloat16)) == 3.0


def test_torch_tensors_give_the_records_of_their_numpy_arrays():
    g = torch.Generator().manual_seed(1)
    w = torch.randn(40, 30, generator=g, requires_grad=True)
    frame_t = {"w": w, "wt": w.t(), "h": w.detach().half(), "d": w.detach().double(), "i": torch.arange(5)}
    frame_n = {k: v.detach().numpy().copy(order="C") if k != "wt" else np.ascontiguousarray(w.detach().numpy().T)
               for k, v in frame_t.items()}
    assert records(gradcodec.encode(frame_t, preset="qsgd4", seed=3)) == \
        records(gradcodec.encode(frame_n, preset="qsgd4", seed=3))
    back = gt.decode(gradcodec.encode(frame_t))
    assert back["h"].dtype == torch.float16 and back["i"].dtype == torch.int64
    assert torch.equal(back["wt"], w.detach().t())


def test_a_lossy_bfloat16_pipeline_keeps_the_dtype():
    x = torch.linspace(-1, 1, 4096).to(torch.bfloat16)
    back = gt.decode(gradcodec.encode({"x": x}, preset="qsgd8", seed=1))["x"]
    assert back.dtype == torch.bfloat16 and back.shape == x.shape
    # QSGD 8-bit on buckets of 512 values in [-1, 1]: one level is |bucket| / 127 ~ 0.1, and the
    # decoded value is rounded to bfloat16 (2^-8 relative).
    err = (back.float() - x.float()).abs()
    assert err.max() < 0.25 and err.mean() < 0.06


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.nn.functional.avg_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def train(steps, on_step):
    torch.manual_seed(0)
    model = SmallCNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(64, 1, 8, 8, generator=g), torch.randint(0, 10, (64,), generator=g)
    losses = []
    for step in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        on_step(model, step)
        opt.step()
        losses.append(loss.item())
    return model, losses


def test_the_recorder_writes_exactly_the_gradients_p_grad_held(tmp_path):
    path = tmp_path / "run.gcz"
    held = []
    recorder = None

    def on_step(model, step):
        nonlocal recorder
        if recorder is None:
            recorder = gt.GradientRecorder(model, path, preset="lossless")
        recorder.record()
        held.append({n: p.grad.clone() for n, p in model.named_parameters()})

    model, losses = train(10, on_step)
    summary = recorder.close()
    assert losses[-1] < losses[0]
    assert summary["frames"] == 10 and path.exists()
    with gradcodec.open(path) as c:
        assert len(c) == 10
        for step in range(10):
            got = c.read(step)
            assert list(got) == [n for n, _ in model.named_parameters()]
            for name, grad in held[step].items():
                assert np.array_equal(got[name], grad.numpy()), (step, name)
    # An ordinary container: the CLI reads it.
    report = json.loads(cli("inspect", "--json", path).stdout)
    assert report["totals"]["frames"] == 10


def test_the_recorder_takes_every_kth_step_and_a_lossy_preset(tmp_path):
    path = tmp_path / "run.gcz"
    recorders = []

    def on_step(model, step):
        if not recorders:
            recorders.append(gt.GradientRecorder(model, path, preset="topk-1pct", every=3, seed=4))
        recorders[0].record()

    train(10, on_step)
    recorders[0].close()
    with gradcodec.open(path) as c:
        assert len(c) == 4  # steps 0, 3, 6, 9
        assert [f.source for f in c.frames] == ["step 0", "step 3", "step 6", "step 9"]
        assert c.pipeline == gradcodec.canonical_pipeline(preset="topk-1pct")


def test_an_exception_while_recording_leaves_no_file(tmp_path):
    path = tmp_path / "run.gcz"
    with pytest.raises(RuntimeError):
        def on_step(model, step):
            if step == 0:
                on_step.rec = gt.GradientRecorder(model, path).__enter__()
            on_step.rec.record()
            if step == 3:
                on_step.rec.__exit__(RuntimeError, None, None)
                raise RuntimeError("diverged")
        train(5, on_step)
    assert not path.exists() and list(tmp_path.iterdir()) == []


def test_a_gradient_the_pipeline_refuses_is_raised_in_the_training_loop(tmp_path):
    model = torch.nn.Linear(4, 2)
    model(torch.ones(1, 4)).sum().backward()
    model.weight.grad[0, 0] = float("nan")
    rec = gt.GradientRecorder(model, tmp_path / "run.gcz", preset="qsgd4")
    rec.record()
    with pytest.raises(gradcodec.InputError) as e:
        rec.close()
    assert "nan" in str(e.value).lower() or "non-finite" in str(e.value).lower()
    assert list(tmp_path.iterdir()) == []
