#!/usr/bin/env python3
"""tests/golden/a8/gen.py — NumPy references for lib/a8 (tests/unit/test_a8.c).

Writes tests/golden/a8/ridge.txt: fixture data sets and their leave-one-group-out ridge
predictions (lambda = 1, columns standardised by the training mean and population sd, an
sd of 0 counting as 1, y centred), unrounded and rounded (numpy.rint, clipped to [3, 30]),
and the median baseline (numpy.median of the training targets).

Format, per case: "case NAME n p", then n lines "fold y x_1 .. x_p", then n lines
"raw ROUNDED" (ridge), then n lines "raw ROUNDED" (median).
Run: /usr/bin/python3 tests/golden/a8/gen.py > tests/golden/a8/ridge.txt
"""
import numpy as np


def loo(X, y, fold, lam=1.0):
    raw = np.zeros(len(y))
    med = np.zeros(len(y))
    for f in np.unique(fold):
        tr = fold != f
        Xt, yt = X[tr], y[tr]
        mu = Xt.mean(axis=0)
        sd = Xt.std(axis=0)  # population sd (ddof 0)
        sd[sd == 0] = 1.0
        Z = (Xt - mu) / sd
        yb = yt.mean()
        beta = np.linalg.solve(Z.T @ Z + lam * np.eye(X.shape[1]), Z.T @ (yt - yb))
        raw[~tr] = yb + ((X[~tr] - mu) / sd) @ beta
        med[~tr] = np.median(yt)
    return raw, med


def case(name, X, y, fold):
    raw, med = loo(X, y, fold)
    print("case %s %d %d" % (name, X.shape[0], X.shape[1]))
    for i in range(len(y)):
        print("%d %r %s" % (fold[i], float(y[i]), " ".join(repr(float(v)) for v in X[i])))
    for v in raw:
        print("%r %d" % (float(v), int(np.clip(np.rint(v), 3, 30))))
    for v in med:
        print("%r %d" % (float(v), int(np.clip(np.rint(v), 3, 30))))


rng = np.random.default_rng(20261130)
# 1: 10 datasets x 6 groups, 14 features (the M1 shape), targets from a noisy linear rule
n, p = 60, 14
X = rng.normal(size=(n, p)) * rng.uniform(0.1, 5, size=p) + rng.uniform(-3, 3, size=p)
fold = np.repeat(np.arange(10), 6)
y = np.clip(np.rint(12 + X[:, :3] @ np.array([2.0, -1.5, 0.7]) + rng.normal(0, 2, n)), 3, 31)
case("m1shape", X, y, fold)
# 2: a constant column and a binary one; 4 folds of unequal size
n, p = 17, 4
X = rng.normal(size=(n, p))
X[:, 1] = 2.5
X[:, 2] = rng.integers(0, 2, n)
fold = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3])
y = rng.integers(3, 32, n).astype(float)
case("constcol", X, y, fold)
# 3: one feature, even training sizes (medians halfway: rint halves to even)
n, p = 8, 1
X = np.arange(n, dtype=float).reshape(n, 1) ** 1.5
fold = np.array([0, 0, 1, 1, 2, 2, 3, 3])
y = np.array([3, 4, 5, 6, 7, 31, 12, 20], dtype=float)
case("onefeat", X, y, fold)
