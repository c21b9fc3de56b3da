#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The real-gradient benchmark corpus (issue 44): the gradients of a ResNet-18, a VGG16-BN and a
transformer encoder after a few real SGD steps, saved for several consecutive steps (for the
stateful presets), made with PyTorch (Debian's python3-torch) from random inputs.

    /usr/bin/python3 bench/real_gradients.py OUT_DIR [--models resnet18,vgg16bn,transformer]
                                              [--warmup 5] [--steps 3] [--batch 16] [--seed 0] [--tiny]

Writes OUT_DIR/MODEL/step_NNN.safetensors (float32, the parameters' gradients in
named_parameters() order) for NNN = 0 .. steps-1, after `warmup` SGD steps (lr 0.05, momentum
0.9) that move the weights away from their initialisation, and OUT_DIR/MODEL/README.txt with
what was made. Every step's batch is new random data (CIFAR-sized 3x32x32 images with random
labels for the CNNs, random token ids for the transformer), so consecutive steps are the
correlated-but-different gradients of training. The models are written here from their papers'
shapes (He et al. 2016 ResNet-18 in its CIFAR form; Simonyan & Zisserman 2015 VGG16 with
batch norm, CIFAR head; Vaswani et al. 2017 encoder, 6 layers, d_model 512, 8 heads, feed-forward
2048, a 32k vocabulary) — torchvision is not needed. --tiny shrinks every width by 8 (a check of
the script: tests/cli/cli_real_gradients.py).

Sizes: resnet18 11,173,962 parameters, vgg16bn 15,253,578, transformer 51,747,072 (its embedding and
output head 16.4M each).
"""
import argparse
import json
import os
import struct
import time

import numpy as np
import torch
from torch import nn


def conv_bn(cin, cout, stride=1):
    return [nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)]


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1, self.bn1 = conv_bn(cin, cout, stride)
        self.conv2, self.bn2 = conv_bn(cout, cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class ResNet18(nn.Module):
    def __init__(self, width=64, classes=10):
        super().__init__()
        self.conv1, self.bn1 = conv_bn(3, width)
        layers, cin = [], width
        for i, stride in enumerate([1, 2, 2, 2]):
            cout = width * 2 ** i
            layers.append(nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)))
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


VGG16 = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]


class VGG16BN(nn.Module):
    def __init__(self, scale=1, classes=10):
        super().__init__()
        layers, cin = [], 3
        for v in VGG16:
            if v == "M":
                layers.append(nn.MaxPool2d(2))
            else:
                cout = v // scale
                layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]
                cin = cout
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(cin, cin), nn.ReLU(True), nn.Linear(cin, cin), nn.ReLU(True),
                                        nn.Linear(cin, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


class Transformer(nn.Module):
    def __init__(self, scale=1, vocab=32000, d=512, heads=8, ff=2048, layers=6, seq=64):
        super().__init__()
        d, ff, vocab = d // scale, ff // scale, vocab // scale
        self.seq, self.vocab = seq, vocab
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, max(1, heads // scale), ff, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens) + self.pos))


def batch_for(name, model, batch, gen):
    """A new random batch and its loss function's target."""
    if name == "transformer":
        tokens = torch.randint(0, model.vocab, (batch, model.seq), generator=gen)
        return tokens, torch.randint(0, model.vocab, (batch, model.seq), generator=gen)
    return torch.randn(batch, 3, 32, 32, generator=gen), torch.randint(0, 10, (batch,), generator=gen)


def loss_of(name, model, x, y):
    out = model(x)
    if name == "transformer":
        return nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    return nn.functional.cross_entropy(out, y)


def write_safetensors(path, tensors):
    """float32 tensors, in order, as the safetensors format lays them out."""
    header, offset = {}, 0
    arrays = []
    for name, t in tensors:
        a = np.ascontiguousarray(t.detach().cpu().numpy(), dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        arrays.append(a)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for a in arrays:
            f.write(a.tobytes())
    os.replace(tmp, path)


def make(name, out_dir, warmup, steps, batch, seed, scale):
    torch.manual_seed(seed)
    model = {"resnet18": lambda: ResNet18(width=64 // scale), "vgg16bn": lambda: VGG16BN(scale),
             "transformer": lambda: Transformer(scale)}[name]()
    model.train()
    gen = torch.Generator().manual_seed(seed + 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05 if name != "transformer" else 0.01, momentum=0.9)
    params = sum(p.numel() for p in model.parameters())
    os.makedirs(os.path.join(out_dir, name), exist_ok=True)
    start = time.time()
    losses = []
    for step in range(warmup + steps):
        x, y = batch_for(name, model, batch, gen)
        opt.zero_grad(set_to_none=True)
        loss = loss_of(name, model, x, y)
        loss.backward()
        losses.append(float(loss))
        if step >= warmup:
            grads = [(n, p.grad if p.grad is not None else torch.zeros_like(p)) for n, p in model.named_parameters()]
            write_safetensors(os.path.join(out_dir, name, f"step_{step - warmup:03d}.safetensors"), grads)
        opt.step()
    with open(os.path.join(out_dir, name, "README.txt"), "w") as f:
        f.write(f"{name}: {params} parameters, {len(list(model.parameters()))} tensors; gradients of steps "
                f"{warmup}..{warmup + steps - 1} of SGD (momentum 0.9) on random inputs, batch {batch}, seed {seed}"
                f"{', widths / ' + str(scale) if scale > 1 else ''}; made by bench/real_gradients.py with torch "
                f"{torch.__version__}. Losses: {', '.join(f'{v:.4f}' for v in losses)}\n")
    print(f"{name}: {params} parameters, {steps} steps after {warmup}, {time.time() - start:.1f} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--models", default="resnet18,vgg16bn,transformer")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tiny", action="store_true", help="every width / 8: a check of the script")
    a = ap.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    for name in a.models.split(","):
        if name not in ("resnet18", "vgg16bn", "transformer"):
            ap.error(f"unknown model '{name}' (resnet18, vgg16bn, transformer)")
        make(name, a.out, a.warmup, a.steps, a.batch, a.seed, 8 if a.tiny else 1)


if __name__ == "__main__":
    main()
