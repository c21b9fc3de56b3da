# SPDX-License-Identifier: BSD-3-Clause
"""Frames as the extension takes them: (name, kind, array) triples, each array C-contiguous and
little-endian, read in place when it already is (docs/python.md, "Arrays")."""

import ast
import sys
from collections.abc import Mapping

import numpy as np

from ._errors import InputError, UsageError

_FLOAT_KINDS = {2: "f16", 4: "f32", 8: "f64"}
_KIND_DTYPES = {"f16": np.dtype("<f2"), "f32": np.dtype("<f4"), "f64": np.dtype("<f8")}


def _c_order(arr):
    return arr if arr.flags.c_contiguous else np.array(arr, order="C", copy=True)


def _from_torch(name, t):
    torch = sys.modules["torch"]
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype == torch.bfloat16:
        # numpy has no bfloat16: the bits travel as 16-bit integers, tagged "bf16".
        return "bf16", t.contiguous().view(torch.int16).numpy()
    for resolve in ("resolve_conj", "resolve_neg"):
        if hasattr(t, resolve):
            t = getattr(t, resolve)()
    try:
        return None, t.contiguous().numpy()
    except TypeError as e:
        raise InputError(f"tensor {name}: {e}") from None


def as_array(name, value):
    """(kind, array) for one tensor: numpy float16/32/64 arrays as they are when C-contiguous
    and little-endian (else a converted copy); torch tensors (CPU memory shared; bfloat16 as its
    bits); any other dtype as "other", kept as its bytes."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        kind, value = _from_torch(name, value)
        if kind:
            return kind, value
    arr = np.asarray(value)
    dt = arr.dtype
    if dt.hasobject:
        raise InputError(f"tensor {name}: dtype {dt} holds Python objects, which gradcodec does not store")
    if dt.byteorder == ">" or (dt.byteorder == "=" and sys.byteorder == "big"):
        arr = arr.astype(dt.newbyteorder("<"))  # tensors are stored little-endian (the same values)
    if dt.kind == "f" and dt.itemsize in _FLOAT_KINDS:
        return _FLOAT_KINDS[dt.itemsize], _c_order(arr)
    return "other", _c_order(arr)


def frame_items(frame):
    """One frame (a mapping name -> array, in its order) as the extension takes it."""
    if not isinstance(frame, Mapping):
        raise UsageError(f"a frame is a mapping of names to arrays (a dict), not {type(frame).__name__}")
    items = []
    for name, value in frame.items():
        if not isinstance(name, str):
            raise UsageError(f"tensor names are strings, not {type(name).__name__} ({name!r})")
        kind, arr = as_array(name, value)
        items.append((name, kind, arr))
    return items


def frames_list(frames):
    """One frame (a mapping) or a sequence of them, as a list of frames."""
    if isinstance(frames, Mapping):
        return [frames]
    if isinstance(frames, (str, bytes)):
        raise UsageError("frames are a mapping of names to arrays, or a list of them")
    try:
        out = list(frames)
    except TypeError:
        raise UsageError(f"frames are a mapping of names to arrays, or a list of them, not {type(frames).__name__}") from None
    for f in out:
        if not isinstance(f, Mapping):
            raise UsageError(f"each frame is a mapping of names to arrays, not {type(f).__name__}")
    return out


def descr_of(dtype):
    """The text a pass-through dtype is stored with: the descr a .npy header holds ("<i8", "|b1",
    or the list of a structured dtype's fields, "[('a', '<i4'), ('b', '<f4')]")."""
    d = np.lib.format.dtype_to_descr(dtype)
    return d if isinstance(d, str) else repr(d)


def numpy_dtype(descr):
    """The numpy dtype of a stored descr (descr_of's text, or a .npy header's), or None when
    numpy has none for it."""
    try:
        return np.dtype(descr)
    except (TypeError, ValueError):
        pass
    if descr.startswith("["):
        try:
            return np.lib.format.descr_to_dtype(ast.literal_eval(descr))
        except (TypeError, ValueError, SyntaxError, MemoryError, RecursionError):
            pass
    return None


def dtype_of(kind, descr):
    """The dtype a tensor is reported with: numpy's for the floats and the other dtypes numpy
    reads, "bfloat16" for bfloat16 (decoded into float32 by the numpy API)."""
    if kind == "bf16":
        return "bfloat16"
    if kind in _KIND_DTYPES:
        return _KIND_DTYPES[kind]
    dt = numpy_dtype(descr)
    return descr if dt is None else dt


def to_numpy(kind, arr):
    """A decoded tensor for numpy: bfloat16 bits widened to float32 (exactly: every bfloat16 is
    a float32 whose low 16 bits are zero); the rest as decoded."""
    if kind == "bf16":
        wide = arr.astype(np.uint32)
        wide <<= np.uint32(16)  # in place: `wide << 16` of a 0-d array is a numpy scalar, with no view
        return wide.view(np.float32)
    return arr
