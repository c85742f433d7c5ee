#!/usr/bin/env bash
# Cross-check our safetensors against Python: a file we write loads in the real
# `safetensors` package (or, where it is missing, a NumPy reader of the format)
# with identical values, BF16 included (checked with torch when available).
# (The reverse direction — a file Python wrote, read by us — is test_tensor,
# on a committed file, so it needs no Python.)
. "$(dirname "$0")/../shlib.sh"
py=""
for cand in python3 /usr/bin/python3; do
	if "$cand" -c 'import numpy' 2>/dev/null; then py=$cand; break; fi
done
if [ -z "$py" ]; then
	echo "# no python3 with numpy: cannot cross-check"; t_result 1 "python3 with numpy available"; t_done
fi
"$TOP/build/tests/test_tensor" --write "$T/ours.safetensors" >/dev/null
t_result $? "test_tensor --write wrote a file"
"$py" - "$T/ours.safetensors" <<'PY'
import json, struct, sys
import numpy as np
path = sys.argv[1]
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n])
data = raw[8 + n:]
try:
    from safetensors import safe_open
    with safe_open(path, framework="np") as f:  # BF16 has no NumPy dtype: load the others
        loaded = {k: f.get_tensor(k) for k in ("f32", "f64", "i32", "i64", "u8")}
        meta = f.metadata()
    assert meta == {"task": "roundtrip"}, meta
    how = "safetensors package"
except ImportError:
    loaded, how = None, "numpy reader"
dt = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64, "U8": np.uint8}
want = {
    "f32": np.array([[1.5, -2.0, 0.1], [1e-30, 3.4e38, -0.0]], np.float32),
    "f64": np.array([np.pi, -1e-300, 2.0]),
    "i32": np.array([-2**31, -1, 0, 2**31 - 1], np.int32),
    "i64": np.array([-2**63, 2**63 - 1], np.int64),
    "u8": np.array([0, 1, 127, 128, 255], np.uint8),
}
bad = 0
for k, w in want.items():
    b, e = hdr[k]["data_offsets"]
    mine = np.frombuffer(data[b:e], dtype=dt[hdr[k]["dtype"]]).reshape(hdr[k]["shape"])
    got = loaded[k] if loaded is not None else mine
    same = got.dtype == w.dtype and got.shape == w.shape and got.tobytes() == w.tobytes()
    print(("# ok" if same else "# not ok") + f" - {k} loads in Python ({how}) with identical bytes")
    bad += not same
b, e = hdr["bf16"]["data_offsets"]
bits = np.frombuffer(data[b:e], dtype=np.uint16)
vals = (bits.astype(np.uint32) << 16).view(np.float32)
same = list(vals) == [1.0, -2.0, float("inf")]
print(("# ok" if same else "# not ok") + f" - bf16 decodes to {list(vals)}")
bad += not same
assert hdr["__metadata__"]["task"] == "roundtrip", hdr["__metadata__"]
print("# ok - metadata")
sys.exit(1 if bad else 0)
PY
t_result $? "Python ($py) reads our file with identical values"
t_done
