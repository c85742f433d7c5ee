#!/usr/bin/env python3
"""tests/golden/a8/gen_fitall.py — NumPy references for sb_a8_fit_predict (PROTOCOL A8 M3's
switch map: the M1 predictors fitted on ALL discovery groups, applied to new tasks).

Writes tests/golden/a8/fitall.txt: per case, the training rows and new rows, the ridge fit
on every training row (lambda = 1, columns standardised by the training mean and population
sd, an sd of 0 counting as 1, y centred) evaluated on the new rows, unrounded and rounded
(numpy.rint, clipped to [3, 30]), and the median baseline (numpy.median of all training y).

Format, per case: "case NAME n m p", then n lines "y x_1 .. x_p" (training), m lines
"x_1 .. x_p" (new), then m lines "raw ROUNDED" (ridge), then one line "raw ROUNDED" (median).
Run: /usr/bin/python3 tests/golden/a8/gen_fitall.py > tests/golden/a8/fitall.txt
"""
import numpy as np


def fit_predict(X, y, Xn, lam=1.0):
    mu = X.mean(axis=0)
    sd = X.std(axis=0)  # population sd (ddof 0)
    sd[sd == 0] = 1.0
    Z = (X - mu) / sd
    yb = y.mean()
    beta = np.linalg.solve(Z.T @ Z + lam * np.eye(X.shape[1]), Z.T @ (y - yb))
    return yb + ((Xn - mu) / sd) @ beta


def r(v):
    return int(np.clip(np.rint(v), 3, 30))


def case(name, X, y, Xn):
    raw = fit_predict(X, y, Xn)
    med = float(np.median(y))
    print("case %s %d %d %d" % (name, X.shape[0], Xn.shape[0], X.shape[1]))
    for i in range(len(y)):
        print("%r %s" % (float(y[i]), " ".join(repr(float(v)) for v in X[i])))
    for i in range(Xn.shape[0]):
        print(" ".join(repr(float(v)) for v in Xn[i]))
    for v in raw:
        print("%r %d" % (float(v), r(v)))
    print("%r %d" % (med, r(med)))


rng = np.random.default_rng(20261201)
# 1: the M3 shape: 60 discovery groups, 14 features; 18 confirmation groups, some far out
n, m, p = 60, 18, 14
scale, shift = rng.uniform(0.1, 5, size=p), rng.uniform(-3, 3, size=p)
X = rng.normal(size=(n, p)) * scale + shift
Xn = rng.normal(size=(m, p)) * scale * 1.5 + shift
y = np.clip(np.rint(12 + X[:, :3] @ np.array([2.0, -1.5, 0.7]) + rng.normal(0, 2, n)), 3, 31)
case("m3shape", X, y, Xn)
# 2: a constant column (sd 0 counts as 1) and a binary one; an even n (median halfway)
n, m, p = 16, 5, 4
X = rng.normal(size=(n, p))
X[:, 1] = 2.5
X[:, 2] = rng.integers(0, 2, n)
Xn = rng.normal(size=(m, p))
Xn[:, 1] = 4.0  # a new value of the constant column
y = rng.integers(3, 32, n).astype(float)
case("constcol", X, y, Xn)
# 3: one feature; predictions below 3 and above 30 are clipped
n, m, p = 7, 4, 1
X = np.arange(n, dtype=float).reshape(n, 1)
y = np.array([3, 8, 12, 17, 21, 26, 31], dtype=float)
Xn = np.array([[-9.0], [2.5], [3.1], [20.0]])
case("clip", X, y, Xn)
