"""Compares the tensors of two safetensors files, read by the format's specification: prints
each tensor's relative error ||a - b|| / ||b|| in float64 and exits 1 when any exceeds the
tolerance (argv[3]), or when names, dtypes or shapes differ."""
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I32": np.int32,
          "I64": np.int64}


def read(path):
    data = open(path, "rb").read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    header.pop("__metadata__", None)
    body = data[8 + length:]
    tensors = {}
    for name, entry in header.items():
        begin, stop = entry["data_offsets"]
        array = np.frombuffer(body[begin:stop], dtype=DTYPES[entry["dtype"]])
        tensors[name] = array.reshape(entry["shape"]).astype(np.float64)
    return tensors


a, b, tolerance = read(sys.argv[1]), read(sys.argv[2]), float(sys.argv[3])
if sorted(a) != sorted(b):
    sys.exit(f"different tensors: {sorted(set(a) ^ set(b))}")
worst = 0.0
for name in sorted(a):
    if a[name].shape != b[name].shape:
        sys.exit(f"{name}: shape {a[name].shape} vs {b[name].shape}")
    norm = np.linalg.norm(b[name])
    error = np.linalg.norm(a[name] - b[name]) / (norm if norm > 0 else 1.0)
    worst = max(worst, error)
    print(f"{name} {error:.3g}")
print(f"worst {worst:.3g} {'within' if worst <= tolerance else 'ABOVE'} {tolerance:g}")
sys.exit(0 if worst <= tolerance else 1)
