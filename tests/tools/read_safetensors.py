"""Reads a safetensors file by the format's specification (8-byte little-endian header length,
JSON header, raw little-endian data), independently of Smelt, and prints each tensor."""
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I32": np.int32,
          "I64": np.int64, "BOOL": np.bool_}

path = sys.argv[1]
data = open(path, "rb").read()
(length,) = struct.unpack("<Q", data[:8])
header = json.loads(data[8:8 + length])
body = data[8 + length:]
print("metadata", json.dumps(header.pop("__metadata__", {}), sort_keys=True))
end = 0
for name, entry in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
    begin, stop = entry["data_offsets"]
    assert begin == end, f"{name}: gap or overlap at {begin}"
    array = np.frombuffer(body[begin:stop], dtype=DTYPES[entry["dtype"]])
    array = array.reshape(entry["shape"])
    assert np.all(np.isfinite(array)), name
    print(name, entry["dtype"], list(array.shape))
    end = stop
assert end == len(body), "trailing bytes"
