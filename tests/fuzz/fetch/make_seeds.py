#!/usr/bin/python3
"""make_seeds.py — write the small seed inputs of each fuzz target into seeds/TARGET/,
in the upstream formats (uses the fixture builder's writers)."""
import bz2
import gzip
import io
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "fixtures", "fetch"))
import build  # noqa: E402

r = np.random.default_rng(7)


def put(t, name, data):
    os.makedirs(os.path.join(HERE, "seeds", t), exist_ok=True)
    open(os.path.join(HERE, "seeds", t, name), "wb").write(data)


put("idx", "images", build.idx(r.integers(0, 256, (2, 4, 3))))
put("idx", "labels", build.idx(np.array([3, 1, 4], np.uint8)))
for dt in ("u1", "<i8", ">u2", "<f4"):
    buf = io.BytesIO()
    np.save(buf, np.arange(6).reshape(2, 3).astype(dt))
    put("npy", dt.replace("<", "le").replace(">", "be"), buf.getvalue())
X = r.integers(0, 256, (32, 32, 3, 1)).astype(np.uint8)
put("mat", "svhn", build.mat({"X": X, "y": np.array([[10.0]])}))
put("mat", "small", build.mat({"X": np.array([[1, 2]], np.uint8), "y": np.array([[3]], np.int16)}))
import scipy.io  # noqa: E402
b = io.BytesIO()
scipy.io.savemat(b, {"X": np.array([[1, 2]], np.uint8), "y": np.array([[1.5]])}, do_compression=False)
put("mat", "uncompressed", b.getvalue())
put("libsvm", "usps", b"10 1:-1 2:0.5 3:1\n1 4:-0.25 256:0.999\n\n")
put("cifar", "records", bytes([1, 7]) + bytes(range(256)) * 12 + bytes([2, 99]) + bytes(3072))
put("news", "doc", build.news_ref.fixture_doc(r, 3, 0, "x") + build.news_ref.fixture_doc(r, 1, 1, "x"))
put("archive", "tar.gz", build.tar_gz([("d", None), ("d/a.bin", b"abc"), ("d/b", b"x" * 100)]))
put("archive", "zip", build.zip_bytes([("gzip/a.gz", gzip.compress(b"hello", mtime=0)), ("b.txt", b"b")]))
put("archive", "gz", gzip.compress(b"hello world", mtime=0))
put("archive", "bz2", bz2.compress(b"hello world"))
