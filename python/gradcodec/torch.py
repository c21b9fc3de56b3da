# SPDX-License-Identifier: BSD-3-Clause
"""PyTorch pieces on gradcodec (docs/python.md, "PyTorch"): GradientRecorder writes a training
run's gradients into a container; decode() reads a frame back as torch tensors in their stored
dtypes (bfloat16 included)."""

import queue
import threading

import torch

from ._api import Container, Encoder


def decode(source, frame=0, *, threads=0):
    """The tensors of one frame as CPU torch tensors in the stored dtype (bfloat16 restored, which
    the numpy API widens to float32): dict name -> torch.Tensor."""
    c = Container(source, threads=threads)
    out = {}
    infos = {t.name: t for t in c.tensors(frame)}
    for name, arr in c.read(frame).items():
        t = torch.from_numpy(arr)
        if infos[name].dtype == "bfloat16":
            t = t.to(torch.bfloat16)  # exact: the float32 values are bfloat16 ones
        out[name] = t
    return out


class GradientRecorder:
    """Appends a model's gradients to a container as frames, encoded on a background thread.

    Call record() after loss.backward(): every ``every``-th call copies each parameter's gradient
    (names from model.named_parameters(); parameters without one are left out) and queues the
    frame. The training loop waits only when ``queue_size`` frames are already waiting. close(),
    or leaving the ``with`` block, finishes the file; an exception in the block, or in encoding,
    leaves no file. The result is an ordinary container (gradcodec inspect / bench / decode)."""

    def __init__(self, model, path, preset="lossless", every=1, *, pipeline=None, seed=0, threads=0,
                 keyframe_interval=0, nonfinite="refuse", queue_size=2):
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be a positive integer, not {every!r}")
        if pipeline is not None:
            preset = None
        self._model = model
        self._every = every
        self._calls = 0
        self._encoder = Encoder(path, preset=preset, pipeline=pipeline, seed=seed, threads=threads,
                                keyframe_interval=keyframe_interval, nonfinite=nonfinite)
        self._queue = queue.Queue(maxsize=max(1, int(queue_size)))
        self._error = None
        self._closed = False
        self._thread = threading.Thread(target=self._work, name="gradcodec-recorder", daemon=True)
        self._thread.start()
        self.frames = 0  # frames queued so far

    def _work(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self._error is None:
                frame, source = item
                try:
                    self._encoder.add(frame, source)
                except BaseException as e:  # handed to the training thread by record()/close()
                    self._error = e

    def _raise_pending(self):
        if self._error is not None:
            e, self._error = self._error, None
            self._stop(finish=False)
            raise e

    def record(self):
        """Queues the current gradients as a frame (every ``every``-th call)."""
        if self._closed:
            raise RuntimeError("GradientRecorder.record() after close()")
        self._raise_pending()
        self._calls += 1
        if (self._calls - 1) % self._every:
            return
        with torch.no_grad():
            frame = {name: p.grad.detach().to("cpu", copy=True)
                     for name, p in self._model.named_parameters() if p.grad is not None}
        self._queue.put((frame, f"step {self._calls - 1}"))
        self.frames += 1

    def _stop(self, finish):
        if self._closed:
            return None
        self._closed = True
        self._queue.put(None)
        self._thread.join()
        if finish and self._error is None:
            return self._encoder.finish()
        self._encoder.abort()
        return None

    def close(self):
        """Encodes what is queued and finishes the file; returns the totals (Encoder.finish)."""
        summary = self._stop(finish=True)
        self._raise_pending()
        return summary

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self._stop(finish=False)
        return False
