#!/usr/bin/env python3
"""torch_bench.py — PyTorch eager reference for bench/gpu/gpu_bench.c.

The study's SequenceClassifier (PROTOCOL A2, compact tier: 2 layers, d 64, 4
heads, patch 4 -> 50 tokens incl. CLS, post-norm, GELU FF of 4d, dropout 0.1)
with its normalisers as the study wrote them (PROTOCOL A3: torch.topk with
-1e9 masking, the sort-based sparsemax, the 18-iteration bisection entmax with
autograd through its iterations, HAE alpha = 1.05 + 0.9 sigmoid(raw)), AdamW
(lr 1e-3, wd 1e-4), clip_grad_norm_(5), batch 256, fp32 (TF32 off unless
--tf32). Eager mode, one cell at a time. Data: random pixels of Fashion-MNIST's
shape on the GPU (throughput does not depend on them).

Prints one JSON line per method: {"kind": "bench.torch", "method", "samples_per_s", ...}.
Usage: torch_bench.py [--steps N] [--warmup W] [--methods m1,m2,...] [--tf32]
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

METHODS = ["softmax", "topk_softmax_0125", "topk_softmax_025", "topk_softmax_05", "sparsemax", "entmax15",
           "headwise_adaptive_entmax"]


def sparsemax(s):
    z = s - s.max(dim=-1, keepdim=True).values
    zs, _ = torch.sort(z, dim=-1, descending=True)
    rng = torch.arange(1, z.shape[-1] + 1, device=z.device, dtype=z.dtype)
    cs = zs.cumsum(-1)
    k = ((1 + rng * zs) > cs).sum(-1, keepdim=True).clamp(min=1)
    tau = (cs.gather(-1, k - 1) - 1) / k.to(z.dtype)
    return torch.clamp(z - tau, min=0)


def entmax_bisect(s, alpha, iters=18):
    # alpha: scalar tensor or broadcastable [.., 1, 1]
    alpha = torch.clamp(alpha, 1.05, 2.0)
    am1 = alpha - 1
    y = s * am1
    y = y - y.max(dim=-1, keepdim=True).values
    d = s.shape[-1]
    lo = y.min(dim=-1, keepdim=True).values - 1
    hi = y.max(dim=-1, keepdim=True).values - (1.0 / d) ** am1
    e = 1.0 / am1
    for _ in range(iters):
        tau = (lo + hi) / 2
        p = torch.clamp(y - tau, min=0) ** e
        ge = (p.sum(-1, keepdim=True) - 1) >= 0
        lo = torch.where(ge, tau, lo)
        hi = torch.where(ge, hi, tau)
    p = torch.clamp(y - hi, min=0) ** e
    return p / (p.sum(-1, keepdim=True) + 1e-12)


class Attention(nn.Module):
    def __init__(self, d, h, method):
        super().__init__()
        self.h, self.hd, self.method = h, d // h, method
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        if method == "headwise_adaptive_entmax":
            self.alpha_raw = nn.Parameter(torch.zeros(h))

    def normalise(self, s):
        m = self.method
        if m == "softmax":
            return torch.softmax(s, -1)
        if m.startswith("topk_softmax"):
            r = {"topk_softmax_0125": 0.125, "topk_softmax_025": 0.25, "topk_softmax_05": 0.5}[m]
            k = max(1, math.ceil(r * s.shape[-1]))
            idx = torch.topk(s, k, dim=-1).indices
            keep = torch.zeros_like(s, dtype=torch.bool).scatter(-1, idx, True)
            return torch.softmax(s.masked_fill(~keep, -1e9), -1)
        if m == "sparsemax":
            return sparsemax(s)
        if m == "entmax15":
            return entmax_bisect(s, torch.tensor(1.5, device=s.device))
        if m == "headwise_adaptive_entmax":
            alpha = (1.05 + 0.90 * torch.sigmoid(self.alpha_raw)).view(1, -1, 1, 1)
            return entmax_bisect(s, alpha)
        raise ValueError(m)

    def forward(self, x):
        B, T, d = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.h, self.hd).permute(2, 0, 3, 1, 4)
        s = q @ k.transpose(-1, -2) / math.sqrt(self.hd)
        p = self.normalise(s)
        return self.out((p @ v).transpose(1, 2).reshape(B, T, d))


class Block(nn.Module):
    def __init__(self, d, h, method):
        super().__init__()
        self.attn = Attention(d, h, method)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Dropout(0.1), nn.Linear(4 * d, d))
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        x = self.ln1(x + self.drop(self.attn(x)))
        return self.ln2(x + self.drop(self.ff(x)))


class Model(nn.Module):
    def __init__(self, method, P=16, L=49, d=64, h=4, layers=2, C=10):
        super().__init__()
        self.embed = nn.Linear(P, d)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, L + 1, d) * 0.02)
        self.blocks = nn.ModuleList([Block(d, h, method) for _ in range(layers)])
        self.head = nn.Linear(d, C)

    def forward(self, patches):
        x = self.embed(patches)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        for b in self.blocks:
            x = b(x)
        return self.head(x[:, 0])


def patchify(img, p=4):
    B, C, H, W = img.shape
    x = img.unfold(2, p, p).unfold(3, p, p)  # B C gh gw p p
    return x.permute(0, 2, 3, 1, 4, 5).reshape(B, (H // p) * (W // p), C * p * p)


def bench(method, steps, warmup, dev, images, labels):
    torch.manual_seed(0)
    model = Model(method).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    n = images.shape[0]
    perm = torch.randperm(n, device=dev)
    B = 256

    def step(i):
        idx = perm[(i * B) % (n - B):(i * B) % (n - B) + B]
        x = patchify(images[idx].float() / 255.0)
        loss = F.cross_entropy(model(x), labels[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        return loss

    for i in range(warmup):
        step(i)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(steps):
        loss = step(warmup + i)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    return steps * B / dt, dt / steps * 1e3, float(loss)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--tf32", action="store_true")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"kind": "bench.torch", "error": "torch sees no CUDA device"}))
        return 5
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.backends.cudnn.allow_tf32 = a.tf32
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(1)
    images = torch.randint(0, 256, (60000, 1, 28, 28), dtype=torch.uint8, device=dev, generator=g)
    labels = torch.randint(0, 10, (60000,), device=dev, generator=g)
    for m in a.methods.split(","):
        sps, ms, loss = bench(m, a.steps, a.warmup, dev, images, labels)
        print(json.dumps({"kind": "bench.torch", "method": m, "cells": 1, "batch": 256, "steps": a.steps,
                          "samples_per_s": round(sps, 1), "ms_per_step": round(ms, 4), "last_loss": loss,
                          "torch": torch.__version__, "device": torch.cuda.get_device_name(0),
                          "tf32": a.tf32, "data": "synthetic pixels"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
