#!/usr/bin/env python3
"""Write tests/golden/safetensors/py_written.safetensors with the real
`safetensors` package (pip install safetensors numpy). test_tensor reads it and
checks every value; run this script again only to regenerate the file."""
import os
import numpy as np
from safetensors.numpy import save_file

here = os.path.dirname(os.path.abspath(__file__))
t = {
    "f32": np.array([[0.5, -1.25, 3.0], [1e-7, 65504.0, -0.0]], dtype=np.float32),
    "f64": np.array([np.pi, -np.e, 1e300], dtype=np.float64),
    "i32": np.array([-2147483648, 0, 2147483647], dtype=np.int32),
    "i64": np.array([-(2**63), 1, 2**63 - 1], dtype=np.int64),
    "u8": np.arange(10, dtype=np.uint8).reshape(2, 5),
    "scalar": np.array(7.0, dtype=np.float32),
    "empty": np.zeros((0, 3), dtype=np.float32),
}
save_file(t, os.path.join(here, "py_written.safetensors"), metadata={"who": "python safetensors", "n": "7"})
