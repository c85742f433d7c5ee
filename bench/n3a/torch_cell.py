#!/usr/bin/env python3
"""The PyTorch reference of one N3-A cell (PROTOCOL A8; docs/n3a-spec.md §2), for bench/n3a/run.sh.

  OMP_NUM_THREADS=1 /usr/bin/python3 bench/n3a/torch_cell.py '{"family":"n3a","arch":"query","r":16,"seed":64000}'

Plain PyTorch as the study wrote it: the same work as one `sb-train` N3-A cell (docs/n3a.md),
on one thread. Data of the cell's sizes (NumPy PCG64 streams keyed by the spec's stable_seed, so
not our Philox draws: CE values are comparable in range, not equal); the router (query: two
Linear + exact GELU; transformer: Linear 7->64 and nn.TransformerEncoder of two
nn.TransformerEncoderLayer(64, 4, 128, GELU, norm_first=True, batch_first, dropout 0), the second
a deep copy of the first); the score h.q/8 cast to float64; the float64 operator D/S/L/P in
autograd, G/N as a custom autograd Function with the spec's norm-matched (N: tail-permuted)
backward; the readout gamma sqrt(r) sum w v + b and BCE with logits in float64; the invariant
checks and guards; torch.optim.AdamW; main D and S (1,024 updates of 128, evaluations at the 10
steps on the whole validation split), checkpoints of S at the parents and parent + 32 in memory,
the 10 forks of 32 updates with their 3 evaluations, and the S replay compared bit for bit.

Takes the same cell JSON as sb-train (fields of docs/n3a.md: arch, r, seed required; n, k,
epsilon, train, validation, batch, updates, eval_steps, parents, fork_updates, lr,
weight_decay, beta1, beta2, adam_eps). Prints one JSON line: times (wall and process CPU) of the
whole cell and of each phase, the work done (updates, evaluations, forks, shapes, parameters)
and every evaluation's (arm, parent, step, validation CE).
"""
import copy
import hashlib
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(1)

FEAT, WIDTH, HEADS, FFN, LAYERS = 7, 64, 4, 128, 2
ENVELOPE, TOL, VJP_ZERO = 700.0, 1e-10, 1e-14
DBL_MIN = sys.float_info.min
REG_EVAL = [0, 32, 64, 128, 160, 256, 512, 768, 800, 1024]
REG_PARENTS = [128, 768]


class Guard(Exception):
    """a workflow failure of the spec's guard table (the cell stops)"""


def stable_seed(*parts):
    h = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(h[:8], "big") & (2 ** 63 - 1)


def parse_cell(text):
    c = json.loads(text)
    if c.pop("family", None) != "n3a":
        sys.exit("torch_cell.py: not an N3-A cell")
    cell = dict(n=32, k=8, epsilon=None, train=4096, validation=2048, batch=128, updates=1024,
                eval_steps=REG_EVAL, parents=REG_PARENTS, fork_updates=32, lr=1e-3, weight_decay=1e-4,
                beta1=0.9, beta2=0.999, adam_eps=1e-8)
    for key in ("arch", "r", "seed"):
        if key not in c:
            sys.exit("torch_cell.py: fields 'arch', 'r' and 'seed' are required")
    for key, val in c.items():
        if key not in cell and key not in ("arch", "r", "seed"):
            sys.exit("torch_cell.py: unknown field '%s'" % key)
        cell[key] = val
    if cell["arch"] not in ("query", "transformer"):
        sys.exit("torch_cell.py: arch: query or transformer")
    if cell["epsilon"] is None:
        cell["epsilon"] = 1.0 / (cell["k"] + 1)
    if cell["updates"] != 1024 and (c.get("eval_steps") is None or c.get("parents") is None):
        sys.exit("torch_cell.py: with 'updates' other than 1024, give 'eval_steps' and 'parents'")
    for p in cell["parents"]:
        if p not in cell["eval_steps"] or p + cell["fork_updates"] not in cell["eval_steps"]:
            sys.exit("torch_cell.py: parent %d and %d + fork_updates must be evaluation steps" % (p, p))
    return cell


# ------------------------------------------------------------------ task (spec §2.4)

def generate_split(seed, r, split, N, n):
    def rng(what):
        return np.random.default_rng(stable_seed(seed, r, split, what))
    u = rng("support").random((N, n))
    z = np.zeros((N, n))
    np.put_along_axis(z, np.argsort(u, axis=1, kind="stable")[:, :r], 1.0, axis=1)  # the r smallest
    marker = z + rng("marker_noise").standard_normal((N, n))
    nuisance = rng("nuisance").standard_normal((N, n, FEAT - 1))
    x = np.concatenate([marker[..., None], nuisance], -1).astype(np.float32)
    v = rng("values").standard_normal((N, n)).astype(np.float32)
    y = ((z * v.astype(np.float64)).sum(1) / math.sqrt(r) >= 0).astype(np.float64)
    return dict(x=torch.from_numpy(x), v=torch.from_numpy(v), z=torch.from_numpy(z), y=torch.from_numpy(y))


def batch_schedule(seed, r, ntrain, batch, updates):
    rng = np.random.default_rng(stable_seed(seed, r, "batch_schedule"))
    total = batch * updates
    perms = [rng.permutation(ntrain) for _ in range((total + ntrain - 1) // ntrain)]
    return torch.from_numpy(np.concatenate(perms)[:total].reshape(updates, batch))


# ------------------------------------------------------------------ operators (spec §2.6-2.7)

def cov(p, g):
    """the softmax VJP p * (g - <p, g>), row by row"""
    return p * (g - (p * g).sum(-1, keepdim=True))


def check_mass(what, got, want):
    miss = (got - want).abs().max().item()
    if not miss <= TOL:
        raise Guard("INVALID_CONTROL: %s misses by %.3g (tolerance %g)" % (what, miss, TOL))


def check_q(q, kmask):
    check_mass("top-k softmax sum", q.sum(-1), 1.0)
    if not bool(((q > 0) == kmask).all()):
        raise Guard("INVALID_CONTROL: top-k softmax support is not exactly K")


class SurrogateTopK(torch.autograd.Function):
    """G (perm None) and N: forward the top-k softmax q, bit-identical to S; backward
    candidate = (1-eps) cov(q, g) + eps cov(t, g) (N: its tail entries permuted, in
    descending-score order), rescaled to the norm of S's gradient cov(q, g)."""

    @staticmethod
    def forward(ctx, c, kmask, order, perm, eps):
        q = torch.softmax(c.masked_fill(~kmask, -math.inf), -1)
        t = torch.softmax(c.masked_fill(kmask, -math.inf), -1)
        ctx.save_for_backward(q, t, order)
        ctx.perm, ctx.eps, ctx.k = perm, eps, int(kmask[0].sum())
        return q

    @staticmethod
    def backward(ctx, g):
        q, t, order = ctx.saved_tensors
        eps, k = ctx.eps, ctx.k
        a = cov(q, g)  # zero on T
        b = cov(t, g)  # zero on K
        na = a.norm(dim=-1, keepdim=True)
        nc = ((1 - eps) * a + eps * b).norm(dim=-1, keepdim=True)
        if not bool(torch.isfinite(na).all()):
            raise Guard("INVALID_CONTROL: sparse score gradient norm not finite")
        live = na > VJP_ZERO
        if bool((live & ~(torch.isfinite(nc) & (nc > DBL_MIN))).any()):
            raise Guard("INVALID_CONTROL: candidate norm with a live sparse norm")
        if ctx.perm is not None:
            tail = order[:, k:]
            b = b.scatter(-1, tail, b.gather(-1, tail).gather(-1, ctx.perm))
        out = torch.where(live, ((1 - eps) * a + eps * b) * (na / nc), torch.zeros_like(a))
        no = out.norm(dim=-1, keepdim=True)
        if not bool(((no - na).abs() <= TOL * na).all()):
            raise Guard("INVALID_CONTROL: G/N score gradient norm differs from the sparse norm")
        return out, None, None, None, None


def route(arm, s, k, eps, perm=None):
    """w = operator(s) for one arm, s [B, n] float64; the checks of the spec's guard table"""
    if not bool(torch.isfinite(s).all()):
        raise Guard("NON_FINITE_LOSS: a non-finite score")
    c = s - s.mean(-1, keepdim=True).detach()
    cd = c.detach()
    order = torch.sort(cd, dim=-1, descending=True, stable=True).indices
    top = cd.gather(-1, order[:, :k])
    if bool((top[:, 0] - top[:, k - 1] > ENVELOPE).any()):
        raise Guard("NUMERICAL_ENVELOPE: top-k score range exceeds %g" % ENVELOPE)
    kmask = torch.zeros_like(cd, dtype=torch.bool).scatter_(-1, order[:, :k], True)
    if arm == "D":
        w = torch.softmax(c, -1)
        check_mass("dense softmax sum", w.detach().sum(-1), 1.0)
        return w
    if arm in ("G", "N"):
        w = SurrogateTopK.apply(c, kmask, order, perm if arm == "N" else None, eps)
        q, t = w.detach(), torch.softmax(cd.masked_fill(kmask, -math.inf), -1)
        check_q(q, kmask)
        mix = (1 - eps) * q + eps * t
        check_mass("L mixture sum", mix.sum(-1), 1.0)
        check_mass("L mixture mass on K", (mix * kmask).sum(-1), 1 - eps)
        check_mass("L mixture mass on T", (mix * ~kmask).sum(-1), eps)
        return w
    q = torch.softmax(c.masked_fill(~kmask, -math.inf), -1)
    check_q(q.detach(), kmask)
    if arm == "S":
        return q
    if arm == "L":
        t = torch.softmax(c.masked_fill(kmask, -math.inf), -1)
        w = (1 - eps) * q + eps * t
        wd = w.detach()
        check_mass("L sum", wd.sum(-1), 1.0)
        check_mass("L mass on K", (wd * kmask).sum(-1), 1 - eps)
        check_mass("L mass on T", (wd * ~kmask).sum(-1), eps)
        return w
    if arm == "P":
        w = (1 - eps) * q + eps * kmask.to(q.dtype) / k
        wd = w.detach()
        check_mass("P sum", wd.sum(-1), 1.0)
        check_mass("P mass on K", (wd * kmask).sum(-1), 1.0)
        if bool((wd.masked_select(~kmask) != 0).any()):
            raise Guard("INVALID_CONTROL: P has weight on the tail")
        return w
    raise ValueError(arm)


# ------------------------------------------------------------------ models (spec §2.5)

class RoutingClassifier(nn.Module):
    def __init__(self, arch, r, k, eps):
        super().__init__()
        self.arch, self.r, self.k, self.eps = arch, r, k, eps
        if arch == "query":
            self.router = nn.Sequential(nn.Linear(FEAT, WIDTH), nn.GELU(), nn.Linear(WIDTH, WIDTH), nn.GELU())
        else:
            layer = nn.TransformerEncoderLayer(WIDTH, HEADS, FFN, dropout=0.0, activation="gelu", batch_first=True,
                                               norm_first=True)
            self.router = nn.Sequential(nn.Linear(FEAT, WIDTH),
                                        nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False))
        self.q = nn.Parameter(torch.randn(WIDTH) * 0.02)
        self.rho = nn.Parameter(torch.tensor(math.log(math.e - 1)))
        self.b = nn.Parameter(torch.zeros(()))

    def forward(self, x, v, arm, perm=None):
        h = self.router(x)                                   # [B, n, 64] float32
        s = (h @ self.q) / math.sqrt(WIDTH)                  # [B, n]
        self.scores_shape = list(s.shape)
        w = route(arm, s.double(), self.k, self.eps, perm)   # float64
        gamma = F.softplus(self.rho).double()
        logit = gamma * math.sqrt(self.r) * (w * v.double()).sum(-1) + self.b.double()
        return logit, w


# ------------------------------------------------------------------ the cell (spec §2.8-2.9)

class Clock:
    def __init__(self):
        self.wall, self.cpu = {}, {}

    def add(self, name, w0, c0):
        self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - w0
        self.cpu[name] = self.cpu.get(name, 0.0) + time.process_time() - c0


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    cell = parse_cell(sys.argv[1])
    arch, r, seed, n, k, eps = cell["arch"], cell["r"], cell["seed"], cell["n"], cell["k"], cell["epsilon"]
    B, U, FU = cell["batch"], cell["updates"], cell["fork_updates"]
    evals, clock = [], Clock()
    count = dict(updates=0, evaluations=0, forks=0, units=0)
    shapes = {}
    w0, c0 = time.perf_counter(), time.process_time()

    a, b = time.perf_counter(), time.process_time()
    tr = generate_split(seed, r, "train", cell["train"], n)
    va = generate_split(seed, r, "validation", cell["validation"], n)
    sched = batch_schedule(seed, r, cell["train"], B, U)
    torch.manual_seed(stable_seed(seed, r, arch, "initialization"))
    model = RoutingClassifier(arch, r, k, eps)
    init = copy.deepcopy(model.state_dict())
    params = list(model.parameters())
    clock.add("setup", a, b)

    def new_opt():
        return torch.optim.AdamW(params, lr=cell["lr"], betas=(cell["beta1"], cell["beta2"]), eps=cell["adam_eps"],
                                 weight_decay=cell["weight_decay"])

    def evaluate(arm, parent, step):
        a, b = time.perf_counter(), time.process_time()
        model.eval()
        with torch.no_grad():
            logit, w = model(va["x"], va["v"], "S" if arm in ("G", "N") else arm)
            ce = F.binary_cross_entropy_with_logits(logit, va["y"]).item()
            if not math.isfinite(ce):
                raise Guard("NON_FINITE_LOSS: validation cross-entropy")
            acc = ((logit >= 0) == (va["y"] > 0.5)).double().mean().item()
            mass = (w * va["z"]).sum(-1).mean().item()
            ent = -(w * torch.where(w > 0, w.log(), torch.zeros_like(w))).sum(-1).mean().item()
            supp = (w > 0).sum(-1).double().mean().item()
            gamma = F.softplus(model.rho.double()).item()
        model.train()
        evals.append([arm, parent, step, ce, acc, mass, ent, supp, gamma])
        shapes.setdefault("validation_x", list(va["x"].shape))
        count["evaluations"] += 1
        clock.add("evaluation", a, b)

    def update(opt, arm, row, perm=None):
        a, b = time.perf_counter(), time.process_time()
        idx = sched[row]
        x, v, y = tr["x"][idx], tr["v"][idx], tr["y"][idx]
        opt.zero_grad()
        logit, _ = model(x, v, arm, perm)
        loss = F.binary_cross_entropy_with_logits(logit, y)
        if not math.isfinite(loss.item()):
            raise Guard("NON_FINITE_LOSS: batch loss")
        loss.backward()
        ss = torch.stack([p.grad.square().sum() for p in params]).sum()
        if not math.isfinite(ss.item()):
            raise Guard("NON_FINITE_GRADIENT")
        opt.step()
        shapes.setdefault("batch_x", list(x.shape))
        shapes.setdefault("scores", model.scores_shape)
        count["updates"] += 1
        clock.add("update", a, b)

    def snapshot(opt):
        return copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict())

    at_parent, at_end = {}, {}
    for arm in ("D", "S"):
        a, b = time.perf_counter(), time.process_time()
        model.load_state_dict(init)
        opt = new_opt()
        evaluate(arm, None, 0)
        for t in range(1, U + 1):
            update(opt, arm, t - 1)
            if t in cell["eval_steps"]:
                evaluate(arm, None, t)
            if arm == "S" and t in cell["parents"]:
                at_parent[t] = snapshot(opt)
            if arm == "S" and t - FU in cell["parents"]:
                at_end[t - FU] = snapshot(opt)
        count["units"] += 1
        clock.add("main_" + arm, a, b)

    replay_equal = True
    a, b = time.perf_counter(), time.process_time()
    for p in cell["parents"]:
        for arm in ("S", "L", "P", "G", "N"):
            model.load_state_dict(at_parent[p][0])
            opt = new_opt()
            opt.load_state_dict(at_parent[p][1])
            evaluate(arm, p, 0)
            for j in range(1, FU + 1):
                perm = None
                if arm == "N":  # one key per fork update, a private generator; each row its own permutation
                    g = torch.Generator().manual_seed(stable_seed(seed, arch, r, p, j, "null_permutation"))
                    u = torch.rand(B, n - k, dtype=torch.float64, generator=g)
                    perm = torch.sort(u, dim=-1, stable=True).indices
                update(opt, arm, p + j - 1, perm)
                if j in (1, FU):
                    evaluate(arm, p, j)
            if arm == "S":  # the replay: parameters, moments and step equal bit for bit to main S at p + FU
                ms, os_ = at_end[p]
                cur = opt.state_dict()["state"]
                replay_equal &= all(torch.equal(v, ms[key]) for key, v in model.state_dict().items())
                replay_equal &= all(torch.equal(torch.as_tensor(cur[i][f]), torch.as_tensor(os_["state"][i][f]))
                                    for i in cur for f in ("step", "exp_avg", "exp_avg_sq"))
            count["forks"] += 1
            count["units"] += 1
    clock.add("forks", a, b)
    if not replay_equal:
        raise Guard("WORKFLOW_NONDETERMINISTIC: a fork's S replay differs from main S")

    out = dict(kind="n3a.torch", arch=arch, r=r, seed=seed, torch=torch.__version__, threads=torch.get_num_threads(),
               openblas_coretype=os.environ.get("OPENBLAS_CORETYPE", ""),
               parameters=sum(p.numel() for p in params), tensors=len(params), shapes=shapes,
               **count, s_replay_equal=replay_equal,
               seconds=time.perf_counter() - w0, cpu_seconds=time.process_time() - c0,
               phases_seconds={key: round(val, 3) for key, val in clock.wall.items()},
               phases_cpu_seconds={key: round(val, 3) for key, val in clock.cpu.items()},
               evals=[[e[0], e[1], e[2], round(e[3], 6)] for e in evals])
    print(json.dumps(out))


if __name__ == "__main__":
    try:
        main()
    except Guard as e:
        sys.exit("torch_cell.py: %s" % e)
