# SPDX-License-Identifier: BSD-3-Clause
"""The numpy API (docs/python.md): encode, open, decode, inspect, merge and Encoder, on the C++
library's public API through the extension _core. The bytes are the CLI's: for the same
tensors (names, order, dtypes), pipeline and seed, the records are those `gradcodec encode`
writes; only the header's description of the inputs differs (here: none)."""

import builtins
import json
import numbers
import os
import tempfile
from typing import NamedTuple

from . import _core
from ._errors import Error, UsageError
from ._frames import as_array, dtype_of, frame_items, frames_list, to_numpy

_NO_INPUTS = "[]"


class TensorInfo(NamedTuple):
    """A stored tensor, from its record's metadata (nothing decoded)."""

    name: str
    shape: tuple
    dtype: object  # numpy.dtype, or "bfloat16"


class Frame(NamedTuple):
    index: int
    keyframe: bool  # decodable without the frames before it
    source: str


def _uint(name, value, bits):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 <= value < (1 << bits):
        raise UsageError(f"{name} must be an integer from 0 to {(1 << bits) - 1}, not {value!r}")
    return int(value)


def _pipeline_args(preset, pipeline):
    if preset is not None and pipeline is not None:
        raise UsageError("give a preset or a pipeline, not both")
    for what, v in (("preset", preset), ("pipeline", pipeline)):
        if v is not None and not isinstance(v, str):
            raise UsageError(f"{what} must be a string, not {type(v).__name__}")
        if v is not None and not v.strip():  # as the CLI's --preset '' (None is the default)
            raise UsageError(f"{what} is empty")
    return preset or "", pipeline or ""


def canonical_pipeline(preset=None, pipeline=None):
    """The canonical text of a preset or a pipeline (UsageError if it is not one)."""
    return _core.canonical_pipeline(*_pipeline_args(preset, pipeline))


class Encoder:
    """Writes frames into a container, one add() at a time.

    ``path`` None collects the container in memory (getvalue() after finishing); otherwise it is
    written under a temporary name and renamed into place when finished, replacing a file there
    unless ``overwrite=False``. As a context manager, leaving the block finishes the container;
    an exception inside it leaves no file."""

    def __init__(self, path=None, *, preset=None, pipeline=None, seed=0, threads=0, keyframe_interval=0,
                 nonfinite="refuse", overwrite=True):
        preset, pipeline = _pipeline_args(preset, pipeline)
        self._path = None if path is None else os.fspath(path)
        self._core = _core.Encoder(self._path, preset, pipeline, _uint("seed", seed, 64), _uint("threads", threads, 16),
                                   _uint("keyframe_interval", keyframe_interval, 32), str(nonfinite), bool(overwrite),
                                   _NO_INPUTS)
        self.summary = None  # the totals, once finished (finish()'s dict)

    @property
    def pipeline(self):
        return self._core.pipeline_text()

    def add(self, frame, source=""):
        """Encodes one frame (a mapping name -> array, in order); returns a dict per tensor:
        name, storage ("pipeline", "raw", "pass-through"), input_bytes, record_bytes."""
        return self._core.add(frame_items(frame), str(source))

    def finish(self):
        """Completes the container; returns the totals (frames, tensors, input_bytes,
        output_bytes, float_elements, ratio, bits_per_parameter)."""
        self.summary = self._core.finish()
        return self.summary

    def abort(self):
        """Drops an unfinished container: no file is left."""
        self._core.abort()

    def getvalue(self):
        """The finished container's bytes (an Encoder writing to memory)."""
        value = self._core.bytes()
        if value is None:
            raise UsageError("getvalue(): the Encoder writes to a file, or is not finished")
        return value

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            if self.summary is None:
                self.finish()
        else:
            self.abort()
        return False


def encode(frames, path=None, *, preset=None, pipeline=None, seed=0, threads=0, keyframe_interval=0,
           nonfinite="refuse"):
    """Encodes one frame (a mapping name -> array) or a list of frames into a container: its
    bytes when ``path`` is None, else written to ``path`` atomically (returns None). Without a
    preset or pipeline: the preset "lossless"."""
    frames = frames_list(frames)
    with Encoder(path, preset=preset, pipeline=pipeline, seed=seed, threads=threads,
                 keyframe_interval=keyframe_interval, nonfinite=nonfinite) as enc:
        for f in frames:
            enc.add(f)
    return enc.getvalue() if path is None else None


class Container:
    """A container opened for reading (a path, or its bytes). Metadata is read at once and
    checked; tensors are decoded on demand."""

    def __init__(self, source, *, threads=0):
        if not isinstance(source, (bytes, bytearray, memoryview)):
            source = os.fspath(source)
        self._decoder = _core.Decoder(source, _uint("threads", threads, 16))

    @property
    def _core(self):  # the open decoder; UsageError once close() has run
        if self._decoder is None:
            raise UsageError("the container is closed")
        return self._decoder

    pipeline = property(lambda self: self._core.pipeline_text())
    seed = property(lambda self: self._core.seed())
    keyframe_interval = property(lambda self: self._core.keyframe_interval())
    tool = property(lambda self: self._core.tool())
    stateful = property(lambda self: self._core.stateful())
    inputs = property(lambda self: json.loads(self._core.inputs_json()))

    @property
    def frames(self):
        return [Frame(*self._core.frame(f)) for f in range(self._core.frame_count())]

    def __len__(self):
        return self._core.frame_count()

    def _frame(self, frame):
        n = self._core.frame_count()
        if isinstance(frame, bool) or not isinstance(frame, numbers.Integral):
            raise TypeError(f"frame must be an integer, not {type(frame).__name__}")
        f = int(frame) + (n if frame < 0 else 0)
        if not 0 <= f < n:
            raise IndexError(f"frame {frame} of a container of {n} frame(s)")
        return f

    def tensors(self, frame=0):
        """The frame's tensors in record order: TensorInfo(name, shape, dtype), nothing decoded."""
        return [TensorInfo(name, shape, dtype_of(kind, descr))
                for name, kind, descr, shape in self._core.tensors(self._frame(frame))]

    def read(self, frame=0):
        """Decodes every tensor of the frame: dict name -> numpy array."""
        return {name: to_numpy(*decoded) for name, decoded in self._core.decode_frame(self._frame(frame))}

    def read_tensor(self, frame, name):
        """Decodes one tensor (KeyError if the frame has none of that name)."""
        f = self._frame(frame)
        i = self._core.find(f, name)
        if i is None:
            raise KeyError(name)
        return to_numpy(*self._core.decode(f, i))

    def close(self):
        self._decoder = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def open(source, *, threads=0):  # noqa: A001 - the module's verb, as gzip.open
    """Opens a container: a path (str or os.PathLike) or its bytes."""
    return Container(source, threads=threads)


def decode(source, frame=0, *, threads=0):
    """The tensors of one frame: dict name -> numpy array in the stored dtype and shape."""
    return Container(source, threads=threads).read(frame)


class _AsPaths:
    """Paths for sources given as bytes: written to a temporary folder, removed afterwards."""

    def __init__(self, sources):
        self._sources = sources
        self._dir = None

    def __enter__(self):
        paths = []
        self._temporary = {}  # temporary path -> how an error message names it
        for i, s in enumerate(self._sources):
            if isinstance(s, (bytes, bytearray, memoryview)):
                if self._dir is None:
                    self._dir = tempfile.TemporaryDirectory(prefix="gradcodec-")
                p = os.path.join(self._dir.name, f"input{i}.gcz")
                with builtins.open(p, "wb") as f:
                    f.write(s)
                paths.append(p)
                self._temporary[p] = f"<bytes #{i}>" if len(self._sources) > 1 else "<bytes>"
            else:
                paths.append(os.fspath(s))
        return paths

    def __exit__(self, exc_type, exc, tb):
        if self._dir is not None:
            self._dir.cleanup()
        # An error names the input the caller gave, not the temporary copy that was read.
        if isinstance(exc, Error) and exc.args and isinstance(exc.args[0], str):
            message = exc.args[0]
            for path, name in self._temporary.items():
                message = message.replace(path, name)
            exc.args = (message, *exc.args[1:])
        return False


def inspect(source, *, decode=True):
    """What `gradcodec inspect --json` prints, as a dict: header, every frame's tensors with their
    stages, sizes, ratios and streams, totals. ``decode=False`` reads metadata and checksums only.
    For a container given as bytes, "file" is None."""
    with _AsPaths([source]) as (path,):
        record = json.loads(_core.inspect(path, bool(decode)))
    if isinstance(source, (bytes, bytearray, memoryview)):
        record["file"] = None  # not a file: the temporary copy's name means nothing
    return record


def _names(what, values):
    if values is None:
        return []
    if isinstance(values, str):
        return [values]
    values = list(values)
    for v in values:
        if not isinstance(v, str):
            raise UsageError(f"{what} are strings, not {type(v).__name__} ({v!r})")
    return values


def bench(frames, *, presets=None, pipelines=None, sweeps=None, repeat=3, min_time=0.2, seeds=1, threads=1,
          nonfinite="refuse", per_tensor=False, link_rate=0, link_workers=0, link_latency=1e-5, collective="auto",
          target=None, target_scope=None):
    """Compares compressors on the frames (one mapping name -> array, or a list of them): the
    rows `gradcodec bench --json` reports, as a list of dicts with its field names
    (docs/bench.md) — ratio, bits_per_param and its parts, rel_l2, cosine, encode_mbps, ... One
    row per preset, then per pipeline text (neither: every preset); a sweep "STAGE.PARAM=a,b,c"
    makes one row per value. Every decoded run is checked (MismatchError if a lossless row does
    not return its input exactly). Each frame records the source "<memory>", so a row's
    output_bytes is the size of ``encode`` of the same frames. With ``link_rate`` (bytes per
    second) and ``link_workers`` (N >= 2), each row also gets the link model's ``link_*`` fields
    (docs/bench.md, "Link model"; ``link_latency`` in seconds per message). With ``target``
    ("bits=B" or "rel_l2=E", docs/target.md) each row's main parameter is first chosen on the
    first frame, and the row's ``target`` says what was chosen (or why nothing was)."""
    for what, v in (("link_rate", link_rate), ("link_latency", link_latency)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not 0 <= v < float("inf"):
            raise UsageError(f"{what} must be a number >= 0, not {v!r}")
    if isinstance(min_time, bool) or not isinstance(min_time, numbers.Real) or not 0 <= min_time < float("inf"):
        raise UsageError(f"min_time must be a number of seconds >= 0, not {min_time!r}")
    items = [frame_items(f) for f in frames_list(frames)]
    text = _core.bench(items, _names("presets", presets), _names("pipelines", pipelines), _names("sweeps", sweeps),
                       _uint("repeat", repeat, 32), float(min_time), _uint("seeds", seeds, 32),
                       _uint("threads", threads, 16), str(nonfinite), bool(per_tensor), float(link_rate),
                       _uint("link_workers", link_workers, 16), float(link_latency), str(collective),
                       "" if target is None else str(target), "" if target_scope is None else str(target_scope))
    return json.loads(text)["rows"]


def merge(inputs, output=None, *, method, seed=0, eta=None, preset=None, pipeline=None, compensation=True,
          full_sync=0, threads=0):
    """Merges workers' containers (paths or bytes, in ring order) frame by frame (docs/merge.md).
    Returns the merged container's bytes when ``output`` is None; else writes ``output``
    atomically and returns the summary (frames, tensors, pipeline, hop_bits, bytes_written)."""
    preset, pipeline = _pipeline_args(preset, pipeline)
    inputs = list(inputs)
    with _AsPaths(inputs) as paths, tempfile.TemporaryDirectory(prefix="gradcodec-") as tmp:
        target = os.path.join(tmp, "merged.gcz") if output is None else os.fspath(output)
        summary = _core.merge(paths, target, str(method), _uint("seed", seed, 64),
                              None if eta is None else float(eta), preset, pipeline, bool(compensation),
                              _uint("full_sync", full_sync, 32), _uint("threads", threads, 16), True, _NO_INPUTS)
        if output is not None:
            return summary
        with builtins.open(target, "rb") as f:
            return f.read()


class Compressor:
    """A pipeline applied to one tensor at a time, without files: compression inside a training
    loop. ``roundtrip(name, array)`` returns what a receiver would decode, in the array's dtype
    and shape; per-name state (error feedback, PowerSGD's warm start, TCS) carries from call to
    call of a name, so call k of a name is frame k of that name's sequence. ``last_bytes`` is
    the size the last call's record takes in a container.

    Calling every tensor of frames F0, F1, ... in order gives bit for bit what ``decode`` returns
    for ``encode([F0, F1, ...])`` with the same pipeline and seed, except for pipelines whose
    reducer looks at a whole frame (``solo_frames``: tcs, bird, topk(scope=global)), where each
    call is a frame of its own (docs/python.md)."""

    def __init__(self, pipeline=None, *, preset=None, seed=0, nonfinite="refuse"):
        if pipeline is not None and preset is None and _is_preset(pipeline):
            pipeline, preset = None, pipeline
        preset, pipeline = _pipeline_args(preset, pipeline)
        self._core = _core.Compressor(preset, pipeline, _uint("seed", seed, 64), str(nonfinite))

    pipeline = property(lambda self: self._core.pipeline_text())
    stateful = property(lambda self: self._core.stateful())
    solo_frames = property(lambda self: self._core.solo_frames())
    last_bytes = property(lambda self: self._core.last_bytes())

    def calls(self, name):
        """How many times ``name`` went through (its next frame number)."""
        return self._core.calls(name)

    def roundtrip(self, name, array):
        _check_name(name)
        kind, arr = as_array(name, array)
        return to_numpy(*self._core.roundtrip(name, (name, kind, arr)))

    def encode(self, name, array):
        """Encodes the next call of ``name`` as roundtrip() does; returns (record, decoded): the
        record's bytes, to send, and what a receiver decodes from them."""
        _check_name(name)
        kind, arr = as_array(name, array)
        record, decoded = self._core.encode(name, (name, kind, arr))
        return record, to_numpy(*decoded)


class Decompressor:
    """The receiving end of a Compressor: made with the sender's pipeline and seed, it decodes the
    sender's records of each name in order, giving bit for bit what the sender's encode() and
    roundtrip() returned. It must see a sender's names in the order the sender first used them
    (the names' positions). A damaged record raises CorruptError and changes nothing."""

    def __init__(self, pipeline=None, *, preset=None, seed=0):
        if pipeline is not None and preset is None and _is_preset(pipeline):
            pipeline, preset = None, pipeline
        preset, pipeline = _pipeline_args(preset, pipeline)
        self._core = _core.Decompressor(preset, pipeline, _uint("seed", seed, 64))

    pipeline = property(lambda self: self._core.pipeline_text())

    def calls(self, name):
        return self._core.calls(name)

    def decode(self, name, record):
        """The tensor the record holds, as a numpy array (bfloat16 widened to float32)."""
        _check_name(name)
        if not isinstance(record, (bytes, bytearray, memoryview)):
            raise UsageError(f"a record is bytes, not {type(record).__name__}")
        return to_numpy(*self._core.decode(name, record))


def _check_name(name):
    if not isinstance(name, str):
        raise UsageError(f"tensor names are strings, not {type(name).__name__}")


def _is_preset(text):
    if not isinstance(text, str) or not text.strip():
        return False
    try:
        _core.canonical_pipeline(text, "")
        return True
    except UsageError:
        return False
