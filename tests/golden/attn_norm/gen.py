#!/usr/bin/python3
"""Golden outputs for the attention normalisers, computed with PyTorch.

Run with Debian's python3-torch (1.13) and numpy, from the repository root:

    /usr/bin/python3 tests/golden/attn_norm/gen.py > tests/golden/attn_norm/golden.txt

tests/unit/test_attn_norm_golden.c reads golden.txt; no Python is needed at
test time. The script is deterministic (fixed NumPy seed, CPU, one thread).

Two kinds of case:

* prec=f32 -- the study's normalisers as PROTOCOL.md A3 describes them, in
  float32, gradients by autograd: softmax; top-k/bottom-k with torch.topk and
  -1e9 masking; the sort-based sparsemax; and for entmax15 / entmax_bisect /
  headwise_adaptive_entmax the 18-iteration bisection differentiated through
  its unrolled iterations (unrolled=1). Masked rows use the study's margin:
  padded scores = min(valid scores) - 60, gradient through that min.

* prec=f64 -- exact normalisers in float64, as an independent check of the C
  closed forms: the threshold tau* is found by bisection to double precision
  (no gradient), then ONE Newton step tau = tau* - f(tau*)/f'(tau*) is taken
  with autograd on f(tau) = sum [y - tau]_+^(1/(alpha-1)) - 1. At the root
  f(tau*) = 0, so the derivative of that step is the implicit derivative
  -f_y/f_tau (and -f_alpha/f_tau): autograd then gives the exact gradient
  with respect to the scores and to alpha without any hand-derived formula.
  Also float64 unrolled cases, to check the C double reference of the study's
  bisection tightly.

File format (text): a case is
    case NAME method=M ratio=R alpha=A unrolled=U mask=MASK T=T nv=NV rows=ROWS prec=P
    s  <rows*T scores>
    g  <rows*T upstream gradients dL/dp>
    p  <rows*T outputs>
    ds <rows*T gradients dL/ds>
    da <dL/dalpha summed over rows, or nan when the method has no alpha>
with numbers in %.9g (f32) or %.17g (f64); "end" closes the file.
"""
import math
import sys

import numpy as np
import torch

torch.set_num_threads(1)
MASK_MARGIN = 60.0
ITERS = 18


# ---------------------------------------------------------------- study (A3)

def margin_mask(s, nv):
    """padded keys (>= nv) get min(valid) - 60; gradient through the min"""
    T = s.shape[-1]
    valid = torch.arange(T) < nv
    minv = s.masked_fill(~valid, float("inf")).min(dim=-1, keepdim=True).values
    return torch.where(valid, s, minv - MASK_MARGIN)


def study_softmax(s):
    return torch.softmax(s, dim=-1)


def study_topk(s, ratio, nv, largest=True):
    k = max(1, math.ceil(ratio * nv))
    _, idx = torch.topk(s, k, dim=-1, largest=largest)
    keep = torch.zeros_like(s, dtype=torch.bool).scatter(-1, idx, True)
    return torch.softmax(s.masked_fill(~keep, -1e9), dim=-1)


def study_sparsemax(s):
    T = s.shape[-1]
    z = s - s.max(dim=-1, keepdim=True).values
    zs, _ = torch.sort(z, dim=-1, descending=True)
    rho = torch.arange(1, T + 1, dtype=s.dtype)
    cs = zs.cumsum(dim=-1)
    k = ((1 + rho * zs) > cs).sum(dim=-1, keepdim=True).clamp(min=1)
    tau = (cs.gather(-1, k - 1) - 1) / k.to(s.dtype)
    return torch.clamp(z - tau, min=0)


def study_entmax_bisect(s, alpha):
    """PROTOCOL A3 steps 1-4: 18 iterations, autograd through them"""
    alpha = alpha.clamp(1.05, 2.0)
    d = s.shape[-1]
    y = s * (alpha - 1)
    y = y - y.max(dim=-1, keepdim=True).values
    tau_lo = y.min(dim=-1, keepdim=True).values - 1
    tau_hi = y.max(dim=-1, keepdim=True).values - (1.0 / d) ** (alpha - 1)
    for _ in range(ITERS):
        tau = (tau_lo + tau_hi) / 2
        p = torch.clamp(y - tau, min=0) ** (1 / (alpha - 1))
        mask = (p.sum(dim=-1, keepdim=True) - 1) >= 0
        tau_lo = torch.where(mask, tau, tau_lo)
        tau_hi = torch.where(mask, tau_hi, tau)
    p = torch.clamp(y - tau_hi, min=0) ** (1 / (alpha - 1))
    return p / (p.sum(dim=-1, keepdim=True) + 1e-12)


# ------------------------------------------------------------ exact (f64)

def exact_entmax(s, alpha):
    """exact alpha-entmax: tau* by bisection (detached), then one Newton step
    with autograd, whose derivative at the root is the implicit derivative"""
    alpha = alpha.clamp(1.05, 2.0)
    e = 1 / (alpha - 1)
    y = (s - s.max(dim=-1, keepdim=True).values) * (alpha - 1)
    with torch.no_grad():
        yd, ed = y.detach(), e.detach()
        lo = torch.full_like(yd[..., :1], -1.0)
        hi = torch.zeros_like(lo)
        for _ in range(200):
            mid = (lo + hi) / 2
            f = (torch.clamp(yd - mid, min=0) ** ed).sum(dim=-1, keepdim=True) - 1
            lo = torch.where(f >= 0, mid, lo)
            hi = torch.where(f >= 0, hi, mid)
        t0 = (lo + hi) / 2
    dd = torch.clamp(y - t0, min=0)
    f = (dd ** e).sum(dim=-1, keepdim=True) - 1
    fp = -(e * dd ** (e - 1) * (dd > 0)).sum(dim=-1, keepdim=True)
    tau = t0 - f / fp
    return torch.clamp(y - tau, min=0) ** e


# ------------------------------------------------------------------ cases

def run_case(name, method, T, nv, rows, prec, rng, ratio=0.0, alpha=None, unrolled=0,
             scale=1.5, mask="margin"):
    dt = torch.float32 if prec == "f32" else torch.float64
    s_np = (scale * rng.standard_normal((rows, T))).astype(np.float32)
    g_np = rng.standard_normal((rows, T)).astype(np.float32)
    s = torch.tensor(s_np, dtype=dt, requires_grad=True)
    g = torch.tensor(g_np, dtype=dt)
    a = None
    if alpha is not None:
        a = torch.tensor(np.float32(alpha), dtype=dt, requires_grad=True)
    x = s
    if nv < T and mask == "margin":
        x = margin_mask(s, nv)
    if nv < T and mask == "exclude":
        x = s[:, :nv]
    if method == "softmax":
        p = study_softmax(x)
    elif method.startswith("topk_softmax"):
        p = study_topk(x, ratio, nv, True)
    elif method.startswith("bottomk_softmax"):
        p = study_topk(x, ratio, nv, False)
    elif method == "sparsemax":
        p = study_sparsemax(x)
    elif unrolled:
        p = study_entmax_bisect(x, a)
    else:
        p = exact_entmax(x, a)
    if nv < T and mask == "exclude":
        p = torch.cat([p, torch.zeros(rows, T - nv, dtype=dt)], dim=1)
    (p * g).sum().backward()
    has_alpha = method in ("entmax_bisect", "headwise_adaptive_entmax")
    da = a.grad.item() if (has_alpha and a.grad is not None) else float("nan")
    fmt = "%.9g" if prec == "f32" else "%.17g"
    al = float(np.float32(alpha)) if alpha is not None else 0.0

    def row(tag, v):
        return tag + " " + " ".join(fmt % float(t) for t in np.asarray(v).ravel())

    out = ["case %s method=%s ratio=%g alpha=%.9g unrolled=%d mask=%s T=%d nv=%d rows=%d prec=%s"
           % (name, method, ratio, al, unrolled, mask, T, nv, rows, prec),
           row("s", s_np), row("g", g_np), row("p", p.detach().numpy()),
           row("ds", s.grad.numpy()), "da " + (fmt % da if da == da else "nan")]
    return "\n".join(out)


def hae_alpha(raw):
    """the model's map raw -> alpha, in float32 as the study computes it"""
    r = torch.tensor(raw, dtype=torch.float32)
    return float(1.05 + 0.90 * torch.sigmoid(r))


def main():
    rng = np.random.default_rng(20260917)
    cases = [
        # the study, float32
        ("softmax_T50", "softmax", 50, 50, 2, "f32", {}),
        ("softmax_T97_margin", "softmax", 97, 60, 2, "f32", {}),
        ("topk0125_T50", "topk_softmax_0125", 50, 50, 2, "f32", {"ratio": 0.125}),
        ("topk025_T65", "topk_softmax_025", 65, 65, 2, "f32", {"ratio": 0.25}),
        ("topk05_T97_margin", "topk_softmax_05", 97, 50, 2, "f32", {"ratio": 0.5}),
        ("bottomk0125_T65", "bottomk_softmax_0125", 65, 65, 2, "f32", {"ratio": 0.125}),
        ("bottomk025_T50", "bottomk_softmax_025", 50, 50, 2, "f32", {"ratio": 0.25}),
        ("bottomk025_T13_margin", "bottomk_softmax_025", 13, 7, 2, "f32", {"ratio": 0.25}),
        ("sparsemax_T50", "sparsemax", 50, 50, 2, "f32", {"scale": 0.5}),
        ("sparsemax_T97_margin", "sparsemax", 97, 61, 2, "f32", {"scale": 0.5}),
        ("entmax15_unrolled_T50", "entmax15", 50, 50, 2, "f32", {"alpha": 1.5, "unrolled": 1}),
        ("entmax15_unrolled_T97_margin", "entmax15", 97, 61, 2, "f32",
         {"alpha": 1.5, "unrolled": 1}),
        ("bisect13_unrolled_T65", "entmax_bisect", 65, 65, 2, "f32", {"alpha": 1.3, "unrolled": 1}),
        ("hae_unrolled_T50", "headwise_adaptive_entmax", 50, 50, 2, "f32",
         {"alpha": hae_alpha(0.7), "unrolled": 1}),
        ("hae_unrolled_T97_margin", "headwise_adaptive_entmax", 97, 70, 2, "f32",
         {"alpha": hae_alpha(-2.0), "unrolled": 1}),
        # exact, float64
        ("softmax_T7_f64", "softmax", 7, 7, 2, "f64", {}),
        ("sparsemax_T65_f64", "sparsemax", 65, 65, 2, "f64", {"scale": 0.5}),
        ("topk025_T50_exclude_f64", "topk_softmax_025", 50, 31, 2, "f64",
         {"ratio": 0.25, "mask": "exclude"}),
        ("entmax15_T50_f64", "entmax15", 50, 50, 2, "f64", {"alpha": 1.5}),
        ("entmax15_T97_margin_f64", "entmax15", 97, 61, 2, "f64", {"alpha": 1.5}),
        ("bisect125_T65_f64", "entmax_bisect", 65, 65, 2, "f64", {"alpha": 1.25}),
        ("bisect18_T50_f64", "entmax_bisect", 50, 50, 2, "f64", {"alpha": 1.8}),
        ("hae16_T97_margin_f64", "headwise_adaptive_entmax", 97, 70, 2, "f64", {"alpha": 1.6}),
        ("hae106_T50_f64", "headwise_adaptive_entmax", 50, 50, 2, "f64", {"alpha": 1.06}),
        ("hae14_T65_exclude_f64", "headwise_adaptive_entmax", 65, 40, 2, "f64",
         {"alpha": 1.4, "mask": "exclude"}),
        # the study's bisection in float64 (checks the C double reference tightly)
        ("entmax15_unrolled_T50_f64", "entmax15", 50, 50, 2, "f64", {"alpha": 1.5, "unrolled": 1}),
        ("hae14_unrolled_T65_margin_f64", "headwise_adaptive_entmax", 65, 41, 2, "f64",
         {"alpha": 1.4, "unrolled": 1}),
        ("bisect19_unrolled_T13_f64", "entmax_bisect", 13, 13, 2, "f64",
         {"alpha": 1.9, "unrolled": 1}),
    ]
    out = sys.stdout
    out.write("# golden outputs of tests/golden/attn_norm/gen.py (torch %s, numpy %s); "
              "do not edit\n" % (torch.__version__, np.__version__))
    for name, method, T, nv, rows, prec, kw in cases:
        out.write(run_case(name, method, T, nv, rows, prec, rng, **kw) + "\n")
    out.write("end\n")


if __name__ == "__main__":
    main()
