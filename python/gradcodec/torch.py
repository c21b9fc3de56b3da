# SPDX-License-Identifier: BSD-3-Clause
"""PyTorch pieces on gradcodec (docs/python.md, "PyTorch"): GradientRecorder writes a training
run's gradients into a container; decode() reads a frame back as torch tensors in their stored
dtypes (bfloat16 included); ddp_comm_hook() sends DistributedDataParallel's gradients through a
pipeline."""

import queue
import struct
import threading

import torch

from ._api import Container, Encoder
from ._errors import CorruptError, UsageError


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


class DDPCompressionState:
    """What ddp_comm_hook's hook keeps between steps: this rank's Compressor, a Decompressor per
    rank (each made with that rank's seed), and the bytes sent."""

    def __init__(self, pipeline, preset, seed, process_group, nonfinite="refuse"):
        self.pipeline, self.preset, self.seed, self.nonfinite = pipeline, preset, seed, nonfinite
        self.process_group = process_group
        self.rank = self.world = None
        self.compressor = None
        self.receivers = []
        self.names = {}          # id(parameter) -> its name in the records
        self.bytes_sent = 0      # this rank's records, over every bucket and step
        self.bytes_dense = 0     # what the buckets' gradients take uncompressed

    def _start(self):
        import torch.distributed as dist

        from ._api import Compressor, Decompressor

        self.rank = dist.get_rank(self.process_group)
        self.world = dist.get_world_size(self.process_group)
        # Each rank its own seed: independent random choices (QSGD's rounding, TernGrad's)
        # across workers, as independent workers would make them.
        seeds = [self.seed + r for r in range(self.world)]
        self.compressor = Compressor(self.pipeline, preset=self.preset, seed=seeds[self.rank],
                                     nonfinite=self.nonfinite)
        self.receivers = [Decompressor(self.pipeline, preset=self.preset, seed=s) for s in seeds]


def _pack(records):
    """Records back to back, each after its u64 length: what one rank sends for a bucket."""
    out = bytearray()
    for r in records:
        out += struct.pack("<Q", len(r)) + r
    return bytes(out)


def _unpack(blob, count):
    records, pos = [], 0
    for _ in range(count):
        if pos + 8 > len(blob):
            raise CorruptError(f"a rank's bucket holds {len(records)} records, not {count}")
        (n,) = struct.unpack_from("<Q", blob, pos)
        if pos + 8 + n > len(blob):
            raise CorruptError("a rank's record runs past the bytes it sent")
        records.append(blob[pos + 8:pos + 8 + n])
        pos += 8 + n
    if pos != len(blob):
        raise CorruptError("a rank sent bytes after its records")
    return records


def _compressed_allreduce_hook(state, bucket):
    import torch.distributed as dist

    if state.compressor is None:
        state._start()
    group = state.process_group
    buffer = bucket.buffer()
    names, tensors = [], []
    for p, g in zip(bucket.parameters(), bucket.gradients()):
        # A parameter's name follows it when DDP rebuilds its buckets after the first step, and
        # its state (error feedback, PowerSGD's warm start) with it. Names are given in the order
        # parameters are first seen, the same on every rank: every bucket is reduced in the
        # same order everywhere, so every receiver sees each sender's names in its order.
        names.append(state.names.setdefault(id(p), f"param{len(state.names)}"))
        tensors.append(g.detach().to("cpu").reshape(p.shape))
    records, mine = [], []
    for name, t in zip(names, tensors):
        record, decoded = state.compressor.encode(name, t)
        records.append(record)
        mine.append(decoded)
        state.bytes_dense += t.numel() * t.element_size()
    blob = _pack(records)
    state.bytes_sent += len(blob)
    size = torch.tensor([len(blob)], dtype=torch.int64)
    sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(state.world)]
    dist.all_gather(sizes, size, group=group)
    longest = int(max(s.item() for s in sizes))
    padded = torch.zeros(longest, dtype=torch.uint8)
    padded[:len(blob)] = torch.frombuffer(bytearray(blob), dtype=torch.uint8)
    gathered = [torch.empty(longest, dtype=torch.uint8) for _ in range(state.world)]
    dist.all_gather(gathered, padded, group=group)
    # Every rank decodes every rank's records and sums them in rank order: the same values on
    # every rank (a rank's own record decodes to what encode() returned with it).
    sums = [torch.zeros_like(t) for t in tensors]
    for r in range(state.world):
        if r == state.rank:
            parts = mine
        else:
            theirs = _unpack(gathered[r][:int(sizes[r].item())].numpy().tobytes(), len(names))
            parts = [state.receivers[r].decode(n, rec) for n, rec in zip(names, theirs)]
        for acc, part in zip(sums, parts):
            acc += torch.from_numpy(part).view_as(acc)
    out = torch.zeros_like(buffer, device="cpu")
    base = buffer.storage_offset()
    for g, acc in zip(bucket.gradients(), sums):
        start = g.storage_offset() - base
        out[start:start + acc.numel()] = acc.reshape(-1) / state.world
    fut = torch.futures.Future()
    fut.set_result(out.to(buffer.device))
    return fut


def ddp_comm_hook(pipeline=None, *, preset=None, seed=0, nonfinite="refuse", process_group=None):
    """A communication hook for DistributedDataParallel.register_comm_hook that sends each
    gradient bucket through a gradcodec pipeline: ``state, hook = ddp_comm_hook("ef |
    topk(ratio=0.01)")`` then ``ddp.register_comm_hook(state, hook)``.

    Each rank encodes the gradient of every parameter of a bucket (rank r with seed
    ``seed + r``); the records are all-gathered (their sizes first); every rank decodes every
    rank's records and averages them in rank order, so every rank applies the same gradient.
    Stateful pipelines (error feedback, PowerSGD's warm start) keep their state per parameter.
    A gradient holding NaN/Inf is refused (InputError) unless ``nonfinite="raw"``, which sends
    it uncompressed, as the default all-reduce would. Works with the gloo backend on CPU; ``state.bytes_sent``
    and ``state.bytes_dense`` count what this rank sent against the uncompressed buckets."""
    if nonfinite not in ("refuse", "raw"):
        raise UsageError(f"nonfinite must be 'refuse' or 'raw', not {nonfinite!r}")
    return DDPCompressionState(pipeline, preset, seed, process_group, nonfinite), _compressed_allreduce_hook
