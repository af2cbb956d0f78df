"""Seed corpora for the fuzz targets (scripts/fuzz.sh): small valid .npy files of every dtype
and a Fortran-order one, safetensors checkpoints, IDX files (plain and gzip, and the head of
the real Fashion-MNIST labels when installed), the tests' .mlir files and ONNX's node test
models. Usage: make_seeds.py REPO CORPUS_DIR"""
import gzip
import json
import os
import shutil
import struct
import sys

import numpy as np


def npy_seeds(out):
    rng = np.random.default_rng(1)
    arrays = {
        "f32": rng.uniform(-1, 1, (3, 4)).astype(np.float32),
        "f64": rng.uniform(-1, 1, (5,)).astype(np.float64),
        "f16": rng.uniform(-1, 1, (2, 2, 2)).astype(np.float16),
        "i32": rng.integers(-50, 50, (4,)).astype(np.int32),
        "i64": rng.integers(-50, 50, (2, 3)).astype(np.int64),
        "bool": rng.integers(0, 2, (6,)).astype(np.bool_),
        "scalar": np.array(3.5, np.float32),
        "empty": np.zeros((0, 3), np.float32),
    }
    for name, a in arrays.items():
        np.save(os.path.join(out, name + ".npy"), a)
    np.save(os.path.join(out, "fortran.npy"), np.asfortranarray(arrays["f32"]))


def safetensors_bytes(tensors, metadata):
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, a) in tensors.items():
        data = a.tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def safetensors_seeds(out):
    rng = np.random.default_rng(2)
    w = rng.uniform(-1, 1, (3, 2)).astype(np.float32)
    seeds = {
        "weights": ({"dense/w": ("F32", w), "dense/b": ("F32", np.zeros(2, np.float32))},
                    {"epochs_done": "1", "format": "smelt"}),
        "ints": ({"step": ("I64", np.array([7], np.int64)), "m": ("F64", np.ones((2, 2)))}, {}),
        "empty": ({}, {"a": "b"}),
    }
    for name, (tensors, metadata) in seeds.items():
        with open(os.path.join(out, name + ".safetensors"), "wb") as f:
            f.write(safetensors_bytes(tensors, metadata))
    # A shape nested 100,000 deep, which once overflowed the stack in the JSON library's
    # recursive copy (about 200 KB: it reaches the reader whole under FUZZ_MAX_LEN).
    deep = b'{"w": {"dtype": "F32", "shape": ' + b"[" * 100000 + b"]" * 100000 + \
        b', "data_offsets": [0, 0]}}'
    with open(os.path.join(out, "deep-shape.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(deep)) + deep)


def idx_bytes(dims, data):
    return bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + data


def idx_seeds(out):
    plain = idx_bytes([2, 3], bytes(range(6)))
    open(os.path.join(out, "plain.idx"), "wb").write(plain)
    open(os.path.join(out, "labels.idx"), "wb").write(idx_bytes([5], bytes([1, 2, 3, 4, 5])))
    open(os.path.join(out, "gzip.idx.gz"), "wb").write(gzip.compress(plain))
    real = "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz"
    if os.path.exists(real):
        labels = gzip.open(real).read()
        head = idx_bytes([64], labels[8:72])
        open(os.path.join(out, "fashion-labels-head.idx.gz"), "wb").write(gzip.compress(head))


def mlir_seeds(repo, out):
    for folder in ("tests/ir", "tests/passes", "tests/tools"):
        for name in sorted(os.listdir(os.path.join(repo, folder))):
            if name.endswith(".mlir"):
                text = open(os.path.join(repo, folder, name)).read()
                # One seed per split-input-file case: small inputs compile in milliseconds.
                for i, case in enumerate(text.split("// -----")):
                    with open(os.path.join(out, f"{folder.replace('/', '-')}-{name}-{i}"), "w") as f:
                        f.write(case)


def onnx_seeds(repo, out):
    """The models of ONNX's node tests (libonnx-testdata), one file per test, and the models of
    the importer's error tests that once crashed it or read past what they held (a Gather with
    one input, a Concat with none, an initializer claiming 2^39 floats, a MatMul of a scalar,
    a ScatterND into data with no rows...; tests/tools/onnx_tool.py makes them)."""
    tests = "/usr/share/libonnx-testdata/data/node"
    if os.path.isdir(tests):
        for name in sorted(os.listdir(tests)):
            model = os.path.join(tests, name, "model.onnx")
            if os.path.isfile(model):
                shutil.copyfile(model, os.path.join(out, name + ".onnx"))
    sys.path.insert(0, os.path.join(repo, "tests", "tools"))
    try:
        import onnx_tool
    except ImportError:  # no onnx module for this python: the node tests alone
        return
    onnx_tool.missing_input(os.path.join(out, "gather-one-input.onnx"), "Gather")
    onnx_tool.missing_input(os.path.join(out, "concat-no-input.onnx"), "Concat")
    onnx_tool.claims_too_much(os.path.join(out, "claims-too-much.onnx"))
    onnx_tool.malformed(os.path.join(out, "cast-without-to.onnx"))
    onnx_tool.invalid_models(out)


def main(repo, corpus):
    for target, make in (("npy", npy_seeds), ("safetensors", safetensors_seeds),
                         ("idx", idx_seeds), ("mlir", lambda out: mlir_seeds(repo, out)),
                         ("onnx", lambda out: onnx_seeds(repo, out))):
        out = os.path.join(corpus, target + "-seeds")
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        make(out)


if __name__ == "__main__":
    main(*sys.argv[1:3])
