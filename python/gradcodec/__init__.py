# SPDX-License-Identifier: BSD-3-Clause
"""gradcodec: compress neural-network gradients into self-describing containers (docs/python.md).

    import gradcodec
    blob = gradcodec.encode({"fc.weight": w, "fc.bias": b}, preset="topk-1pct")
    grads = gradcodec.decode(blob)                 # dict name -> numpy array
    print(gradcodec.inspect("run.gcz")["totals"])

PyTorch pieces (GradientRecorder, ddp_comm_hook) are in gradcodec.torch; importing gradcodec does
not import torch.
"""

from ._core import version as _version
from ._errors import CorruptError, Error, InputError, InternalError, MismatchError, UsageError
from ._api import (Compressor, Container, Decompressor, Encoder, Frame, TensorInfo, bench, canonical_pipeline, decode, encode, inspect,
                   merge, open)

__version__ = _version().split()[-1]

__all__ = ["Compressor", "Container", "Decompressor", "CorruptError", "Encoder", "Error", "Frame", "InputError", "InternalError",
           "MismatchError", "TensorInfo", "UsageError", "bench", "canonical_pipeline", "decode", "encode", "inspect",
           "merge", "open"]
