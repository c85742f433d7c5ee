#!/usr/bin/env bash
# The synthetic marker task (PROTOCOL A1): generated deterministically from the
# seeds, pre-split (train n=20000 from s=seed, validation 4000 from s=seed+5000,
# test 5000 from s=seed+10000), one marker token 1 per row at positions 0..94,
# label = the token after the marker mod 10, other tokens in [2, 20000).
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/fetch/lib.sh"
need_py
cd "$T"
sb-fetch -q -c cache -o a synthetic_marker --seeds 0-2 >out.a 2>err.a; rc=$?
t_result $rc "synthetic_marker --seeds 0-2 (exit $rc: $(head -c 200 err.a))"
sb-fetch -q -c cache -o b synthetic_marker --seeds 2,1 >out.b 2>err.b; rc=$?
t_result $rc "synthetic_marker --seeds 2,1 (exit $rc)"
msg=$("$PY" - <<'PY' 2>&1
import json, struct, sys
import numpy as np
def read(p):
    raw = open(p, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n]); m = h.pop("__metadata__"); d = raw[8 + n:]
    dt = {"I32": np.int32, "U8": np.uint8}
    return {k: np.frombuffer(d[v["data_offsets"][0]:v["data_offsets"][1]], dt[v["dtype"]]).reshape(v["shape"]) for k, v in h.items()}, m
bad = []
pa, ma = read("a/synthetic_marker/pool.safetensors"); ta, _ = read("a/synthetic_marker/test.safetensors")
pb, _ = read("b/synthetic_marker/pool.safetensors"); tb, _ = read("b/synthetic_marker/test.safetensors")
if pa["x"].shape != (3 * 24000, 96) or ta["x"].shape != (3 * 5000, 96): bad.append(f"shapes {pa['x'].shape} {ta['x'].shape}")
if ma["presplit"] != "1" or ma["seq_len"] != "96" or ma["vocab"] != "20000" or ma["classes"] != "10": bad.append(f"metadata {ma}")
g = json.loads(ma["generator"])
if g["seeds"] != [0, 1, 2] or g["n_train"] != 20000: bad.append(f"generator {g}")
for name, d in (("pool", pa), ("test", ta)):
    x, y = d["x"], d["y"]
    ones = (x == 1)
    if not (ones.sum(1) == 1).all(): bad.append(f"{name}: not exactly one marker per row")
    pos = ones.argmax(1)
    if pos.max() > 94 or pos.min() != 0: bad.append(f"{name}: marker positions {pos.min()}..{pos.max()}")
    if not (y == x[np.arange(len(x)), pos + 1] % 10).all(): bad.append(f"{name}: label is not x[pos+1] % 10")
    rest = x[~ones]
    if rest.min() < 2 or rest.max() >= 20000: bad.append(f"{name}: tokens {rest.min()}..{rest.max()}")
    if not (d["len"] == 96).all(): bad.append(f"{name}: len not 96")
    counts = np.bincount(y, minlength=10) / len(y)
    if abs(counts - 0.1).max() > 0.02: bad.append(f"{name}: label frequencies {counts}")
# layout: per seed, train then validation; the test file has part 2
s, p = pa["seed"], pa["part"]
for k in range(3):
    blk = slice(24000 * k, 24000 * (k + 1))
    if not ((s[blk] == k).all() and (p[blk][:20000] == 0).all() and (p[blk][20000:] == 1).all()): bad.append(f"pool layout of seed {k}")
if not ((ta["part"] == 2).all() and (ta["seed"] == np.repeat([0, 1, 2], 5000)).all()): bad.append("test layout")
# each seed's examples do not depend on the other seeds asked for
for k in (1, 2):
    a_rows = pa["x"][pa["seed"] == k]; b_rows = pb["x"][pb["seed"] == k]
    if not np.array_equal(a_rows, b_rows): bad.append(f"seed {k} differs between --seeds 0-2 and 2,1")
    if not np.array_equal(ta["x"][ta["seed"] == k], tb["x"][tb["seed"] == k]): bad.append(f"test seed {k} differs")
# train, validation and test draws differ (different generator seeds)
if np.array_equal(pa["x"][:100], pa["x"][20000:20100]) or np.array_equal(pa["x"][:100], ta["x"][:100]): bad.append("parts repeat")
print("; ".join(bad) if bad else "ok")
sys.exit(1 if bad else 0)
PY
)
t_result $? "generated data follows PROTOCOL A1 and is deterministic per seed" "$msg"
# re-run: verified, not regenerated; other seeds: regenerated
sb-fetch -q -c cache -o a synthetic_marker --seeds 0-2 >out.c 2>/dev/null
[ "$(json_field out.c fetch.split status | sort -u)" = verified ]; t_result $? "same seeds again: verified, not rewritten"
sb-fetch -q -c cache -o a synthetic_marker --seeds 0-3 >out.d 2>/dev/null
[ "$(json_field out.d fetch.split status | sort -u)" = written ]; t_result $? "other seeds: regenerated"
sb-fetch -q -o a synthetic_marker --seeds 3-1 >/dev/null 2>err.e; rc=$?
[ $rc -eq 2 ] && grep -q "invalid value for --seeds" err.e; t_result $? "bad --seeds: usage error (exit $rc)"
t_done
