#!/usr/bin/python3
"""Make gradcodec's test fixtures: real gradient snapshots of two small models.

Two models are trained for a few steps on scikit-learn's bundled `load_digits()` data set
(1797 images of 8x8 pixels, 10 classes; shipped inside the package, no download):

  cnn.*  conv1 -> bn1 (BatchNorm2d, training-mode batch statistics) -> ReLU -> conv2 -> ReLU
         -> 2x2 average pool -> fc
  tf.*   pre-LN transformer encoder over the 8 image rows as tokens: embed + learned position,
         2 blocks of (ln1 -> 4-head self-attention -> residual, ln2 -> MLP with tanh-GELU ->
         residual), ln_f, mean over tokens, head

The gradients are computed by the hand-written NumPy backpropagation below (float64), checked
against central finite differences (`--check`), and saved as float32 with the PyTorch
state_dict names and shapes (conv [out, in, kh, kw], linear [out, in]).

Outputs (under --out, default: the folder of this script):
  snapshots/step_000.npz .. step_003.npz   gradients at training steps 0, 10, 20, 30 (deflated)
  snapshots/step_000.h5  .. step_003.h5    the same tensors, nested groups (cnn/conv1/weight),
                                           chunked gzip datasets, root attribute `step`
  workers/worker_0.npz .. worker_3.npz     step 30, the batch split into 4 disjoint shards of
                                           16 (stored, not deflated); their mean is step_003
  README.md                                generated description (tensors, sizes, check result)

Every file is byte-for-byte reproducible: fixed seeds, single-threaded BLAS, zip entries with
a fixed date, HDF5 objects without modification times.

Usage:  /usr/bin/python3 test_data/make_snapshots.py [--out DIR]   # check, then write files
        /usr/bin/python3 test_data/make_snapshots.py --check       # gradient check only
Exit status: 0 on success, 1 when the gradient check or a consistency assertion fails.
"""

import os

# Single-threaded BLAS before numpy is imported: a multi-threaded GEMM may sum in a different
# order from run to run, and the files must be byte-identical.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse
import sys
import zipfile

import h5py
import numpy as np
from sklearn.datasets import load_digits

SEED = 20240601          # one seed for initialisation, batch order and the gradient check
BATCH = 64
STEPS = 31               # training steps 0..30
KEEP = (0, 10, 20, 30)   # steps whose gradients are saved
WORKER_STEP = 30         # step at which the per-worker gradients are saved
WORKERS = 4
LR = {"cnn": 0.05, "tf": 0.02}
MOMENTUM = 0.9
BN_EPS = 1e-5
LN_EPS = 1e-5
HEADS = 4
D_MODEL = 64
D_MLP = 256
N_BLOCKS = 2
ZIP_DATE = (1980, 1, 1, 0, 0, 0)   # earliest date a zip entry can carry
FD_STEP = 1e-5                     # central-difference step of the gradient check
FD_RTOL = 1e-6                     # an entry passes when |a - n| <= FD_RTOL*max(|a|,|n|)
FD_ATOL = 1e-9                     #   + FD_ATOL (round-off of the difference is ~5e-11)
FD_REL_MIN = 1e-4                  # relative errors are reported for |gradient| >= this
FD_PER_TENSOR = 4                  # random entries checked per tensor (per parameter state)


# --------------------------------------------------------------------------------------------
# Data

def load_data():
    """Digits as float64 images in [0, 1], shape [N, 8, 8], and int labels [N]."""
    d = load_digits()
    x = (d.images / 16.0).astype(np.float64)
    y = d.target.astype(np.int64)
    return x, y


def batch_indices(n, steps, batch, rng):
    """Mini-batch index arrays: consecutive slices of per-epoch permutations."""
    order = []
    while len(order) < steps * batch:
        order.extend(rng.permutation(n).tolist())
    order = np.array(order[: steps * batch])
    return [order[s * batch:(s + 1) * batch] for s in range(steps)]


# --------------------------------------------------------------------------------------------
# Shared pieces

def uniform(rng, shape, fan_in):
    """PyTorch's default Linear/Conv initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    bound = 1.0 / np.sqrt(fan_in)
    return rng.uniform(-bound, bound, size=shape)


def softmax_xent(logits, y):
    """Mean cross-entropy and its gradient with respect to the logits."""
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    n = logits.shape[0]
    loss = -np.log(p[np.arange(n), y]).mean()
    d = p.copy()
    d[np.arange(n), y] -= 1.0
    return loss, d / n, p


def dense(x, w, b=None):
    """x [..., in] @ w.T (+ b) as one 2-D GEMM (numpy's batched matmul is slow here)."""
    y = x.reshape(-1, x.shape[-1]) @ w.T
    if b is not None:
        y += b
    return y.reshape(*x.shape[:-1], w.shape[0])


def group_sum(arr, groups, axes):
    """Sum `arr` over `axes` once per batch slice in `groups` (axis 0 is the batch)."""
    return [arr[g].sum(axis=axes) for g in groups]


def group_tdot(a, b, groups, axes):
    """tensordot(a[g], b[g], axes) once per batch slice in `groups`."""
    return [np.tensordot(a[g], b[g], axes=axes) for g in groups]


# --------------------------------------------------------------------------------------------
# CNN: conv1 [16,1,3,3] -> bn1 -> ReLU -> conv2 [32,16,3,3] -> ReLU -> avgpool 2 -> fc [10,512]

def im2col3(x):
    """[B,C,H,W] -> [B, C*9, H*W] for a 3x3 kernel, stride 1, zero padding 1."""
    b, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.empty((b, c, 3, 3, h, w), dtype=x.dtype)
    for i in range(3):
        for j in range(3):
            cols[:, :, i, j] = xp[:, :, i:i + h, j:j + w]
    return cols.reshape(b, c * 9, h * w)


def col2im3(dcols, shape):
    """Adjoint of im2col3: [B, C*9, H*W] -> [B,C,H,W]."""
    b, c, h, w = shape
    d = dcols.reshape(b, c, 3, 3, h, w)
    dxp = np.zeros((b, c, h + 2, w + 2), dtype=dcols.dtype)
    for i in range(3):
        for j in range(3):
            dxp[:, :, i:i + h, j:j + w] += d[:, :, i, j]
    return dxp[:, :, 1:-1, 1:-1]


def cnn_init(rng):
    p = {}
    p["cnn.conv1.weight"] = uniform(rng, (16, 1, 3, 3), 1 * 9)
    p["cnn.conv1.bias"] = uniform(rng, (16,), 1 * 9)
    p["cnn.bn1.weight"] = np.ones(16)
    p["cnn.bn1.bias"] = np.zeros(16)
    p["cnn.conv2.weight"] = uniform(rng, (32, 16, 3, 3), 16 * 9)
    p["cnn.conv2.bias"] = uniform(rng, (32,), 16 * 9)
    p["cnn.fc.weight"] = uniform(rng, (10, 32 * 4 * 4), 32 * 4 * 4)
    p["cnn.fc.bias"] = uniform(rng, (10,), 32 * 4 * 4)
    return p


def cnn_forward(p, x):
    """x [B,8,8] -> logits [B,10], cache for the backward pass."""
    b = x.shape[0]
    x = x[:, None]                                                   # [B,1,8,8]
    c1 = im2col3(x)                                                  # [B,9,64]
    w1 = p["cnn.conv1.weight"].reshape(16, -1)
    z1 = np.matmul(w1, c1) + p["cnn.conv1.bias"][None, :, None]      # [B,16,64]
    mu = z1.mean(axis=(0, 2), keepdims=True)
    var = z1.var(axis=(0, 2), keepdims=True)
    inv = 1.0 / np.sqrt(var + BN_EPS)
    xhat = (z1 - mu) * inv
    n1 = xhat * p["cnn.bn1.weight"][None, :, None] + p["cnn.bn1.bias"][None, :, None]
    a1 = np.maximum(n1, 0.0)
    c2 = im2col3(a1.reshape(b, 16, 8, 8))                            # [B,144,64]
    w2 = p["cnn.conv2.weight"].reshape(32, -1)
    z2 = np.matmul(w2, c2) + p["cnn.conv2.bias"][None, :, None]      # [B,32,64]
    a2 = np.maximum(z2, 0.0)
    pooled = a2.reshape(b, 32, 4, 2, 4, 2).mean(axis=(3, 5))         # [B,32,4,4]
    flat = pooled.reshape(b, -1)                                     # [B,512] (C,H,W order)
    logits = dense(flat, p["cnn.fc.weight"], p["cnn.fc.bias"])
    cache = dict(c1=c1, xhat=xhat, inv=inv, n1=n1, c2=c2, z2=z2, flat=flat)
    kinks = np.packbits(n1 > 0).tobytes() + np.packbits(z2 > 0).tobytes()
    return logits, cache, kinks


def cnn_backward(p, cache, dlogits, groups):
    """Parameter gradients, one dict per batch slice in `groups`.

    The activation gradients are computed once for the whole batch; each parameter gradient
    is then the sum of the per-sample terms of one slice. With one slice covering the batch
    this is the ordinary gradient. With disjoint slices it is what each worker holds under
    data-parallel training with synchronised batch norm (statistics over the whole batch);
    the slices' gradients add up to the full-batch gradient.
    """
    b = dlogits.shape[0]
    out = [dict() for _ in groups]

    def put(name, values):
        for o, v in zip(out, values):
            o[name] = v

    put("cnn.fc.weight", group_tdot(dlogits, cache["flat"], groups, ([0], [0])))
    put("cnn.fc.bias", group_sum(dlogits, groups, 0))
    dpooled = (dlogits @ p["cnn.fc.weight"]).reshape(b, 32, 4, 1, 4, 1)
    da2 = np.broadcast_to(dpooled / 4.0, (b, 32, 4, 2, 4, 2)).reshape(b, 32, 64)
    dz2 = da2 * (cache["z2"] > 0)
    put("cnn.conv2.weight", [w.reshape(32, 16, 3, 3)
                             for w in group_tdot(dz2, cache["c2"], groups, ([0, 2], [0, 2]))])
    put("cnn.conv2.bias", group_sum(dz2, groups, (0, 2)))
    dc2 = np.matmul(p["cnn.conv2.weight"].reshape(32, -1).T, dz2)    # [B,144,64]
    da1 = col2im3(dc2, (b, 16, 8, 8)).reshape(b, 16, 64)
    dn1 = da1 * (cache["n1"] > 0)
    xhat = cache["xhat"]
    put("cnn.bn1.weight", group_sum(dn1 * xhat, groups, (0, 2)))
    put("cnn.bn1.bias", group_sum(dn1, groups, (0, 2)))
    dxhat = dn1 * p["cnn.bn1.weight"][None, :, None]
    m = dxhat.shape[0] * dxhat.shape[2]
    dz1 = cache["inv"] / m * (m * dxhat - dxhat.sum(axis=(0, 2), keepdims=True)
                              - xhat * (dxhat * xhat).sum(axis=(0, 2), keepdims=True))
    put("cnn.conv1.weight", [w.reshape(16, 1, 3, 3)
                             for w in group_tdot(dz1, cache["c1"], groups, ([0, 2], [0, 2]))])
    put("cnn.conv1.bias", group_sum(dz1, groups, (0, 2)))
    return out


# --------------------------------------------------------------------------------------------
# Transformer encoder over the 8 image rows (tokens of 8 pixels)

def tf_init(rng):
    p = {}
    p["tf.embed.weight"] = uniform(rng, (D_MODEL, 8), 8)
    p["tf.embed.bias"] = uniform(rng, (D_MODEL,), 8)
    p["tf.pos"] = rng.normal(0.0, 0.02, size=(8, D_MODEL))
    for i in range(N_BLOCKS):
        q = f"tf.blocks.{i}."
        p[q + "ln1.weight"] = np.ones(D_MODEL)
        p[q + "ln1.bias"] = np.zeros(D_MODEL)
        for proj in ("q", "k", "v", "o"):
            p[q + f"attn.{proj}.weight"] = uniform(rng, (D_MODEL, D_MODEL), D_MODEL)
            p[q + f"attn.{proj}.bias"] = uniform(rng, (D_MODEL,), D_MODEL)
        p[q + "ln2.weight"] = np.ones(D_MODEL)
        p[q + "ln2.bias"] = np.zeros(D_MODEL)
        p[q + "mlp.fc1.weight"] = uniform(rng, (D_MLP, D_MODEL), D_MODEL)
        p[q + "mlp.fc1.bias"] = uniform(rng, (D_MLP,), D_MODEL)
        p[q + "mlp.fc2.weight"] = uniform(rng, (D_MODEL, D_MLP), D_MLP)
        p[q + "mlp.fc2.bias"] = uniform(rng, (D_MODEL,), D_MLP)
    p["tf.ln_f.weight"] = np.ones(D_MODEL)
    p["tf.ln_f.bias"] = np.zeros(D_MODEL)
    p["tf.head.weight"] = uniform(rng, (10, D_MODEL), D_MODEL)
    p["tf.head.bias"] = uniform(rng, (10,), D_MODEL)
    return p


def ln_forward(x, w, b):
    mu = x.mean(axis=-1, keepdims=True)
    inv = 1.0 / np.sqrt(x.var(axis=-1, keepdims=True) + LN_EPS)
    xhat = (x - mu) * inv
    return xhat * w + b, (xhat, inv)


def ln_backward(dy, w, c):
    xhat, inv = c
    dxhat = dy * w
    d = xhat.shape[-1]
    dx = inv / d * (d * dxhat - dxhat.sum(axis=-1, keepdims=True)
                    - xhat * (dxhat * xhat).sum(axis=-1, keepdims=True))
    return dx


GELU_C = np.sqrt(2.0 / np.pi)


def gelu(u):
    """GELU, tanh approximation (PyTorch's approximate='tanh')."""
    t = np.tanh(GELU_C * (u + 0.044715 * (u * u * u)))
    return 0.5 * u * (1.0 + t), t


def gelu_grad(u, t):
    return 0.5 * (1.0 + t) + 0.5 * u * (1.0 - t * t) * GELU_C * (1.0 + 3 * 0.044715 * u * u)


def split_heads(x):
    b, t, _ = x.shape
    return x.reshape(b, t, HEADS, D_MODEL // HEADS).transpose(0, 2, 1, 3)   # [B,H,T,dh]


def merge_heads(x):
    b, _, t, _ = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, t, D_MODEL)


def tf_forward(p, x):
    """x [B,8,8] (rows are tokens) -> logits [B,10], cache for the backward pass."""
    cache = {"x": x}
    h = dense(x, p["tf.embed.weight"], p["tf.embed.bias"]) + p["tf.pos"][None]
    scale = 1.0 / np.sqrt(D_MODEL // HEADS)
    for i in range(N_BLOCKS):
        q = f"tf.blocks.{i}."
        c = {}
        a, c["ln1"] = ln_forward(h, p[q + "ln1.weight"], p[q + "ln1.bias"])
        c["a"] = a
        qh = split_heads(dense(a, p[q + "attn.q.weight"], p[q + "attn.q.bias"]))
        kh = split_heads(dense(a, p[q + "attn.k.weight"], p[q + "attn.k.bias"]))
        vh = split_heads(dense(a, p[q + "attn.v.weight"], p[q + "attn.v.bias"]))
        s = np.matmul(qh, kh.transpose(0, 1, 3, 2)) * scale                    # [B,H,T,T]
        s -= s.max(axis=-1, keepdims=True)
        pr = np.exp(s)
        pr /= pr.sum(axis=-1, keepdims=True)
        ctx = merge_heads(np.matmul(pr, vh))                                    # [B,T,D]
        c.update(qh=qh, kh=kh, vh=vh, pr=pr, ctx=ctx)
        h = h + dense(ctx, p[q + "attn.o.weight"], p[q + "attn.o.bias"])
        m, c["ln2"] = ln_forward(h, p[q + "ln2.weight"], p[q + "ln2.bias"])
        c["m"] = m
        u = dense(m, p[q + "mlp.fc1.weight"], p[q + "mlp.fc1.bias"])
        g, t = gelu(u)
        c.update(u=u, t=t, g=g)
        h = h + dense(g, p[q + "mlp.fc2.weight"], p[q + "mlp.fc2.bias"])
        cache[i] = c
    hf, cache["ln_f"] = ln_forward(h, p["tf.ln_f.weight"], p["tf.ln_f.bias"])
    cache["hf"] = hf
    z = hf.mean(axis=1)                                                         # [B,D]
    cache["z"] = z
    logits = dense(z, p["tf.head.weight"], p["tf.head.bias"])
    return logits, cache, b""                                                   # smooth: no kinks


def tf_backward(p, cache, dlogits, groups):
    """Parameter gradients, one dict per batch slice in `groups` (see cnn_backward)."""
    out = [dict() for _ in groups]

    def put(name, values):
        for o, v in zip(out, values):
            o[name] = v

    def linear(prefix, x, dy):
        """Gradients of y = x W^T + b over token-major x [B,T,in], dy [B,T,out]; returns dx."""
        put(prefix + ".weight", group_tdot(dy, x, groups, ([0, 1], [0, 1])))
        put(prefix + ".bias", group_sum(dy, groups, (0, 1)))
        return dense(dy, p[prefix + ".weight"].T)

    def layernorm(prefix, dy, c):
        put(prefix + ".weight", group_sum(dy * c[0], groups, (0, 1)))
        put(prefix + ".bias", group_sum(dy, groups, (0, 1)))
        return ln_backward(dy, p[prefix + ".weight"], c)

    put("tf.head.weight", group_tdot(dlogits, cache["z"], groups, ([0], [0])))
    put("tf.head.bias", group_sum(dlogits, groups, 0))
    dz = dlogits @ p["tf.head.weight"]
    dhf = np.broadcast_to(dz[:, None, :] / 8.0, cache["hf"].shape)
    dh = layernorm("tf.ln_f", dhf, cache["ln_f"])
    scale = 1.0 / np.sqrt(D_MODEL // HEADS)
    for i in reversed(range(N_BLOCKS)):
        q = f"tf.blocks.{i}."
        c = cache[i]
        # MLP branch: h += fc2(gelu(fc1(ln2(h))))
        dg = linear(q + "mlp.fc2", c["g"], dh)
        du = dg * gelu_grad(c["u"], c["t"])
        dm = linear(q + "mlp.fc1", c["m"], du)
        dh = dh + layernorm(q + "ln2", dm, c["ln2"])
        # attention branch: h += o(attention(ln1(h)))
        dctx = linear(q + "attn.o", c["ctx"], dh)
        dctxh = split_heads(dctx)
        pr = c["pr"]
        dpr = np.matmul(dctxh, c["vh"].transpose(0, 1, 3, 2))
        dvh = np.matmul(pr.transpose(0, 1, 3, 2), dctxh)
        ds = pr * (dpr - (dpr * pr).sum(axis=-1, keepdims=True)) * scale
        dqh = np.matmul(ds, c["kh"])
        dkh = np.matmul(ds.transpose(0, 1, 3, 2), c["qh"])
        da = (linear(q + "attn.q", c["a"], merge_heads(dqh))
              + linear(q + "attn.k", c["a"], merge_heads(dkh))
              + linear(q + "attn.v", c["a"], merge_heads(dvh)))
        dh = dh + layernorm(q + "ln1", da, c["ln1"])
    linear("tf.embed", cache["x"], dh)
    put("tf.pos", group_sum(dh, groups, 0))
    return out


# --------------------------------------------------------------------------------------------
# Models: name -> (init, forward, backward)

MODELS = {
    "cnn": (cnn_init, cnn_forward, cnn_backward),
    "tf": (tf_init, tf_forward, tf_backward),
}


def loss_and_grads(model, p, x, y, groups=None):
    """Mean cross-entropy loss, accuracy, and gradients (one dict per group, in p's order)."""
    _, forward, backward = MODELS[model]
    if groups is None:
        groups = [slice(None)]
    logits, cache, _ = forward(p, x)
    loss, dlogits, prob = softmax_xent(logits, y)
    acc = float((prob.argmax(axis=1) == y).mean())
    grads = backward(p, cache, dlogits, groups)
    grads = [{k: g[k] for k in p} for g in grads]        # state_dict order
    for g in grads:
        for k in p:
            assert g[k].shape == p[k].shape, (k, g[k].shape, p[k].shape)
    return loss, acc, grads


def loss_only(model, p, x, y):
    logits, _, kinks = MODELS[model][1](p, x)
    return softmax_xent(logits, y)[0], kinks


# --------------------------------------------------------------------------------------------
# Gradient check

def grad_check(model, p, x, y, rng):
    """Central differences on FD_PER_TENSOR random entries of every tensor.

    An entry whose +-h perturbation flips a ReLU (the loss is not differentiable across the
    kink) is skipped and another is drawn. Returns {name: [(analytic, numeric), ...]}.
    """
    _, _, (g,) = loss_and_grads(model, p, x, y)
    _, kinks0 = loss_only(model, p, x, y)
    pairs = {}
    for name, w in p.items():
        pairs[name] = []
        tries = 0
        while len(pairs[name]) < FD_PER_TENSOR and tries < 50 * FD_PER_TENSOR:
            tries += 1
            idx = tuple(int(rng.integers(0, s)) for s in w.shape)
            old = w[idx]
            w[idx] = old + FD_STEP
            lp, kp = loss_only(model, p, x, y)
            w[idx] = old - FD_STEP
            lm, km = loss_only(model, p, x, y)
            w[idx] = old
            if kp != kinks0 or km != kinks0:
                continue
            pairs[name].append((float(g[name][idx]), (lp - lm) / (2 * FD_STEP)))
    return pairs


def check_stats(pairs):
    """(entries, max rel err over entries with |g| >= FD_REL_MIN, max abs err, passed)."""
    rel = [abs(a - n) / max(abs(a), abs(n)) for a, n in pairs if max(abs(a), abs(n)) >= FD_REL_MIN]
    ab = [abs(a - n) for a, n in pairs]
    ok = len(pairs) >= FD_PER_TENSOR and all(
        abs(a - n) <= FD_RTOL * max(abs(a), abs(n)) + FD_ATOL for a, n in pairs)
    return len(pairs), max(rel, default=float("nan")), max(ab, default=float("nan")), ok


# --------------------------------------------------------------------------------------------
# Training

def train(x, y):
    """Train both models with SGD + momentum; returns the records of the saved steps.

    Result: dict with 'steps' {step: {name: float64 grad}}, 'stats' {step: {model: (loss,
    acc)}}, 'workers' [M dicts], 'params' {model: params at WORKER_STEP}, 'batch' indices.
    """
    rng = np.random.default_rng(SEED)
    params = {m: MODELS[m][0](rng) for m in MODELS}
    batches = batch_indices(len(y), STEPS, BATCH, rng)
    vel = {m: {k: np.zeros_like(v) for k, v in params[m].items()} for m in MODELS}
    shard = BATCH // WORKERS
    groups = [slice(w * shard, (w + 1) * shard) for w in range(WORKERS)]
    rec = {"steps": {}, "stats": {}, "workers": None, "params": {}, "batch": None}
    for step in range(STEPS):
        idx = batches[step]
        xb, yb = x[idx], y[idx]
        grads_all, stats = {}, {}
        for m in MODELS:
            loss, acc, (g,) = loss_and_grads(m, params[m], xb, yb)
            stats[m] = (loss, acc)
            grads_all.update(g)
            if step == WORKER_STEP:
                _, _, wg = loss_and_grads(m, params[m], xb, yb, groups)
                if rec["workers"] is None:
                    rec["workers"] = [dict() for _ in range(WORKERS)]
                for w in range(WORKERS):
                    # each worker's gradient of its own mean loss: M x its share of the sum
                    rec["workers"][w].update({k: WORKERS * v for k, v in wg[w].items()})
                rec["params"][m] = {k: v.copy() for k, v in params[m].items()}
                rec["batch"] = idx
            for k in params[m]:
                vel[m][k] = MOMENTUM * vel[m][k] + g[k]
                params[m][k] -= LR[m] * vel[m][k]
        if step in KEEP:
            rec["steps"][step] = grads_all
            rec["stats"][step] = stats
    return rec


def check_workers(rec, x, y):
    """Asserts: the workers' mean is the full-batch gradient of step WORKER_STEP, and for the
    transformer (no cross-sample coupling) each worker's gradient equals a plain backward pass
    over its shard alone."""
    full = rec["steps"][WORKER_STEP]
    workers = rec["workers"]
    # Each tensor is compared on the scale of its own values, floored at 1e-6 of the largest
    # gradient: cnn.conv1.bias and attn.k.bias have zero gradients (rounding noise only).
    floor = 1e-6 * max(np.abs(g).max() for g in full.values())
    worst = 0.0
    for k, g in full.items():
        mean = sum(w[k] for w in workers) / WORKERS
        scale = max(np.abs(g).max(), max(np.abs(w[k]).max() for w in workers), floor)
        worst = max(worst, np.abs(mean - g).max() / scale)
    assert worst < 1e-10, f"worker mean differs from the full-batch gradient: {worst:.3e}"
    shard = BATCH // WORKERS
    idx = rec["batch"]
    worst_shard = 0.0
    for w in range(WORKERS):
        sl = idx[w * shard:(w + 1) * shard]
        _, _, (g,) = loss_and_grads("tf", rec["params"]["tf"], x[sl], y[sl])
        for k, v in g.items():
            scale = max(np.abs(v).max(), floor)
            worst_shard = max(worst_shard, np.abs(workers[w][k] - v).max() / scale)
    assert worst_shard < 1e-10, f"tf worker gradient differs from its shard's: {worst_shard:.3e}"
    return worst, worst_shard


def check_written_workers(out):
    """The stored float32 workers average to the stored step_003 gradient up to float32
    rounding; returns the largest difference relative to the largest entry of the tensor
    (full-batch or worker, whichever is larger: cnn.conv1.bias is ~0 only in the mean),
    floored at 1e-6 of the largest entry of all."""
    last = f"snapshots/step_{len(KEEP) - 1:03d}.npz"
    with np.load(os.path.join(out, last)) as z:
        full = {k: z[k].astype(np.float64) for k in z.keys()}
    mean = {k: 0.0 for k in full}
    scale = {k: np.abs(v).max() for k, v in full.items()}
    for w in range(WORKERS):
        with np.load(os.path.join(out, f"workers/worker_{w}.npz")) as z:
            assert list(z.keys()) == list(full), w
            for k in full:
                mean[k] = mean[k] + z[k].astype(np.float64) / WORKERS
                scale[k] = max(scale[k], np.abs(z[k]).max())
    # floor for tensors that are rounding noise everywhere (attn.k.bias)
    floor = 1e-6 * max(scale.values())
    worst = max(np.abs(mean[k] - v).max() / max(scale[k], floor) for k, v in full.items())
    assert worst < 1e-6, f"stored workers do not average to {last}: {worst:.1e}"
    return worst


# --------------------------------------------------------------------------------------------
# Writers (deterministic)

def write_npz(path, tensors, deflate):
    """An .npz as np.savez / np.savez_compressed write it (member NAME.npy, NPY format 1.0,
    zip64 extra fields), but with a fixed entry date so the bytes never change."""
    tmp = path + ".tmp"
    method = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
    with zipfile.ZipFile(tmp, "w", compression=method, allowZip64=True) as zf:
        for name, arr in tensors.items():
            info = zipfile.ZipInfo(name + ".npy", date_time=ZIP_DATE)
            info.compress_type = method
            with zf.open(info, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.ascontiguousarray(arr), allow_pickle=False)
    os.replace(tmp, path)


def h5_group(parent, name):
    """A child group created without a modification time (h5py's high-level create_group
    cannot switch time tracking off)."""
    if name in parent:
        return parent[name]
    gcpl = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
    gcpl.set_obj_track_times(False)
    gid = h5py.h5g.create(parent.id, name.encode(), gcpl=gcpl)
    return h5py.Group(gid)


def write_h5(path, tensors, step):
    """One HDF5 file: nested groups for the dotted names, chunked gzip datasets, and the
    integer attribute `step` on the root group."""
    tmp = path + ".tmp"
    fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
    fcpl.set_obj_track_times(False)
    fid = h5py.h5f.create(tmp.encode(), h5py.h5f.ACC_TRUNC, fcpl=fcpl)
    with h5py.File(fid) as f:
        f.attrs.create("step", step, dtype=np.int64)
        for name, arr in tensors.items():
            *dirs, leaf = name.split(".")
            g = f
            for d in dirs:
                g = h5_group(g, d)
            g.create_dataset(leaf, data=arr, chunks=True, compression="gzip",
                             compression_opts=6, shuffle=True, track_times=False)
    os.replace(tmp, path)


def read_h5(path):
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                out[name.replace("/", ".")] = obj[()]
        f.visititems(visit)
        step = int(f.attrs["step"])
    return out, step


# --------------------------------------------------------------------------------------------
# README

def fmt_size(n):
    return f"{n:,} B ({n / 1e6:.3f} MB)"


def write_readme(path, rec, check_pairs, worker_err, f32_err, files, out_dir):
    first = rec["steps"][KEEP[0]]
    counts = {m: sum(v.size for k, v in first.items() if k.startswith(m + ".")) for m in MODELS}
    total = sum(counts.values())
    L = []
    a = L.append
    a("# test_data — real gradient snapshots")
    a("")
    a("Generated by `make_snapshots.py`; do not edit by hand. Regenerate (byte-identical) with")
    a("")
    a("    /usr/bin/python3 test_data/make_snapshots.py          # gradient check, then all files")
    a("    /usr/bin/python3 test_data/make_snapshots.py --check  # gradient check only (exit 1 on failure)")
    a("")
    a("Needs NumPy, h5py and scikit-learn (Debian: python3-numpy python3-h5py python3-sklearn).")
    a("No network, no torch.")
    a("")
    a("## What the gradients are")
    a("")
    a("True gradients of the mean cross-entropy loss, computed by the NumPy backpropagation in the")
    a("script (float64, saved as float32), while two small models train on scikit-learn's bundled")
    a("`load_digits()` (1797 images 8x8, pixel values /16 into [0, 1], 10 classes).")
    a("")
    a(f"- Seed {SEED} (`numpy.random.default_rng`) for initialisation (PyTorch defaults:")
    a("  U(±1/sqrt(fan_in)) for conv/linear weights and biases, norm weight 1 and bias 0,")
    a("  `tf.pos` ~ N(0, 0.02²)) and for the batch order (per-epoch permutations of the data set).")
    a(f"- Mini-batches of {BATCH}, steps 0..{STEPS - 1}; SGD with momentum {MOMENTUM}, learning rate "
      f"{LR['cnn']} (cnn) and {LR['tf']} (tf). Both models see the same batches.")
    a("- Saved steps: " + ", ".join(str(s) for s in KEEP) + " (the gradient at that step, before its update).")
    a("- **cnn**: conv1 (3x3, pad 1) → bn1 (BatchNorm2d, training-mode batch statistics, eps 1e-5)")
    a("  → ReLU → conv2 (3x3, pad 1) → ReLU → 2x2 average pool → flatten (C, H, W) → fc.")
    a("  A conv bias followed by batch norm cannot change the output, so `cnn.conv1.bias` has a")
    a("  zero gradient up to rounding (rms ~1e-17), as it has in PyTorch: real, and an edge case")
    a("  worth keeping.")
    a(f"- **tf**: each image row (8 pixels) is a token; embed + learned position `tf.pos`; {N_BLOCKS} pre-LN")
    a(f"  encoder blocks (h += o(MHA(ln1(h))), {HEADS} heads of {D_MODEL // HEADS}, softmax, no mask;")
    a("  h += fc2(GELU_tanh(fc1(ln2(h))))); ln_f; mean over the 8 tokens; head. LayerNorm eps 1e-5.")
    a("  A key bias adds the same amount to every score of a query, which softmax ignores, so")
    a("  `tf.blocks.*.attn.k.bias` also has a zero gradient up to rounding (rms ~1e-19).")
    a("")
    a("Loss / accuracy on the training batch at the saved steps:")
    a("")
    a("| step | cnn loss | cnn acc | tf loss | tf acc |")
    a("| ---: | ---: | ---: | ---: | ---: |")
    for s in KEEP:
        st = rec["stats"][s]
        a(f"| {s} | {st['cnn'][0]:.4f} | {st['cnn'][1]:.3f} | {st['tf'][0]:.4f} | {st['tf'][1]:.3f} |")
    a("")
    a("## Files")
    a("")
    a("| file | contents | size |")
    a("| --- | --- | ---: |")
    for rel, what in files:
        a(f"| `{rel}` | {what} | {os.path.getsize(os.path.join(out_dir, rel)):,} B |")
    total_bytes = sum(os.path.getsize(os.path.join(out_dir, rel)) for rel, _ in files)
    a(f"| total | | {total_bytes:,} B |")
    a("")
    a("- `.npz`: one member `NAME.npy` per tensor, in state_dict order (NPY format 1.0,")
    a("  little-endian `<f4`, C order), zip64 extra fields as numpy writes them, entry date fixed")
    a("  to 1980-01-01 00:00. Snapshots are deflated, worker files stored; the bytes are identical")
    a("  to what numpy 1.24's `np.savez_compressed` / `np.savez` write, so both zip methods of real")
    a("  numpy output are covered.")
    a("- `.h5`: the dotted name becomes nested groups (`cnn.conv1.weight` → `/cnn/conv1/weight`);")
    a("  float32 datasets, chunked (h5py's automatic chunk shape), shuffle + gzip level 6, no")
    a("  object times, h5py's default (earliest) file format; root attribute `step` (int64")
    a("  scalar), no other attributes or datasets. Groups have no creation-order index, so HDF5")
    a("  lists members alphabetically (`cnn.bn1.*` before `cnn.conv1.*`), unlike the `.npz`.")
    a("  The tensors are bit-identical to the `.npz` of the same step.")
    a(f"- `workers/worker_w.npz`: step {WORKER_STEP}, same parameters and batch as `step_003`. The batch")
    a(f"  of {BATCH} is split into {WORKERS} disjoint contiguous shards of {BATCH // WORKERS}; worker w holds the")
    a("  gradient of the mean loss over its shard. For the transformer that is a plain backward")
    a("  pass over the shard alone. For the CNN the batch-norm statistics are those of the whole")
    a("  batch, as with synchronised batch norm (PyTorch's SyncBatchNorm under DDP), which makes")
    a("  the mean of the workers exactly the full-batch gradient. In float64 the mean differs from")
    a(f"  the full-batch gradient by {worker_err[0]:.1e} (relative) and each tf worker from a backward pass")
    a(f"  over its shard by {worker_err[1]:.1e}; as stored (float32) the mean of the four files matches")
    a(f"  `step_003.npz` to {f32_err:.1e} (relative to the tensor's largest entry in any of these files).")
    a("  Note `cnn.conv1.bias`: each worker's gradient is large (its shard's share of the")
    a("  batch-norm mean term), yet the four cancel exactly — a real case where the mean is zero.")
    a("")
    a(f"## Tensors: {total:,} parameters (every file has this list, in this order in the .npz)")
    a("")
    a(f"cnn: {counts['cnn']:,} parameters; tf: {counts['tf']:,} parameters; float32 payload "
      f"{total * 4:,} B per snapshot.")
    a("")
    a("| name | shape | count | rms at step 0 | rms at step 30 |")
    a("| --- | --- | ---: | ---: | ---: |")
    last = rec["steps"][KEEP[-1]]
    for k, v in first.items():
        shape = "[" + ", ".join(str(s) for s in v.shape) + "]"
        r0 = float(np.sqrt(np.mean(v.astype(np.float32).astype(np.float64) ** 2)))
        r1 = float(np.sqrt(np.mean(last[k].astype(np.float32).astype(np.float64) ** 2)))
        a(f"| `{k}` | {shape} | {v.size:,} | {r0:.3e} | {r1:.3e} |")
    a("")
    a("## Gradient check")
    a("")
    a(f"Central differences in float64 (h = {FD_STEP:g}) on {FD_PER_TENSOR} random entries of every tensor,")
    a("at the initial parameters and again at the step-30 parameters, on 16 training images.")
    a("An entry whose ±h perturbation flips a ReLU is skipped and another drawn. An entry passes")
    a(f"when |analytic − numeric| ≤ {FD_RTOL:g}·max(|analytic|, |numeric|) + {FD_ATOL:g}; the absolute")
    a("round-off of the difference quotient is about eps·loss/h ≈ 5e-11. Relative error =")
    a(f"|analytic − numeric| / max(|analytic|, |numeric|), shown over entries with |gradient| ≥ {FD_REL_MIN:g}")
    a("(a dash: no sampled entry was that large).")
    a("")
    a("| tensor | entries | max rel err | max abs err |")
    a("| --- | ---: | ---: | ---: |")
    stats = {k: check_stats(v) for k, v in check_pairs.items()}
    for name, (n, rel, ab, _) in stats.items():
        rel_s = "–" if rel != rel else f"{rel:.1e}"
        a(f"| `{name}` | {n} | {rel_s} | {ab:.1e} |")
    rels = [s[1] for s in stats.values() if s[1] == s[1]]
    a("")
    a(f"All entries pass. Worst relative error: {max(rels):.1e}; worst absolute error: "
      f"{max(s[2] for s in stats.values()):.1e}.")
    a("")
    with open(path, "w") as f:
        f.write("\n".join(L))


# --------------------------------------------------------------------------------------------

def run_check(x, y, rec_params=None):
    """Gradient check of both models at the initial parameters and (if given) trained ones."""
    rng = np.random.default_rng(SEED + 1)
    sel = rng.choice(len(y), size=16, replace=False)
    xb, yb = x[sel], y[sel]
    g0 = np.random.default_rng(SEED)          # the generator sequence of train()
    states = [("initial", {m: MODELS[m][0](g0) for m in MODELS})]
    if rec_params is not None:
        states.append((f"step {WORKER_STEP}", rec_params))
    merged, ok = {}, True
    for label, params in states:
        pairs = {}
        for m in MODELS:
            p = {k: v.copy() for k, v in params[m].items()}
            pairs.update(grad_check(m, p, xb, yb, rng))
        stats = {k: check_stats(v) for k, v in pairs.items()}
        print(f"gradient check ({label}): {len(stats)} tensors x {FD_PER_TENSOR} entries, "
              f"max rel err {max(s[1] for s in stats.values()):.2e} (|g| >= {FD_REL_MIN:g}), "
              f"max abs err {max(s[2] for s in stats.values()):.2e}")
        for name, (n, rel, ab, good) in stats.items():
            ok = ok and good
            print(f"  {'ok  ' if good else 'FAIL'} {name:32s} n={n} rel={rel:.2e} abs={ab:.2e}")
        for k, v in pairs.items():
            merged.setdefault(k, []).extend(v)
    return ok, merged


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="run the gradient check only")
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)),
                    help="output folder (default: the folder of this script)")
    args = ap.parse_args()

    x, y = load_data()
    if args.check:
        rec = train(x, y)
        ok, _ = run_check(x, y, rec["params"])
        worker_err = check_workers(rec, x, y)
        print(f"workers: mean vs full-batch {worker_err[0]:.1e}, tf shard {worker_err[1]:.1e}")
        return 0 if ok else 1

    rec = train(x, y)
    ok, check_pairs = run_check(x, y, rec["params"])
    if not ok:
        print("gradient check failed; no files written", file=sys.stderr)
        return 1
    worker_err = check_workers(rec, x, y)

    out = args.out
    os.makedirs(os.path.join(out, "snapshots"), exist_ok=True)
    os.makedirs(os.path.join(out, "workers"), exist_ok=True)
    files = []
    for i, s in enumerate(KEEP):
        t32 = {k: v.astype(np.float32) for k, v in rec["steps"][s].items()}
        rel = f"snapshots/step_{i:03d}.npz"
        write_npz(os.path.join(out, rel), t32, deflate=True)
        files.append((rel, f"gradients of training step {s}"))
        rel_h5 = f"snapshots/step_{i:03d}.h5"
        write_h5(os.path.join(out, rel_h5), t32, s)
        files.append((rel_h5, f"same tensors as `step_{i:03d}.npz`, attribute step={s}"))
        # read back both and compare bit for bit
        with np.load(os.path.join(out, rel)) as z:
            assert list(z.keys()) == list(t32), rel
            for k, v in t32.items():
                assert z[k].dtype == np.float32 and np.array_equal(z[k], v), (rel, k)
        back, step = read_h5(os.path.join(out, rel_h5))
        assert step == s and set(back) == set(t32), rel_h5
        for k, v in t32.items():
            assert back[k].dtype == np.float32 and np.array_equal(back[k], v), (rel_h5, k)
    for w, g in enumerate(rec["workers"]):
        rel = f"workers/worker_{w}.npz"
        write_npz(os.path.join(out, rel), {k: v.astype(np.float32) for k, v in g.items()},
                  deflate=False)
        files.append((rel, f"step {WORKER_STEP}, worker {w} of {WORKERS} (samples "
                           f"{w * (BATCH // WORKERS)}..{(w + 1) * (BATCH // WORKERS) - 1} of the batch)"))
    f32_err = check_written_workers(out)
    write_readme(os.path.join(out, "README.md"), rec, check_pairs, worker_err, f32_err, files,
                 out)
    for rel, _ in files:
        print(f"{os.path.getsize(os.path.join(out, rel)):>9,}  {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
