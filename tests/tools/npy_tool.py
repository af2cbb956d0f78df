"""Test helper for `smelt run` lit tests: makes random .npy inputs and checks outputs against
a float64 NumPy reference of the model under test."""
import json
import struct
import sys

import numpy as np


def random(path, shape, dtype, seed):
    rng = np.random.default_rng(int(seed))
    dims = [int(d) for d in shape.split(",") if d]
    if dtype.startswith("i"):
        x = rng.integers(-50, 50, size=dims).astype(dtype)
    else:
        x = rng.uniform(-1.0, 1.0, size=dims).astype(dtype)
        x[np.abs(x) < 1e-3] = 0.5  # never zeros
    np.save(path, x)


def rel(got, ref):
    return float(np.linalg.norm(got.astype(np.float64) - ref) / np.linalg.norm(ref))


def check_dense(dir):
    """y = relu(x @ w + b), s = sum(y, axis=1) against float64."""
    x, w, b = (np.load(f"{dir}/{n}.npy").astype(np.float64) for n in ("x", "w", "b"))
    y_ref = np.maximum(x @ w + b, 0.0)
    y, s = np.load(f"{dir}/out/y.npy"), np.load(f"{dir}/out/rowsum.npy")
    assert y.dtype == np.float32 and y.shape == y_ref.shape, (y.dtype, y.shape)
    assert s.dtype == np.float32 and s.shape == (x.shape[0],), (s.dtype, s.shape)
    ey, es = rel(y, y_ref), rel(s, y_ref.sum(axis=1))
    k = np.load(f"{dir}/out/result2.npy")
    assert k.dtype == np.int64 and (k == np.argmax(y_ref, axis=1)).all()
    assert ey < 1e-5 and es < 1e-5, (ey, es)
    print(f"dense OK rel_err y={ey:.2e} rowsum={es:.2e}")


def check_conv(x_path, w_path, y_path, strides, padding):
    """y = conv2d(x NHWC, w HWIO) with strides "sh,sw" and padding "top,bottom,left,right",
    against float64 loops."""
    x, w = np.load(x_path).astype(np.float64), np.load(w_path).astype(np.float64)
    sh, sw = (int(v) for v in strides.split(","))
    t, b, l, r = (int(v) for v in padding.split(","))
    xp = np.pad(x, ((0, 0), (t, b), (l, r), (0, 0)))
    kh, kw, _, f = w.shape
    oh, ow = (xp.shape[1] - kh) // sh + 1, (xp.shape[2] - kw) // sw + 1
    ref = np.zeros((x.shape[0], oh, ow, f))
    for i in range(oh):
        for j in range(ow):
            window = xp[:, i * sh:i * sh + kh, j * sw:j * sw + kw, :]
            ref[:, i, j, :] = np.tensordot(window, w, axes=([1, 2, 3], [0, 1, 2]))
    y = np.load(y_path)
    assert y.dtype == np.float32 and y.shape == ref.shape, (y.dtype, y.shape, ref.shape)
    e = rel(y, ref)
    assert e < 1e-5, e
    print(f"conv OK rel_err={e:.2e}")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "random":
        random(*sys.argv[2:6])
    elif cmd == "check-dense":
        check_dense(sys.argv[2])
    elif cmd == "check-conv":  # check-conv X W Y STRIDES PADDING
        check_conv(*sys.argv[2:7])
    elif cmd == "truncate":
        data = open(sys.argv[2], "rb").read()
        open(sys.argv[3], "wb").write(data[: int(sys.argv[4])])
    elif cmd == "flip":  # flip IN OUT OFFSET: a copy with the byte at OFFSET inverted
        data = bytearray(open(sys.argv[2], "rb").read())
        data[int(sys.argv[4])] ^= 0xFF
        open(sys.argv[3], "wb").write(data)
    elif cmd == "values":  # values OUT DTYPE V,V,...: a 1-D array of exactly these values
        np.save(sys.argv[2], np.array([int(v) for v in sys.argv[4].split(",")], sys.argv[3]))
    elif cmd == "safetensors":  # safetensors OUT NAME=FILE.npy ...: the arrays, by the spec
        codes = {"float32": "F32", "float64": "F64", "float16": "F16", "int32": "I32",
                 "int64": "I64", "bool": "BOOL"}
        header, blobs, offset = {}, [], 0
        for spec in sys.argv[3:]:
            name, file = spec.split("=", 1)
            a = np.ascontiguousarray(np.load(file))
            header[name] = {"dtype": codes[str(a.dtype)], "shape": list(a.shape),
                            "data_offsets": [offset, offset + a.nbytes]}
            blobs.append(a.tobytes())
            offset += a.nbytes
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        with open(sys.argv[2], "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    elif cmd == "print":  # print FILE: dtype and values, for FileCheck
        a = np.load(sys.argv[2])
        print(a.dtype, " ".join(str(v) for v in a.ravel()))
    else:
        sys.exit(f"unknown command {cmd}")
