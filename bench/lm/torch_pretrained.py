#!/usr/bin/env python3
"""The PyTorch reference of bench_pretrained.c: the same Qwen2.5-0.5B-shaped decoder
(random weights, float32, one thread), a prefill of N tokens with every row's logits and
D single-token steps with a KV cache. Eager PyTorch as a researcher would write it
(transformers' Qwen2 forward in plain torch: matmuls, RMSNorm, RoPE, GQA, SwiGLU).
Prints one JSON line.   /usr/bin/python3 bench/lm/torch_pretrained.py [N [D]]"""
import json
import sys
import time

import torch

torch.set_num_threads(1)
N = int(sys.argv[1]) if len(sys.argv) > 1 else 256
D = int(sys.argv[2]) if len(sys.argv) > 2 else 32
V, d, L, H, KV, hd, F = 151936, 896, 24, 14, 2, 64, 4864
theta, eps = 1e6, 1e-6
g = torch.Generator().manual_seed(1)


def rnd(*s):
    return torch.randn(*s, generator=g) * 0.02


t0 = time.perf_counter()
emb = rnd(V, d)
layers = [dict(n1=torch.ones(d), n2=torch.ones(d), q=rnd(H * hd, d), qb=torch.zeros(H * hd), k=rnd(KV * hd, d),
               kb=torch.zeros(KV * hd), v=rnd(KV * hd, d), vb=torch.zeros(KV * hd), o=rnd(d, H * hd),
               gate=rnd(F, d), up=rnd(F, d), down=rnd(d, F)) for _ in range(L)]
normf = torch.ones(d)
init_s = time.perf_counter() - t0
inv = 1.0 / theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd)


def rms(x, w):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rope(x, pos):  # x [T, heads, hd]
    ang = pos[:, None].float() * inv[None, :]
    c, s = ang.cos()[:, None, :], ang.sin()[:, None, :]
    a, b = x[..., : hd // 2], x[..., hd // 2:]
    return torch.cat([a * c - b * s, b * c + a * s], -1)


def forward(ids, cache, all_rows):
    T = ids.shape[0]
    t0 = cache[0][0].shape[0] if cache[0] is not None else 0
    pos = torch.arange(t0, t0 + T)
    x = emb[ids]
    for l, w in enumerate(layers):
        h = rms(x, w["n1"])
        q = rope((h @ w["q"].T + w["qb"]).view(T, H, hd), pos)
        k = rope((h @ w["k"].T + w["kb"]).view(T, KV, hd), pos)
        v = (h @ w["v"].T + w["vb"]).view(T, KV, hd)
        if cache[l] is not None:
            k = torch.cat([cache[l][0], k])
            v = torch.cat([cache[l][1], v])
        cache[l] = (k, v)
        kk = k.repeat_interleave(H // KV, 1)
        vv = v.repeat_interleave(H // KV, 1)
        s = torch.einsum("thd,uhd->htu", q, kk) / hd ** 0.5
        S = kk.shape[0]
        mask = torch.ones(T, S, dtype=torch.bool).tril(S - T)
        s = s.masked_fill(~mask, float("-inf"))
        o = torch.einsum("htu,uhd->thd", torch.softmax(s, -1), vv).reshape(T, H * hd)
        x = x + o @ w["o"].T
        h = rms(x, w["n2"])
        x = x + (torch.nn.functional.silu(h @ w["gate"].T) * (h @ w["up"].T)) @ w["down"].T
    x = rms(x if all_rows else x[-1:], normf)
    return x @ emb.T


ids = torch.tensor([(i * 7919 + 13) % V for i in range(N + D)])
with torch.no_grad():
    cache = [None] * L
    a = time.perf_counter()
    forward(ids[:N], cache, True)
    b = time.perf_counter()
    for s in range(D):
        forward(ids[N + s:N + s + 1], cache, False)
    e = time.perf_counter()
print(json.dumps({"model": "qwen2.5-0.5b-shape", "torch": torch.__version__, "threads": 1, "prefill_tokens": N,
                  "decode_steps": D, "init_s": round(init_s, 2), "dense_prefill_s": round(b - a, 3),
                  "dense_decode_ms_per_token": round(1e3 * (e - b) / D, 1)}))
