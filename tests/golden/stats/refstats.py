"""Reference implementations shared by gen.py and gen_fixtures.py, transcribed from
the definitions (PROTOCOL A7 and lib/stats.h), not from the C code."""
from fractions import Fraction

import numpy as np
import scipy.special as sp
from scipy import stats


def best_epoch(acc, patience):
    """PROTOCOL A4's best epoch: the first epoch of the maximal accuracy among those before
    early stopping (patience epochs without strict improvement; 0 = never)."""
    best, since = 0, 0
    for e in range(1, len(acc)):
        if acc[e] > acc[best]:
            best, since = e, 0
        else:
            since += 1
            if patience > 0 and since >= patience:
                break
    return best


def a7_ttest(d):
    d = np.asarray(d, float)
    n = len(d)
    if n < 2:
        return 1.0
    mean = d.mean()
    sd = 0.0 if np.all(d == d[0]) else d.std(ddof=1)
    if sd == 0:
        return 0.0 if mean != 0 else 1.0
    if mean == 0:
        return 1.0
    t = abs(mean) / (sd / np.sqrt(n))
    df = n - 1
    return float(sp.betainc(df / 2, 0.5, df / (df + t * t)))


def exact_signed_rank(d):
    """Exact two-sided p of R+ over all sign flips of the observed mid-ranks (zeros
    dropped): integer DP on doubled ranks, exact rational arithmetic."""
    d = np.asarray(d, float)
    d = d[d != 0]
    n = len(d)
    if n == 0:
        return 0.0, 1.0
    r = stats.rankdata(np.abs(d))
    w = [int(round(2 * x)) for x in r]
    obs = sum(wi for wi, di in zip(w, d) if di > 0)
    counts = {0: 1}
    for wi in w:
        nxt = dict(counts)
        for s, c in counts.items():
            nxt[s + wi] = nxt.get(s + wi, 0) + c
        counts = nxt
    tot = 2 ** n
    less = sum(c for s, c in counts.items() if s <= obs)
    greater = sum(c for s, c in counts.items() if s >= obs)
    p = min(Fraction(1), 2 * Fraction(min(less, greater), tot))
    rp = obs / 2
    rm = sum(w) / 2 - rp
    return min(rp, rm), float(p)


def rule_ref(x, label, best):
    nt, npred = x.shape
    preds, gains = [], []
    for h in range(nt):
        best_c, choice = -1, None
        for p in range(npred):
            tr = [x[t, p] for t in range(nt) if t != h]
            u = sorted(set(tr))
            for thr in [(u[i] + u[i + 1]) / 2 for i in range(len(u) - 1)]:
                for dr in (1, -1):
                    c = sum(((x[t, p] > thr) if dr > 0 else (x[t, p] < thr)) == bool(label[t])
                            for t in range(nt) if t != h)
                    if c > best_c:
                        best_c, choice = c, (p, thr, dr)
        pred = 0
        if choice:
            p, thr, dr = choice
            pred = int(x[h, p] > thr if dr > 0 else x[h, p] < thr)
        preds.append(pred)
        gains.append(best[h] if pred else 0.0)
    mean = sum(gains) / nt
    wins = sum(g > 0 for g in gains)
    losses = sum(g < 0 for g in gains)
    nons = sum(preds)
    return mean, wins, losses, nons, int(mean > 0 and wins > losses and nons >= 1), preds


