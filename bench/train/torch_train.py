#!/usr/bin/python3
"""PyTorch reference trainer for bench/train: the same encoder (PROTOCOL A2), written as a
careful user would. Sparse normalisers with closed-form backwards in custom autograd
Functions (naive autograd through the entmax threshold gives NaN); HAE by the study's
18-iteration bisection, differentiated through autograd as the study does.

  torch_train.py --method softmax --threads 2 --steps 30 [--epochs 1] [--seed S]
                 [--val-fraction 0.2] [--test] [--data DIR]

Prints one JSON line: method, threads, samples_per_s (steady state, after 3 warm-up
steps; wall clock), cpu_s and samples_per_cpu_s (process CPU time of those steps), and
with --epochs the mean training loss and the validation accuracy after each epoch
(the split of PROTOCOL A1: numpy default_rng(seed).permutation, n_val = round(f n);
--val-fraction 0 trains on the whole 60k pool) and, with --test, the accuracy on the
10k test set after each epoch.
"""
import argparse, gzip, json, math, os, struct, sys, time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


# ---------------------------------------------------------------- normalisers
class Sparsemax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, s):
        z = s - s.max(dim=-1, keepdim=True).values
        zs, _ = torch.sort(z, dim=-1, descending=True)
        cs = zs.cumsum(-1)
        r = torch.arange(1, z.shape[-1] + 1, device=z.device, dtype=z.dtype)
        k = ((1 + r * zs) > cs).sum(-1, keepdim=True).clamp(min=1)
        tau = (cs.gather(-1, k - 1) - 1) / k
        p = torch.clamp(z - tau, min=0)
        ctx.save_for_backward(p)
        return p

    @staticmethod
    def backward(ctx, g):
        (p,) = ctx.saved_tensors
        supp = (p > 0).to(g.dtype)
        v = (g * supp).sum(-1, keepdim=True) / supp.sum(-1, keepdim=True)
        return supp * (g - v)


class Entmax15(torch.autograd.Function):
    """alpha = 1.5, exact threshold by sorting (Peters et al. 2019), closed-form backward."""

    @staticmethod
    def forward(ctx, s):
        z = (s - s.max(dim=-1, keepdim=True).values) / 2
        zs, _ = torch.sort(z, dim=-1, descending=True)
        d = z.shape[-1]
        r = torch.arange(1, d + 1, device=z.device, dtype=z.dtype)
        mean = zs.cumsum(-1) / r
        mean_sq = (zs ** 2).cumsum(-1) / r
        ss = r * (mean_sq - mean ** 2)
        delta = (1 - ss) / r
        tau = mean - torch.sqrt(torch.clamp(delta, min=0))
        k = (tau <= zs).sum(-1, keepdim=True)
        tau_star = tau.gather(-1, k - 1)
        p = torch.clamp(z - tau_star, min=0) ** 2
        ctx.save_for_backward(p)
        return p

    @staticmethod
    def backward(ctx, g):
        (p,) = ctx.saved_tensors
        gp = p.sqrt()
        q = g * gp
        return q - gp * q.sum(-1, keepdim=True) / gp.sum(-1, keepdim=True)


def entmax_bisect(s, alpha, n_iter=18):
    """The study's bisection (PROTOCOL A3), differentiated by autograd through the iterations."""
    alpha = alpha.clamp(1.05, 2.0)
    am1 = alpha - 1
    y = s * am1
    y = y - y.max(dim=-1, keepdim=True).values
    d = s.shape[-1]
    tau_lo = y.min(dim=-1, keepdim=True).values - 1
    tau_hi = y.max(dim=-1, keepdim=True).values - (1.0 / d) ** am1
    for _ in range(n_iter):
        tau = (tau_lo + tau_hi) / 2
        p = torch.clamp(y - tau, min=0) ** (1 / am1)
        big = (p.sum(-1, keepdim=True) - 1) >= 0
        tau_lo = torch.where(big, tau, tau_lo)
        tau_hi = torch.where(big, tau_hi, tau)
    p = torch.clamp(y - tau_hi, min=0) ** (1 / am1)
    return p / (p.sum(-1, keepdim=True) + 1e-12)


def topk_softmax(s, ratio, largest=True):
    T = s.shape[-1]
    k = max(1, math.ceil(ratio * T))
    idx = torch.topk(s, k, dim=-1, largest=largest).indices
    keep = torch.zeros_like(s, dtype=torch.bool).scatter_(-1, idx, True)
    return torch.softmax(s.masked_fill(~keep, -1e9), dim=-1)


def normalise(method, s, alpha=None):
    if method == "softmax":
        return torch.softmax(s, dim=-1)
    if method.startswith("topk_softmax_"):
        return topk_softmax(s, {"0125": 0.125, "025": 0.25, "05": 0.5}[method.rsplit("_", 1)[1]])
    if method.startswith("bottomk_softmax_"):
        return topk_softmax(s, {"0125": 0.125, "025": 0.25, "05": 0.5}[method.rsplit("_", 1)[1]], False)
    if method == "sparsemax":
        return Sparsemax.apply(s)
    if method == "entmax15":
        return Entmax15.apply(s)
    if method == "headwise_adaptive_entmax":
        return entmax_bisect(s, alpha)
    raise ValueError(method)


# ---------------------------------------------------------------- model
class Block(nn.Module):
    def __init__(self, d, h, method):
        super().__init__()
        self.h, self.method = h, method
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.ln2 = nn.LayerNorm(d)
        self.drop = nn.Dropout(0.1)
        if method == "headwise_adaptive_entmax":
            self.alpha_raw = nn.Parameter(torch.zeros(h))

    def forward(self, x):
        B, T, d = x.shape
        hd = d // self.h
        q, k, v = self.qkv(x).view(B, T, 3, self.h, hd).permute(2, 0, 3, 1, 4)
        s = q @ k.transpose(-1, -2) / math.sqrt(hd)
        alpha = None
        if self.method == "headwise_adaptive_entmax":
            alpha = (1.05 + 0.90 * torch.sigmoid(self.alpha_raw)).view(1, self.h, 1, 1)
        p = normalise(self.method, s, alpha)
        a = (p @ v).transpose(1, 2).reshape(B, T, d)
        x = self.ln1(x + self.drop(self.out(a)))
        return self.ln2(x + self.drop(self.fc2(self.drop(F.gelu(self.fc1(x))))))


class Encoder(nn.Module):
    def __init__(self, patch_dim, L, d, h, layers, classes, method):
        super().__init__()
        self.embed = nn.Linear(patch_dim, d)
        self.cls = nn.Parameter(torch.randn(d) * 0.02)
        self.pos = nn.Parameter(torch.randn(L + 1, d) * 0.02)
        self.blocks = nn.ModuleList([Block(d, h, method) for _ in range(layers)])
        self.head = nn.Linear(d, classes)

    def forward(self, patches):
        x = self.embed(patches)
        x = torch.cat([self.cls.expand(x.shape[0], 1, -1), x], 1) + self.pos
        for b in self.blocks:
            x = b(x)
        return self.head(x[:, 0])


def patchify(x, p):
    N, C, H, W = x.shape
    x = x[:, :, : H // p * p, : W // p * p]
    x = x.reshape(N, C, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(N, (H // p) * (W // p), C * p * p)


def load_idx(path):
    b = gzip.open(path).read()
    nd = b[3]
    dims = struct.unpack(">" + "I" * nd, b[4 : 4 + 4 * nd])
    return np.frombuffer(b[4 + 4 * nd :], dtype=np.uint8).reshape(dims)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--method", default="softmax")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--epochs", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--val-fraction", type=float, default=0.2)
    ap.add_argument("--test", action="store_true", help="also evaluate on the t10k test set after each epoch")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    x = load_idx(os.path.join(a.data, "train-images-idx3-ubyte.gz")).reshape(-1, 1, 28, 28)
    y = torch.tensor(load_idx(os.path.join(a.data, "train-labels-idx1-ubyte.gz")).astype(np.int64))
    X = patchify(torch.tensor(x, dtype=torch.float32) / 255, 4)
    perm = np.random.default_rng(a.seed).permutation(len(y))
    n_val = round(a.val_fraction * len(y))
    val, tr = perm[:n_val], perm[n_val:]
    model = Encoder(16, 49, 64, 4, 2, 10, a.method)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-4)
    out = {"method": a.method, "threads": a.threads, "params": sum(p.numel() for p in model.parameters())}

    def step(idx):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(X[idx]), y[idx])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        return loss.item()

    if a.epochs == 0:
        model.train()
        for i in range(3):
            step(tr[i * 256 : (i + 1) * 256])
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(a.steps):
            j = (i * 256) % (len(tr) - 256)
            step(tr[j : j + 256])
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        out.update(samples_per_s=a.steps * 256 / wall, cpu_s=cpu, samples_per_cpu_s=a.steps * 256 / cpu, wall_s=wall)
    else:
        if a.test:
            xt = load_idx(os.path.join(a.data, "t10k-images-idx3-ubyte.gz")).reshape(-1, 1, 28, 28)
            Xt = patchify(torch.tensor(xt, dtype=torch.float32) / 255, 4)
            yt = torch.tensor(load_idx(os.path.join(a.data, "t10k-labels-idx1-ubyte.gz")).astype(np.int64))

        def accuracy(Xs, ys):
            model.eval()
            with torch.no_grad():
                pred = torch.cat([model(Xs[i : i + 256]).argmax(-1) for i in range(0, len(ys), 256)])
            return float((pred == ys).float().mean())

        g = torch.Generator().manual_seed(a.seed)
        out.update(seed=a.seed, n_train=len(tr), n_val=len(val))
        for ep in range(a.epochs):
            model.train()
            order = tr[torch.randperm(len(tr), generator=g).numpy()]
            t0 = time.perf_counter()
            losses = [step(order[i : i + 256]) for i in range(0, len(order), 256)]
            dt = time.perf_counter() - t0
            out.setdefault("train_loss", []).append(sum(losses) / len(losses))
            if len(val):
                out.setdefault("val_accuracy", []).append(accuracy(X[val], y[val]))
            if a.test:
                out.setdefault("test_accuracy", []).append(accuracy(Xt, yt))
            out.setdefault("epoch_samples_per_s", []).append(len(tr) / dt)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
