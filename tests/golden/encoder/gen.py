#!/usr/bin/python3
"""Golden expectations for the encoder (tests/unit/test_encoder_golden.c).

  build/tests/test_encoder_golden --export tests/golden/encoder
  /usr/bin/python3 tests/golden/encoder/gen.py tests/golden/encoder

For every NAME.in.safetensors (our initial weights, data, batches, configuration)
this builds the same model in PyTorch, float64, from those weights and writes
NAME.out.safetensors with
  logits, loss                 on batches[0] (evaluation mode = training mode: dropout off)
  grad.<param>                 every parameter's gradient of that loss (float32)
  step_losses                  the losses of ten steps of torch.optim.AdamW
                               (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 1e-4)
                               with clip_grad_norm_(5.0), on batches[0..9]
and for entmax15 / HAE the same with the study's bisection (PROTOCOL A3: 18
iterations, autograd through them) under the prefix "bisect.".

The exact normalisers here are written from their definitions, independently of
lib/attn_norm.c: the threshold tau of alpha-entmax is found by bisection run to
double precision, then made differentiable by one implicit-function (Newton) step
whose gradient is the exact implicit gradient; sparsemax is alpha = 2 of the same.
safetensors is parsed by hand (the `safetensors` package is not in Debian).
"""
import glob, json, math, os, struct, sys

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)

DT = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "U8": np.uint8, "I64": np.int64}


def st_read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8 : 8 + n])
    meta = h.pop("__metadata__", {})
    out = {}
    for k, v in h.items():
        s, e = v["data_offsets"]
        out[k] = np.frombuffer(b[8 + n + s : 8 + n + e], dtype=DT[v["dtype"]]).reshape(v["shape"])
    return out, meta


def st_write(path, tensors):
    hdr, blobs, off = {}, [], 0
    for k, a in tensors.items():
        a = np.ascontiguousarray(a)
        name = {np.float32: "F32", np.float64: "F64"}[a.dtype.type]
        data = a.tobytes()
        hdr[k] = {"dtype": name, "shape": list(a.shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
        blobs.append(data)
    hdr["__metadata__"] = {"generator": "tests/golden/encoder/gen.py", "torch": torch.__version__}
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    os.replace(path + ".tmp", path)


# ---------------------------------------------------------------- normalisers
def entmax_exact(y, alpha):
    """alpha-entmax of rows y (last dim), exact: p = [ (alpha-1) y - tau ]_+^(1/(alpha-1)), sum p = 1."""
    am1 = alpha - 1
    z = y * am1
    z = z - z.max(dim=-1, keepdim=True).values
    with torch.no_grad():
        lo = z.min(dim=-1, keepdim=True).values - 1
        hi = z.max(dim=-1, keepdim=True).values
        a = am1.detach() if torch.is_tensor(am1) else am1
        for _ in range(200):
            mid = (lo + hi) / 2
            big = (torch.clamp(z - mid, min=0) ** (1 / a)).sum(-1, keepdim=True) >= 1
            lo = torch.where(big, mid, lo)
            hi = torch.where(big, hi, mid)
        tau0 = (lo + hi) / 2
    # one Newton step on F(tau) = sum [z - tau]_+^(1/am1) - 1 at the converged tau0:
    # value unchanged (F ~ 0), gradient = the implicit -F_x / F_tau
    r = torch.clamp(z - tau0, min=0)
    Fv = (r ** (1 / am1)).sum(-1, keepdim=True) - 1
    Ft = -((1 / am1) * r ** (1 / am1 - 1) * (r > 0)).sum(-1, keepdim=True)
    tau = tau0 - Fv / Ft
    return torch.clamp(z - tau, min=0) ** (1 / am1)


def entmax_bisect_study(s, alpha, n_iter=18):
    """PROTOCOL A3 entmax_bisect, as the study: autograd through the iterations."""
    if not torch.is_tensor(alpha):
        alpha = torch.tensor(alpha)
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


def topk_keep(s, k, largest):
    """keep mask of the k largest (smallest) entries; ties to the lower index."""
    T = s.shape[-1]
    idx = torch.arange(T)
    if largest:
        better = (s.unsqueeze(-1) > s.unsqueeze(-2)) | ((s.unsqueeze(-1) == s.unsqueeze(-2)) & (idx.view(-1, 1) < idx.view(1, -1)))
    else:
        better = (s.unsqueeze(-1) < s.unsqueeze(-2)) | ((s.unsqueeze(-1) == s.unsqueeze(-2)) & (idx.view(-1, 1) < idx.view(1, -1)))
    rank = better.sum(-2)  # number of entries better than each
    return rank < k


def normalise_row_block(method, s, nv, mask_mode, alpha, bisect):
    """s: [H, T, T] scores of one sample; nv valid keys. Returns P."""
    T = s.shape[-1]
    if nv < T and mask_mode == "exclude":
        P = torch.zeros_like(s)
        P[..., :nv] = normalise_row_block(method, s[..., :nv], nv, "margin", alpha, bisect)
        return P
    if nv < T:  # margin: padded keys get min(valid) - 60
        mn = s[..., :nv].min(dim=-1, keepdim=True).values
        s = torch.cat([s[..., :nv], (mn - 60).expand(*s.shape[:-1], T - nv)], -1)
    if method == "softmax":
        return torch.softmax(s, -1)
    if method.startswith("topk_softmax") or method.startswith("bottomk_softmax"):
        r = {"0125": 0.125, "025": 0.25, "05": 0.5}[method.rsplit("_", 1)[1]]
        k = max(1, math.ceil(r * nv))
        keep = topk_keep(s.detach(), k, method.startswith("topk"))
        return torch.softmax(s.masked_fill(~keep, -1e9), -1)
    if method == "sparsemax":
        return entmax_exact(s, torch.tensor(2.0))
    if method in ("entmax15", "headwise_adaptive_entmax"):
        a = alpha if method == "headwise_adaptive_entmax" else torch.tensor(1.5)
        if bisect:
            return entmax_bisect_study(s, a)
        return entmax_exact(s, a)
    raise ValueError(method)


# ---------------------------------------------------------------- model
def gelu(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def layernorm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


def localmix(x, P, pre, nvalid, G):
    B, T, d = x.shape
    xc = x[:, 1:]
    L = T - 1
    valid = torch.ones(B, L, 1)
    if nvalid is not None:
        valid = (torch.arange(L).view(1, L) < (nvalid - 1).view(B, 1)).to(x.dtype).unsqueeze(-1)
    y = layernorm(xc, P[pre + "mixer.ln.weight"], P[pre + "mixer.ln.bias"]) * valid
    w, b = P[pre + "mixer.conv.weight"], P[pre + "mixer.conv.bias"]
    if G > 0:
        z = F.conv2d(y.transpose(1, 2).reshape(B, d, G, G), w, b, padding=1, groups=d).reshape(B, d, L).transpose(1, 2)
    else:
        z = F.conv1d(y.transpose(1, 2), w, b, padding=1, groups=d).transpose(1, 2)
    xc = (xc + P[pre + "mixer.scale"] * gelu(z)) * valid
    return torch.cat([x[:, :1], xc], 1)


def forward(cfg, P, data, idx, bisect):
    d, H, layers = cfg["d"], cfg["heads"], cfg["layers"]
    hd = d // H
    B = len(idx)
    nvalid = None
    if cfg["modality"] == "image":
        p = cfg["patch"]
        x = torch.tensor(data["data.images"][idx].astype(np.float32) / np.float32(255)).to(torch.float64)
        N_, C, Hh, W = x.shape
        x = x[:, :, : Hh // p * p, : W // p * p]
        x = x.reshape(B, C, Hh // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5).reshape(B, (Hh // p) * (W // p), C * p * p)
        emb = x @ P["embed.weight"].T + P["embed.bias"]
        G = Hh // p
    else:
        tok = torch.tensor(data["data.tokens"][idx].astype(np.int64))
        emb = F.embedding(tok, P["embed.weight"], padding_idx=0)
        nvalid = torch.tensor(data["data.len"][idx].astype(np.int64)) + 1
        G = 0
    x = torch.cat([P["cls"].view(1, 1, d).expand(B, 1, d), emb], 1) + P["pos"]
    T = x.shape[1]
    for l in range(layers):
        pre = "blocks.%d." % l
        if cfg["arch"] == "local_hybrid":
            x = localmix(x, P, pre, nvalid, G)
        qkv = x @ P[pre + "attn.qkv.weight"].T + P[pre + "attn.qkv.bias"]
        q, k, v = qkv.view(B, T, 3, H, hd).permute(2, 0, 3, 1, 4)
        s = q @ k.transpose(-1, -2) / math.sqrt(hd)
        alpha = None
        if cfg["method"] == "headwise_adaptive_entmax":
            alpha = (1.05 + 0.90 * torch.sigmoid(P[pre + "attn.alpha_raw"])).view(H, 1, 1)
        Ps = []
        for b in range(B):
            nv = T if nvalid is None else int(nvalid[b])
            Ps.append(normalise_row_block(cfg["method"], s[b], nv, cfg["mask"], alpha, bisect))
        a = (torch.stack(Ps) @ v).transpose(1, 2).reshape(B, T, d)
        x = layernorm(x + a @ P[pre + "attn.out.weight"].T + P[pre + "attn.out.bias"], P[pre + "ln1.weight"], P[pre + "ln1.bias"])
        h = gelu(x @ P[pre + "ff.fc1.weight"].T + P[pre + "ff.fc1.bias"])
        x = layernorm(x + h @ P[pre + "ff.fc2.weight"].T + P[pre + "ff.fc2.bias"], P[pre + "ln2.weight"], P[pre + "ln2.bias"])
    return x[:, 0] @ P["head.weight"].T + P["head.bias"]


def run(cfg, init, data, bisect):
    names = list(init.keys())
    P = {k: torch.tensor(init[k].astype(np.float64), requires_grad=True) for k in names}
    labels = torch.tensor(data["data.labels"].astype(np.int64))
    batches = data["batches"]
    idx = batches[0]
    logits = forward(cfg, P, data, idx, bisect)
    loss = F.cross_entropy(logits, labels[idx])
    loss.backward()
    out = {"logits": logits.detach().numpy(), "loss": np.array([loss.item()])}
    for k in names:
        g = P[k].grad
        out["grad." + k] = (g if g is not None else torch.zeros_like(P[k])).numpy().astype(np.float32)
    # ten AdamW steps
    P = {k: torch.tensor(init[k].astype(np.float64), requires_grad=True) for k in names}
    opt = torch.optim.AdamW([P[k] for k in names], lr=cfg["lr"], betas=(0.9, 0.999), eps=1e-8, weight_decay=cfg["weight_decay"])
    losses = []
    for st in range(cfg["steps"]):
        idx = batches[st]
        opt.zero_grad()
        loss = F.cross_entropy(forward(cfg, P, data, idx, bisect), labels[idx])
        loss.backward()
        for k in names:  # nn.Embedding(padding_idx=0) never updates row 0's gradient
            if k == "embed.weight" and cfg["modality"] == "text" and P[k].grad is not None:
                P[k].grad[0] = 0
        torch.nn.utils.clip_grad_norm_([P[k] for k in names], cfg["clip"])
        opt.step()
        losses.append(loss.item())
    out["step_losses"] = np.array(losses)
    return out


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for path in sorted(glob.glob(os.path.join(d, "*.in.safetensors"))):
        t, meta = st_read(path)
        cfg = json.loads(meta["config"])
        init = {k[6:]: v for k, v in t.items() if k.startswith("param.")}
        out = run(cfg, init, t, False)
        if cfg["method"] in ("entmax15", "headwise_adaptive_entmax"):
            for k, v in run(cfg, init, t, True).items():
                out["bisect." + k] = v
        st_write(path.replace(".in.safetensors", ".out.safetensors"), out)
        print("%s: loss %.9f, step losses %.6f .. %.6f" % (cfg["name"], out["loss"][0], out["step_losses"][0], out["step_losses"][-1]))


if __name__ == "__main__":
    main()
